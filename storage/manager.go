package storage

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// metadataTopic is KRaft's metadata log, which raftmeta keeps; storage
// leaves its directory alone if it shares a log dir.
const metadataTopic = "__cluster_metadata"

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	FS        vfs.FS
	Dirs      []string // log.dirs
	NodeID    int32
	ClusterID string
	Logger    *slog.Logger     // nil: slog.Default()
	Now       func() time.Time // nil: time.Now
	// Decompress inflates the records section of a compressed batch, for
	// FindOffsetByTimestamp. The broker passes protocol's codecs; without
	// it a timestamp search that meets a compressed batch fails with
	// ErrNoDecompressor.
	Decompress func(codec protocol.Codec, compressed []byte) ([]byte, error)
	// Compress appends src compressed with codec to dst, as
	// protocol.Compress: the cleaner recompresses a compressed batch it
	// rewrites with the batch's own codec, as Kafka does. Without it
	// cleaning a log that holds a compressed batch needing a rewrite fails
	// with ErrNoCompressor (the log is then left uncleaned).
	Compress func(codec protocol.Codec, dst, src []byte) ([]byte, error)
	// TopicConfig gives the config of a topic's logs found on disk, which
	// recovery needs (index.interval.bytes, segment.index.bytes) before
	// the broker calls GetOrCreateLog or SetConfig. nil: DefaultLogConfig.
	TopicConfig func(topic string) LogConfig
	// ProducerSnapshotTxns decodes a producer-state snapshot file
	// (<offset>.snapshot, which the broker writes) into the first offset
	// of each producer's ongoing transaction, so that the transaction
	// index is rebuilt from the snapshot nearest below the offsets it
	// needs rather than from the start of the log. nil: always from the
	// start.
	ProducerSnapshotTxns func(snapshot []byte) (map[int64]int64, error)
	// SyncStallThreshold is how long an fsync of a segment's files may
	// run before it is reported as stalled (syncwatch.go); 0 means
	// DefaultSyncStallThreshold.
	SyncStallThreshold time.Duration
	// LoadProgressInterval is how often OpenManager logs how far loading
	// and recovering the logs has got, once it has taken that long (a
	// shorter load logs nothing); 0 means DefaultLoadProgressInterval.
	LoadProgressInterval time.Duration
	// MaxOpenSegmentFiles bounds the segment .log files held open at
	// once: past it the least recently used idle ones are closed, and
	// they reopen on their next read or write (logfile.go). 0 means half
	// the process's RLIMIT_NOFILE, at least 16 and at most 50,000 (2,000
	// where the limit is unknown).
	MaxOpenSegmentFiles int
	// SegmentFileIdle is how long a segment's .log stays open unused
	// before it is closed; 0 means one minute.
	SegmentFileIdle time.Duration
}

// Manager owns the log dirs: their meta.properties, checkpoint files,
// clean-shutdown markers and the set of logs in them.
type Manager struct {
	fsys       vfs.FS
	dirs       []string
	nodeID     int32
	clusterID  string
	logger     *slog.Logger
	now        func() time.Time
	decompress func(protocol.Codec, []byte) ([]byte, error)
	compress   func(protocol.Codec, []byte, []byte) ([]byte, error)
	topicCfg   func(string) LogConfig
	snapTxns   func([]byte) (map[int64]int64, error)
	dirIDs     map[string][16]byte
	deleter    *fileDeleter
	syncWatch  *syncWatch
	files      *fdCache // the segment .log files open now (logfile.go)

	mu      sync.RWMutex
	logs    map[TopicPartition]*Log
	offline map[string]bool // log dirs a disk error took offline (SetDirOffline)
	// halfMade are partition directories whose creation failed and
	// which could not be removed then (removeHalfMadeLocked).
	halfMade map[string]bool
	closed   bool
	// creating holds the logs a CreateLogs call is making outside mu;
	// the channel closes when they are done. creatingWG counts those
	// calls, which Close waits for.
	creating   map[TopicPartition]chan struct{}
	creatingWG sync.WaitGroup

	ckptMu sync.Mutex // one checkpoint writer at a time

	// cleanerCkpt is each log dir's cleaner-offset-checkpoint: the offset
	// up to which each compacted log has been cleaned.
	cleanerMu   sync.Mutex
	cleanerCkpt map[string]map[TopicPartition]int64

	// Recovery counters, for tests and logs.
	recoveredBatches  atomic.Int64
	recoveredSegments atomic.Int64
	// progress reports how far OpenManager has got loading the logs; it
	// is only used while OpenManager runs.
	progress *loadProgress
}

// OpenManager opens the log dirs. It formats a dir that has no
// meta.properties (version=1, cluster.id, node.id, directory.id, as a
// KRaft broker's) if the dir is empty, and refuses one formatted for
// another cluster or node. It loads every <topic>-<partition> directory;
// unless the dir holds the clean-shutdown marker it recovers each log from
// its recovery point (checking every batch's CRC and truncating a torn
// tail). It then removes the marker so that a crash is detected next time.
func OpenManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.FS == nil {
		return nil, errors.New("open storage: no filesystem")
	}
	if len(cfg.Dirs) == 0 {
		return nil, errors.New("open storage: no log dirs")
	}
	if cfg.ClusterID == "" || cfg.NodeID < 0 {
		return nil, fmt.Errorf("open storage: cluster id %q and node id %d required", cfg.ClusterID, cfg.NodeID)
	}
	m := &Manager{
		fsys:        cfg.FS,
		nodeID:      cfg.NodeID,
		clusterID:   cfg.ClusterID,
		logger:      cfg.Logger,
		now:         cfg.Now,
		decompress:  cfg.Decompress,
		compress:    cfg.Compress,
		topicCfg:    cfg.TopicConfig,
		snapTxns:    cfg.ProducerSnapshotTxns,
		dirIDs:      map[string][16]byte{},
		logs:        map[TopicPartition]*Log{},
		deleter:     &fileDeleter{},
		cleanerCkpt: map[string]map[TopicPartition]int64{},
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.syncWatch = newSyncWatch(cfg.SyncStallThreshold, m.logger)
	m.files = newFDCache(cfg.MaxOpenSegmentFiles, cfg.SegmentFileIdle)
	m.logger.Info("segment files open at most", "max", m.files.max, "configured", cfg.MaxOpenSegmentFiles, "nofile_limit", openFileLimit())
	if m.topicCfg == nil {
		m.topicCfg = func(string) LogConfig { return DefaultLogConfig() }
	}
	for _, d := range cfg.Dirs {
		d = filepath.Clean(d)
		if _, dup := m.dirIDs[d]; dup {
			return nil, fmt.Errorf("open storage: log dir %s listed twice", d)
		}
		id, err := m.prepareDir(d)
		if err != nil {
			return nil, fmt.Errorf("open storage: %w", err)
		}
		m.dirIDs[d] = id
		m.dirs = append(m.dirs, d)
	}
	m.progress = m.startLoadProgress(cfg.LoadProgressInterval)
	for _, d := range m.dirs {
		if err := m.loadDir(d); err != nil {
			m.progress.finish(m.recoveredSegments.Load(), m.recoveredBatches.Load())
			m.closeAll()
			return nil, fmt.Errorf("open storage: %w", err)
		}
	}
	m.progress.finish(m.recoveredSegments.Load(), m.recoveredBatches.Load())
	for _, d := range m.dirs {
		err := m.fsys.Remove(filepath.Join(d, cleanShutdownFile))
		if err == nil {
			err = m.fsys.SyncDir(d)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.closeAll()
			return nil, fmt.Errorf("open storage: remove clean shutdown marker: %w", err)
		}
	}
	return m, nil
}

func (m *Manager) nowMs() int64 { return m.now().UnixMilli() }

// prepareDir creates and formats a log dir if needed and checks its
// identity. It returns the dir's directory.id.
func (m *Manager) prepareDir(d string) ([16]byte, error) {
	if err := mkdirAllDurable(m.fsys, d); err != nil {
		return [16]byte{}, err
	}
	name := filepath.Join(d, metaPropertiesFile)
	data, err := vfs.ReadFile(m.fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		if err := m.checkEmpty(d); err != nil {
			return [16]byte{}, err
		}
		meta := metaProperties{version: metaPropertiesVersion1, clusterID: m.clusterID, nodeID: m.nodeID, directoryID: randomUUID()}
		if err := vfs.WriteFileAtomic(m.fsys, name, encodeMetaProperties(meta, m.now())); err != nil {
			return [16]byte{}, fmt.Errorf("format %s: %w", d, err)
		}
		m.logger.Info("formatted log dir", "dir", d, "cluster_id", m.clusterID, "node_id", m.nodeID)
		return meta.directoryID, nil
	}
	if err != nil {
		return [16]byte{}, err
	}
	meta, err := decodeMetaProperties(data)
	if err != nil {
		return [16]byte{}, fmt.Errorf("%s: %w", name, err)
	}
	if meta.clusterID != m.clusterID {
		return [16]byte{}, fmt.Errorf("log dir %s belongs to cluster %s, not %s", d, meta.clusterID, m.clusterID)
	}
	if meta.nodeID != m.nodeID {
		return [16]byte{}, fmt.Errorf("log dir %s belongs to node %d, not %d", d, meta.nodeID, m.nodeID)
	}
	if meta.version != metaPropertiesVersion1 || meta.directoryID == ([16]byte{}) {
		// As Kafka, give the dir an id (and the KRaft form) on first use.
		meta.directoryID = randomUUID()
		if err := vfs.WriteFileAtomic(m.fsys, name, encodeMetaProperties(meta, m.now())); err != nil {
			return [16]byte{}, fmt.Errorf("rewrite %s: %w", name, err)
		}
	}
	return meta.directoryID, nil
}

// mkdirAllDurable creates d and its missing parents and syncs the parent
// of each directory it created, so that a crash cannot undo them.
func mkdirAllDurable(fsys vfs.FS, d string) error {
	existing := d
	for {
		if _, err := fsys.Stat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		existing = parent
	}
	if existing == d {
		return nil
	}
	if err := fsys.MkdirAll(d, 0o755); err != nil {
		return err
	}
	for p := d; p != existing; {
		parent := filepath.Dir(p)
		if err := fsys.SyncDir(parent); err != nil {
			return err
		}
		p = parent
	}
	return nil
}

// ErrFormatted is returned by FormatDir for a dir that already has a
// meta.properties.
var ErrFormatted = errors.New("already formatted")

// FormatDir formats log dir d for clusterID and nodeID as kafka-storage
// format does: it creates the dir, refuses one that holds data but no
// meta.properties, and writes meta.properties (version=1 with a new
// directory.id). A dir that has a meta.properties is left as it is and
// ErrFormatted returned, with the cluster id it holds.
func FormatDir(fsys vfs.FS, d, clusterID string, nodeID int32, now time.Time) (string, error) {
	if clusterID == "" || nodeID < 0 {
		return "", fmt.Errorf("format %s: cluster id %q and node id %d required", d, clusterID, nodeID)
	}
	if err := mkdirAllDurable(fsys, d); err != nil {
		return "", fmt.Errorf("format %s: %w", d, err)
	}
	name := filepath.Join(d, metaPropertiesFile)
	data, err := vfs.ReadFile(fsys, name)
	if err == nil {
		meta, err := decodeMetaProperties(data)
		if err != nil {
			return "", fmt.Errorf("format %s: %s: %w", d, name, err)
		}
		return meta.clusterID, fmt.Errorf("log dir %s: %w (cluster %s, node %d)", d, ErrFormatted, meta.clusterID, meta.nodeID)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("format %s: %w", d, err)
	}
	if err := checkDirEmpty(fsys, d); err != nil {
		return "", fmt.Errorf("format: %w", err)
	}
	meta := metaProperties{version: metaPropertiesVersion1, clusterID: clusterID, nodeID: nodeID, directoryID: randomUUID()}
	if err := vfs.WriteFileAtomic(fsys, name, encodeMetaProperties(meta, now)); err != nil {
		return "", fmt.Errorf("format %s: %w", d, err)
	}
	return clusterID, nil
}

// checkEmpty refuses to format a dir that already holds data: without
// meta.properties there is no telling whose data it is.
func (m *Manager) checkEmpty(d string) error { return checkDirEmpty(m.fsys, d) }

func checkDirEmpty(fsys vfs.FS, d string) error {
	ents, err := fsys.ReadDir(d)
	if err != nil {
		return err
	}
	for _, e := range ents {
		// .lock is the broker's dir lock (vfs.LockDir), taken before formatting.
		if e.Name() == "lost+found" || e.Name() == ".lock" || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		return fmt.Errorf("log dir %s has no %s but is not empty (found %s)", d, metaPropertiesFile, e.Name())
	}
	return nil
}

// loadDir loads every partition directory in a log dir.
func (m *Manager) loadDir(d string) error {
	_, err := m.fsys.Stat(filepath.Join(d, cleanShutdownFile))
	clean := err == nil
	rps, err := readCheckpoint(m.fsys, filepath.Join(d, recoveryPointFile))
	if err != nil {
		return err
	}
	lsos, err := readCheckpoint(m.fsys, filepath.Join(d, logStartOffsetFile))
	if err != nil {
		return err
	}
	hws, err := readCheckpoint(m.fsys, filepath.Join(d, replicationOffsetFile))
	if err != nil {
		// Only a hint for the broker's starting high watermark: without
		// it the broker starts from the log start and replication raises
		// it.
		m.logger.Warn("ignoring unreadable replication offset checkpoint", "dir", d, "err", err)
		hws = map[TopicPartition]int64{}
	}
	cleaned, err := readCheckpoint(m.fsys, filepath.Join(d, cleanerCheckpointFile))
	if err != nil {
		// Kafka too treats an unreadable cleaner checkpoint as lost:
		// logs are cleaned again from their start.
		m.logger.Warn("ignoring unreadable cleaner checkpoint", "dir", d, "err", err)
		cleaned = map[TopicPartition]int64{}
	}
	m.cleanerCkpt[d] = cleaned
	ents, err := m.fsys.ReadDir(d)
	if err != nil {
		return err
	}
	removed := false
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		switch {
		case strings.HasSuffix(name, deleteDirSuffix):
			// DeleteLog renamed it and crashed before removing it.
			if err := m.fsys.RemoveAll(filepath.Join(d, name)); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
			removed = true
			continue
		case strings.HasSuffix(name, futureDirSuffix), strings.HasSuffix(name, strayDirSuffix):
			m.logger.Warn("ignoring partition directory", "dir", filepath.Join(d, name))
			continue
		}
		tp, ok := parseLogDirName(name)
		if !ok {
			if name != "lost+found" {
				m.logger.Warn("ignoring directory that names no partition", "dir", filepath.Join(d, name))
			}
			continue
		}
		if tp.Topic == metadataTopic {
			continue
		}
		if other, dup := m.logs[tp]; dup {
			return fmt.Errorf("partition %s found in both %s and %s", tp, other.parent, d)
		}
		rp, haveRP := rps[tp]
		if !haveRP {
			rp = 0
		}
		before := m.progress.doneBytes.Load()
		l, err := m.loadLog(d, tp, rp, lsos[tp], clean)
		if err != nil {
			return fmt.Errorf("load %s: %w", tp, err)
		}
		m.progress.partitionLoaded(filepath.Join(d, name), before)
		if hw, ok := hws[tp]; ok {
			l.ckptHW.Store(min(hw, l.LogEndOffset()))
		}
		m.logs[tp] = l
	}
	if removed {
		return m.fsys.SyncDir(d)
	}
	return nil
}

// parseLogDirName splits <topic>-<partition>.
func parseLogDirName(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	digits := name[i+1:]
	for _, c := range digits {
		if c < '0' || c > '9' {
			return TopicPartition{}, false
		}
	}
	p, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || validateTopic(name[:i]) != nil {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// validateTopic applies Kafka's topic name rules.
func validateTopic(topic string) error {
	if topic == "" || topic == "." || topic == ".." || len(topic) > 249 {
		return fmt.Errorf("invalid topic name %q", topic)
	}
	for _, c := range topic {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("invalid topic name %q", topic)
		}
	}
	return nil
}

// GetOrCreateLog returns the partition's log, creating it (and writing
// partition.metadata with the topic id) if there is none. For an existing
// log it applies cfg and records topicID if none was recorded; a different
// recorded id is an error (Kafka's InconsistentTopicIdException). A zero
// topicID skips the check.
func (m *Manager) GetOrCreateLog(topic string, partition int32, topicID [16]byte, cfg LogConfig) (*Log, error) {
	logs, errs := m.CreateLogs([]LogSpec{{Topic: topic, Partition: partition, TopicID: topicID, Config: cfg}})
	return logs[0], errs[0]
}

// LogSpec is one log for CreateLogs.
type LogSpec struct {
	Topic     string
	Partition int32
	TopicID   [16]byte
	Config    LogConfig
	// Files are written into the directory of a log this call makes
	// (not one that exists), unsynced as partition.metadata is, and
	// synced with it by the log's first flush or roll (Log.syncEntry):
	// the broker's leader-epoch-checkpoint of a new partition, which a
	// restart that finds it missing or torn rebuilds from the batches.
	Files []LogFile
}

// LogFile is a file CreateLogs writes into a new log's directory.
type LogFile struct {
	Name string // a plain file name, not a segment's
	Data []byte
}

// CreateLogs is GetOrCreateLog for many logs: logs[i] or errs[i] is the
// outcome of specs[i]. The new logs are made outside m.mu, several at a
// time, without an fsync: a new log's files and directory entry are made
// durable by its first flush or roll, before any record appended to it
// is (Log.syncEntry), as Kafka flushes a new log's directory and
// partition.metadata lazily. Until then a power loss may take an empty
// log away, and the broker makes it again from the metadata (which is
// durable) when it starts. Every log of the batch is visible to Log and
// Logs only once the batch is done. A log another CreateLogs is making is
// waited for and returned.
func (m *Manager) CreateLogs(specs []LogSpec) ([]*Log, []error) {
	logs := make([]*Log, len(specs))
	errs := make([]error, len(specs))
	type job struct {
		i      int
		parent string
		dir    string
	}
	var jobs []job
	first := map[TopicPartition]int{} // a log named twice is made once
	var dups [][2]int                 // (index, index of its first naming)
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			for i, sp := range specs {
				errs[i] = fmt.Errorf("create log %s: %w", TopicPartition{Topic: sp.Topic, Partition: sp.Partition}, ErrClosed)
			}
			return logs, errs
		}
		// A log another call is making is waited for before this one
		// reserves anything, so that two calls never wait on each other.
		var wait chan struct{}
		for _, sp := range specs {
			if c, ok := m.creating[TopicPartition{Topic: sp.Topic, Partition: sp.Partition}]; ok {
				wait = c
				break
			}
		}
		if wait == nil {
			break
		}
		m.mu.Unlock()
		<-wait
	}
	counts := m.dirCountsLocked()
	for i, sp := range specs {
		tp := TopicPartition{Topic: sp.Topic, Partition: sp.Partition}
		if f, ok := first[tp]; ok {
			dups = append(dups, [2]int{i, f})
			continue
		}
		first[tp] = i
		if err := validateTopic(sp.Topic); err != nil {
			errs[i] = fmt.Errorf("create log: %w", err)
			continue
		}
		if sp.Partition < 0 {
			errs[i] = fmt.Errorf("create log %s: negative partition", tp)
			continue
		}
		if l, ok := m.logs[tp]; ok {
			l.SetConfig(sp.Config)
			if err := l.setTopicID(sp.TopicID); err != nil {
				errs[i] = err
				continue
			}
			logs[i] = l
			continue
		}
		parent := m.pickDirIn(counts)
		if parent == "" {
			errs[i] = fmt.Errorf("create log %s: %w", tp, ErrNoOnlineLogDir)
			continue
		}
		dir := filepath.Join(parent, tp.String())
		if _, err := m.fsys.Stat(dir); err == nil {
			if !m.halfMade[dir] || !m.removeHalfMadeLocked(dir) {
				errs[i] = fmt.Errorf("create log %s: directory %s exists but was not loaded", tp, dir)
				continue
			}
		}
		counts[parent]++
		if m.creating == nil {
			m.creating = map[TopicPartition]chan struct{}{}
		}
		m.creating[tp] = make(chan struct{})
		jobs = append(jobs, job{i: i, parent: parent, dir: dir})
	}
	m.creatingWG.Add(1)
	m.mu.Unlock()
	defer m.creatingWG.Done()

	// Make the files of each log, a few at a time: each costs a mkdir,
	// file creations and an fsync of its own directory, which overlap
	// well on a disk and in the kernel.
	workers := min(len(jobs), createLogWorkers)
	next := make(chan job)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range next {
				sp := specs[j.i]
				tp := TopicPartition{Topic: sp.Topic, Partition: sp.Partition}
				l, err := m.createLog(j.parent, j.dir, tp, sp)
				if err != nil {
					errs[j.i] = fmt.Errorf("create log %s: %w", tp, err)
					continue
				}
				logs[j.i] = l
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()

	// Nothing is synced here: a new log's directory entry and
	// partition.metadata become durable at its first flush or roll
	// (Log.syncEntry), before anything appended to it is.
	m.mu.Lock()
	for _, j := range jobs {
		sp := specs[j.i]
		tp := TopicPartition{Topic: sp.Topic, Partition: sp.Partition}
		if logs[j.i] != nil {
			// Inserted even if Close has begun: it waits for this
			// batch (creatingWG) and closes what it finds.
			m.logs[tp] = logs[j.i]
		}
		close(m.creating[tp])
		delete(m.creating, tp)
	}
	m.mu.Unlock()
	for _, d := range dups {
		logs[d[0]], errs[d[0]] = logs[d[1]], errs[d[1]]
	}
	return logs, errs
}

// createLogWorkers is how many logs CreateLogs makes at once.
const createLogWorkers = 8

// dirCountsLocked is how many logs each log dir holds. With one online
// dir there is no choice to make and nothing is counted (an empty map):
// counting every log for each creation made creating n partitions cost
// n² (5% of a 10,000-partition topic's creation).
func (m *Manager) dirCountsLocked() map[string]int {
	counts := map[string]int{}
	online := 0
	for _, d := range m.dirs {
		if !m.offline[d] {
			online++
		}
	}
	if online <= 1 {
		return counts
	}
	for _, l := range m.logs {
		counts[l.parent]++
	}
	return counts
}

// pickDirLocked chooses the online log dir with the fewest logs, as
// Kafka's LogManager.nextLogDirs; "" when every dir is offline.
func (m *Manager) pickDirLocked() string {
	return m.pickDirIn(m.dirCountsLocked())
}

// pickDirIn is pickDirLocked over counts of logs per dir.
func (m *Manager) pickDirIn(counts map[string]int) string {
	best := ""
	for _, d := range m.dirs {
		if !m.offline[d] && (best == "" || counts[d] < counts[best]) {
			best = d
		}
	}
	return best
}

// ErrNoOnlineLogDir is the error of creating a log when every log dir is
// offline.
var ErrNoOnlineLogDir = errors.New("every log dir is offline")

// SetDirOffline takes a log dir out of service after a disk error, as
// Kafka's LogManager does with a failed dir: no new log is placed there,
// and checkpoints and clean-shutdown markers are no longer written to it
// (the next start recovers its logs from their recovery points). It stays
// offline until the process restarts. dir is a configured log dir, or the
// parent dir of one of the logs.
func (m *Manager) SetDirOffline(dir string) {
	dir = filepath.Clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.dirs {
		if filepath.Clean(d) == dir {
			if m.offline == nil {
				m.offline = map[string]bool{}
			}
			m.offline[d] = true
		}
	}
}

// DirOffline reports whether SetDirOffline took the log dir offline.
func (m *Manager) DirOffline(dir string) bool {
	dir = filepath.Clean(dir)
	m.mu.RLock()
	defer m.mu.RUnlock()
	for d := range m.offline {
		if filepath.Clean(d) == dir {
			return true
		}
	}
	return false
}

// createLog makes a new log in dir, a directory of parent that does not
// exist, without syncing anything (see CreateLogs). It runs without m.mu.
func (m *Manager) createLog(parent, dir string, tp TopicPartition, sp LogSpec) (*Log, error) {
	for _, f := range sp.Files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." || f.Name == partitionMetadataFile || strings.HasPrefix(f.Name, segmentName(0)) {
			return nil, fmt.Errorf("a new log's file may not be named %q", f.Name)
		}
	}
	if err := m.fsys.MkdirAll(dir, 0o755); err != nil {
		m.removeHalfMade(dir, sp.Files)
		return nil, err
	}
	l, err := m.createLogIn(parent, dir, tp, sp)
	if err != nil {
		// Out of file descriptors or space, the broker tries again
		// later: the directory must not stay behind half made, or the
		// next try would find it and refuse, and a restart load it.
		m.removeHalfMade(dir, sp.Files)
		return nil, err
	}
	return l, nil
}

// removeHalfMade is removeHalfMadeLocked for a caller without m.mu; it
// removes the spec's files first.
func (m *Manager) removeHalfMade(dir string, files []LogFile) {
	for _, f := range files {
		m.fsys.Remove(filepath.Join(dir, f.Name))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeHalfMadeLocked(dir)
}

// removeHalfMadeLocked removes the directory of a log whose creation
// failed. It unlinks the files createLog makes one by one first, which
// needs no file descriptor (RemoveAll must open the directory to list it,
// which a process out of descriptors cannot); a directory it cannot
// remove is remembered, so the next creation of the log removes it
// instead of refusing it as a log that was not loaded. It reports whether
// the directory is gone. The caller holds m.mu.
func (m *Manager) removeHalfMadeLocked(dir string) bool {
	for _, name := range []string{
		partitionMetadataFile, partitionMetadataFile + ".tmp",
		segmentName(0) + logSuffix,
	} {
		m.fsys.Remove(filepath.Join(dir, name))
	}
	err := m.fsys.Remove(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		err = m.fsys.RemoveAll(dir)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.logger.Warn("cannot remove a partition directory whose creation failed; removing it at the next try", "dir", dir, "err", err)
		if m.halfMade == nil {
			m.halfMade = map[string]bool{}
		}
		m.halfMade[dir] = true
		return false
	}
	delete(m.halfMade, dir)
	return true
}

// createLogIn makes the files of a new log in dir, which exists. None is
// synced: the log's first flush syncs them (entryUnsynced).
func (m *Manager) createLogIn(parent, dir string, tp TopicPartition, sp LogSpec) (*Log, error) {
	topicID, cfg := sp.TopicID, sp.Config
	now := m.nowMs()
	seg, err := createSegment(m.fsys, m.files, dir, 0, now)
	if err != nil {
		return nil, err
	}
	seg.rollJitterMs = cfg.normalized().randomSegmentJitter()
	if topicID != ([16]byte{}) {
		// Written in place, not through a synced temporary file: the
		// directory is new, so there is nothing to replace, and a file
		// a power loss leaves empty or short is read as no topic id
		// (readPartitionMetadata), which the broker records again.
		if err := writeNewFile(m.fsys, filepath.Join(dir, partitionMetadataFile), encodePartitionMetadata(topicID)); err != nil {
			seg.close()
			return nil, err
		}
	}
	var names []string
	for _, f := range sp.Files {
		if err := writeNewFile(m.fsys, filepath.Join(dir, f.Name), f.Data); err != nil {
			seg.close()
			return nil, err
		}
		names = append(names, f.Name)
	}
	l := m.newLog(parent, tp, []*segment{seg}, cfg)
	l.topicID = topicID
	l.entryUnsynced = true
	l.entryFiles = names
	return l, nil
}

// writeNewFile creates name, which must not exist, with data, without
// syncing it.
func writeNewFile(fsys vfs.FS, name string, data []byte) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// newLog assembles a Log over loaded segments; the caller sets the offsets.
func (m *Manager) newLog(parent string, tp TopicPartition, segs []*segment, cfg LogConfig) *Log {
	l := &Log{
		fsys:       m.fsys,
		dir:        filepath.Join(parent, tp.String()),
		parent:     parent,
		tp:         tp,
		logger:     partitionLogger(m.logger, tp),
		nowMs:      m.nowMs,
		decompress: m.decompress,
		compress:   m.compress,
		deleter:    m.deleter,

		snapshotTxns: m.snapTxns,
		syncWatch:    m.syncWatch,
		files:        m.files,
	}
	l.truncateCleanerCkpt = m.truncateCleanerCheckpoint
	l.hw.Store(-1)
	l.ckptHW.Store(-1)
	l.unstable.Store(-1)
	l.segs.Store(&segs)
	l.SetConfig(cfg)
	l.lastFlushMs.Store(m.nowMs())
	return l
}

// setTopicID records id in partition.metadata if none is recorded.
func (l *Log) setTopicID(id [16]byte) error {
	if id == ([16]byte{}) {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.topicID {
	case id:
		return nil
	case [16]byte{}:
		if err := vfs.WriteFileAtomic(l.fsys, filepath.Join(l.dir, partitionMetadataFile), encodePartitionMetadata(id)); err != nil {
			return fmt.Errorf("write partition metadata %s: %w", l.tp, err)
		}
		l.topicID = id
		return nil
	}
	return fmt.Errorf("log %s has topic id %s, not %s", l.tp, encodeUUID(l.topicID), encodeUUID(id))
}

// Log returns the partition's log if there is one.
func (m *Manager) Log(topic string, partition int32) (*Log, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.logs[TopicPartition{Topic: topic, Partition: partition}]
	return l, ok
}

// Logs returns a copy of the set of logs.
func (m *Manager) Logs() map[TopicPartition]*Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[TopicPartition]*Log, len(m.logs))
	for tp, l := range m.logs {
		out[tp] = l
	}
	return out
}

// DirectoryIDs returns each log dir's directory.id from meta.properties.
func (m *Manager) DirectoryIDs() map[string][16]byte {
	out := make(map[string][16]byte, len(m.dirIDs))
	for d, id := range m.dirIDs {
		out[d] = id
	}
	return out
}

// DeleteLog deletes a partition's log as Kafka does: it renames the
// directory to <topic>-<partition>.<uuid>-delete (so that a crash midway
// leaves a name the next start removes), then removes it, and rewrites the
// checkpoints without it. Deleting a log that does not exist does nothing.
func (m *Manager) DeleteLog(topic string, partition int32) error {
	tp := TopicPartition{Topic: topic, Partition: partition}
	m.mu.Lock()
	l, ok := m.logs[tp]
	delete(m.logs, tp)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	if err := l.close(false); err != nil {
		m.logger.Warn("closing deleted log", "partition", tp.String(), "err", err)
	}
	// Wait for a cleaning in progress, which stops once it sees the log
	// closed, so that it writes nothing into the directory from now on.
	l.maintMu.Lock()
	l.maintMu.Unlock()
	for _, p := range m.deleter.take(0, l) {
		p.seg.closeForGood()
	}
	if err := m.dropCleanerCheckpoint(l); err != nil {
		m.logger.Warn("dropping cleaner checkpoint of deleted log", "partition", tp.String(), "err", err)
	}
	doomed := filepath.Join(l.parent, deleteDirName(tp))
	if err := m.fsys.Rename(l.dir, doomed); err != nil {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	if err := m.fsys.SyncDir(l.parent); err != nil {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	if err := m.fsys.RemoveAll(doomed); err != nil {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	if err := m.fsys.SyncDir(l.parent); err != nil {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	return m.Checkpoint()
}

// deleteDirName is Kafka's LocalLog.logDeleteDirName: the topic is cut so
// that the name fits in 255 bytes.
func deleteDirName(tp TopicPartition) string {
	id := randomUUID()
	suffix := fmt.Sprintf("-%d.%s%s", tp.Partition, hex.EncodeToString(id[:]), deleteDirSuffix)
	topic := tp.Topic
	if len(topic) > 255-len(suffix) {
		topic = topic[:255-len(suffix)]
	}
	return topic + suffix
}

// Checkpoint writes each log dir's recovery-point-offset-checkpoint,
// log-start-offset-checkpoint and replication-offset-checkpoint (the high
// watermarks the broker set) atomically. Like Kafka, the log start offset
// file lists only logs whose start offset is above their first segment's
// base offset.
func (m *Manager) Checkpoint() error {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	byDir := map[string][]*Log{}
	m.mu.RLock()
	for _, l := range m.logs {
		byDir[l.parent] = append(byDir[l.parent], l)
	}
	offline := maps.Clone(m.offline)
	m.mu.RUnlock()
	var errs []error
	for _, d := range m.dirs {
		if offline[d] {
			continue
		}
		var rps, lsos, hws []checkpointEntry
		for _, l := range byDir[d] {
			rps = append(rps, checkpointEntry{tp: l.tp, offset: l.RecoveryPoint()})
			if hw := l.hw.Load(); hw >= 0 {
				hws = append(hws, checkpointEntry{tp: l.tp, offset: hw})
			}
			if lso := l.LogStartOffset(); lso > l.segments()[0].base {
				lsos = append(lsos, checkpointEntry{tp: l.tp, offset: lso})
			}
		}
		if err := vfs.WriteFileAtomic(m.fsys, filepath.Join(d, recoveryPointFile), encodeCheckpoint(rps)); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint %s: %w", d, err))
		}
		if err := vfs.WriteFileAtomic(m.fsys, filepath.Join(d, logStartOffsetFile), encodeCheckpoint(lsos)); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint %s: %w", d, err))
		}
		if err := vfs.WriteFileAtomic(m.fsys, filepath.Join(d, replicationOffsetFile), encodeCheckpoint(hws)); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Close flushes and closes every log, writes the checkpoints and, if all
// of that worked, the clean-shutdown marker in each log dir, so that the
// next start skips recovery.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	// Logs being made go in m.logs when done; they are closed with the
	// others.
	m.creatingWG.Wait()
	m.mu.Lock()
	logs := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		logs = append(logs, l)
	}
	m.mu.Unlock()

	var errs []error
	failedDirs := map[string]bool{}
	m.mu.RLock()
	for d := range m.offline {
		failedDirs[d] = true
	}
	m.mu.RUnlock()
	for _, l := range logs {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
			failedDirs[l.parent] = true
		}
		// A cleaning in progress stops once it sees the log closed.
		l.maintMu.Lock()
		l.maintMu.Unlock()
	}
	// Segments waiting for deletion are closed; their .deleted files go
	// at the next start.
	for _, p := range m.deleter.take(math.MaxInt64, nil) {
		p.seg.closeForGood()
	}
	m.files.stop()
	ckptErr := m.Checkpoint()
	if ckptErr != nil {
		errs = append(errs, ckptErr)
	}
	// A dir is marked clean only if every log in it closed and every
	// checkpoint was written: a failed (or offline) dir does not keep
	// the healthy ones from starting without recovery.
	if ckptErr == nil {
		for _, d := range m.dirs {
			if failedDirs[d] {
				continue
			}
			if err := vfs.WriteFileAtomic(m.fsys, filepath.Join(d, cleanShutdownFile), []byte(cleanShutdownContent)); err != nil {
				errs = append(errs, fmt.Errorf("write clean shutdown marker in %s: %w", d, err))
			}
		}
	}
	if len(errs) > 0 {
		m.logger.Error("unclean storage shutdown: the failed dirs' logs will be recovered on the next start", "err", errors.Join(errs...))
	}
	m.mu.Lock()
	m.logs = map[TopicPartition]*Log{}
	m.mu.Unlock()
	return errors.Join(errs...)
}

// closeAll closes the logs loaded so far when OpenManager fails, without
// flushing or writing anything.
func (m *Manager) closeAll() {
	for _, l := range m.logs {
		l.close(false)
	}
	m.logs = map[TopicPartition]*Log{}
}
