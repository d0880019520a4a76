package storage

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// Names of the files Kafka keeps in a log dir and a partition dir.
const (
	metaPropertiesFile     = "meta.properties"
	recoveryPointFile      = "recovery-point-offset-checkpoint"
	logStartOffsetFile     = "log-start-offset-checkpoint"
	replicationOffsetFile  = "replication-offset-checkpoint"
	cleanerCheckpointFile  = "cleaner-offset-checkpoint"
	cleanShutdownFile      = ".kafka_cleanshutdown"
	partitionMetadataFile  = "partition.metadata"
	deleteDirSuffix        = "-delete"
	futureDirSuffix        = "-future"
	strayDirSuffix         = "-stray"
	checkpointVersion      = 0
	partitionMetaVersion   = 0
	metaPropertiesVersion1 = 1
)

// cleanShutdownContent is what Kafka's CleanShutdownFileHandler writes: a
// JSON map of strings; the broker epoch is unknown to storage.
const cleanShutdownContent = `{"version":"0","broker_epoch":"-1"}`

// encodeUUID formats a 16-byte id as Kafka's Uuid.toString does: URL-safe
// base64 without padding.
func encodeUUID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// decodeUUID parses Kafka's Uuid string form.
func decodeUUID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("invalid uuid %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// randomUUID makes an id as Kafka's Uuid.randomUuid does: never one whose
// string starts with '-', nor one of the small reserved values (directory
// ids below 100 have meanings, and zero is "none").
func randomUUID() [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40 // version 4, as java.util.UUID
		id[8] = id[8]&0x3f | 0x80
		if binary.BigEndian.Uint64(id[:8]) == 0 || encodeUUID(id)[0] == '-' {
			continue
		}
		return id
	}
}

// checkpointEntry is one line of an offset checkpoint file.
type checkpointEntry struct {
	tp     TopicPartition
	offset int64
}

// encodeCheckpoint formats entries as Kafka's OffsetCheckpointFile: a
// version line "0", a count line, then "topic partition offset" lines.
// Entries are sorted so the file is deterministic.
func encodeCheckpoint(entries []checkpointEntry) []byte {
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].tp.Topic != entries[j].tp.Topic {
			return entries[i].tp.Topic < entries[j].tp.Topic
		}
		return entries[i].tp.Partition < entries[j].tp.Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%s %d %d\n", e.tp.Topic, e.tp.Partition, e.offset)
	}
	return b.Bytes()
}

// decodeCheckpoint parses an offset checkpoint file as strictly as Kafka's
// CheckpointFile reader: a wrong version, a malformed line or a count that
// does not match is an error.
func decodeCheckpoint(data []byte) (map[TopicPartition]int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	v, ok := line()
	if !ok {
		return nil, errors.New("checkpoint: empty file")
	}
	if strings.TrimSpace(v) != strconv.Itoa(checkpointVersion) {
		return nil, fmt.Errorf("checkpoint: unsupported version %q", v)
	}
	c, ok := line()
	if !ok {
		return nil, errors.New("checkpoint: missing entry count")
	}
	count, err := strconv.Atoi(strings.TrimSpace(c))
	if err != nil || count < 0 {
		return nil, fmt.Errorf("checkpoint: bad entry count %q", c)
	}
	out := make(map[TopicPartition]int64, min(count, 1<<16))
	n := 0
	for {
		l, ok := line()
		if !ok {
			break
		}
		fields := strings.Fields(l)
		if len(fields) != 3 {
			return nil, fmt.Errorf("checkpoint: malformed line %q", l)
		}
		p, err1 := strconv.ParseInt(fields[1], 10, 32)
		off, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 {
			return nil, fmt.Errorf("checkpoint: malformed line %q", l)
		}
		out[TopicPartition{Topic: fields[0], Partition: int32(p)}] = off
		n++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if n != count {
		return nil, fmt.Errorf("checkpoint: %d entries, header says %d", n, count)
	}
	return out, nil
}

// readCheckpoint reads a checkpoint file; a missing file is empty.
func readCheckpoint(fsys vfs.FS, name string) (map[TopicPartition]int64, error) {
	data, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := decodeCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// metaProperties is a log dir's identity, Kafka's MetaProperties.
type metaProperties struct {
	version     int
	clusterID   string
	nodeID      int32
	directoryID [16]byte // zero if absent
}

// encodeMetaProperties writes the KRaft (version 1) form as
// java.util.Properties.store does: a blank comment, a date comment, then
// key=value lines.
func encodeMetaProperties(m metaProperties, now time.Time) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "#\n#%s\n", now.UTC().Format("Mon Jan 02 15:04:05 MST 2006"))
	fmt.Fprintf(&b, "cluster.id=%s\n", m.clusterID)
	fmt.Fprintf(&b, "directory.id=%s\n", encodeUUID(m.directoryID))
	fmt.Fprintf(&b, "node.id=%d\n", m.nodeID)
	fmt.Fprintf(&b, "version=%d\n", metaPropertiesVersion1)
	return b.Bytes()
}

// parseProperties reads the subset of the java.util.Properties format that
// Kafka writes: comments, blank lines, key=value or key:value, backslash
// escapes.
func parseProperties(data []byte) map[string]string {
	props := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			props[unescapeProp(line)] = ""
			continue
		}
		props[unescapeProp(strings.TrimSpace(line[:i]))] = unescapeProp(strings.TrimSpace(line[i+1:]))
	}
	return props
}

func unescapeProp(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// decodeMetaProperties parses meta.properties: version 1 (KRaft, node.id)
// or version 0 (ZooKeeper era, broker.id).
func decodeMetaProperties(data []byte) (metaProperties, error) {
	props := parseProperties(data)
	var m metaProperties
	v, err := strconv.Atoi(props["version"])
	if err != nil {
		return m, fmt.Errorf("meta.properties: bad version %q", props["version"])
	}
	m.version = v
	idKey := "node.id"
	switch v {
	case 0:
		idKey = "broker.id"
	case 1:
	default:
		return m, fmt.Errorf("meta.properties: unsupported version %d", v)
	}
	m.clusterID = props["cluster.id"]
	if m.clusterID == "" {
		return m, errors.New("meta.properties: no cluster.id")
	}
	id, err := strconv.ParseInt(props[idKey], 10, 32)
	if err != nil || id < 0 {
		return m, fmt.Errorf("meta.properties: bad %s %q", idKey, props[idKey])
	}
	m.nodeID = int32(id)
	if s, ok := props["directory.id"]; ok {
		if m.directoryID, err = decodeUUID(s); err != nil {
			return m, fmt.Errorf("meta.properties: directory.id: %w", err)
		}
	}
	return m, nil
}

// encodePartitionMetadata formats partition.metadata as Kafka's
// PartitionMetadataFile.
func encodePartitionMetadata(topicID [16]byte) []byte {
	return fmt.Appendf(nil, "version: %d\ntopic_id: %s\n", partitionMetaVersion, encodeUUID(topicID))
}

// decodePartitionMetadata parses partition.metadata.
func decodePartitionMetadata(data []byte) ([16]byte, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 {
		return [16]byte{}, fmt.Errorf("partition.metadata: %d lines, want 2", len(lines))
	}
	v, ok := strings.CutPrefix(lines[0], "version: ")
	if !ok || strings.TrimSpace(v) != strconv.Itoa(partitionMetaVersion) {
		return [16]byte{}, fmt.Errorf("partition.metadata: bad version line %q", lines[0])
	}
	id, ok := strings.CutPrefix(lines[1], "topic_id: ")
	if !ok {
		return [16]byte{}, fmt.Errorf("partition.metadata: bad topic_id line %q", lines[1])
	}
	return decodeUUID(strings.TrimSpace(id))
}

// cleanerCheckpoint returns the offset up to which l was last cleaned.
func (m *Manager) cleanerCheckpoint(l *Log) (int64, bool) {
	m.cleanerMu.Lock()
	defer m.cleanerMu.Unlock()
	off, ok := m.cleanerCkpt[l.parent][l.tp]
	return off, ok
}

// setCleanerCheckpoint records that l is clean below offset and rewrites
// its log dir's cleaner-offset-checkpoint, keeping only logs that still
// exist, as Kafka's LogCleanerManager.updateCheckpoints.
func (m *Manager) setCleanerCheckpoint(l *Log, offset int64) error {
	m.cleanerMu.Lock()
	defer m.cleanerMu.Unlock()
	return m.writeCleanerCheckpointLocked(l.parent, func(c map[TopicPartition]int64) { c[l.tp] = offset })
}

// dropCleanerCheckpoint forgets a deleted log's cleaner checkpoint.
func (m *Manager) dropCleanerCheckpoint(l *Log) error {
	m.cleanerMu.Lock()
	defer m.cleanerMu.Unlock()
	if _, ok := m.cleanerCkpt[l.parent][l.tp]; !ok {
		return nil
	}
	return m.writeCleanerCheckpointLocked(l.parent, func(c map[TopicPartition]int64) { delete(c, l.tp) })
}

func (m *Manager) writeCleanerCheckpointLocked(dir string, change func(map[TopicPartition]int64)) error {
	live := m.Logs()
	next := map[TopicPartition]int64{}
	for tp, off := range m.cleanerCkpt[dir] {
		if l, ok := live[tp]; ok && l.parent == dir {
			next[tp] = off
		}
	}
	change(next)
	entries := make([]checkpointEntry, 0, len(next))
	for tp, off := range next {
		entries = append(entries, checkpointEntry{tp: tp, offset: off})
	}
	if err := vfs.WriteFileAtomic(m.fsys, filepath.Join(dir, cleanerCheckpointFile), encodeCheckpoint(entries)); err != nil {
		return fmt.Errorf("write %s in %s: %w", cleanerCheckpointFile, dir, err)
	}
	m.cleanerCkpt[dir] = next
	return nil
}
