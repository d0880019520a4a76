package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"
)

// Errors of the cleaner.
var (
	// ErrNoCompressor is returned when the cleaner must rewrite a
	// compressed batch and ManagerConfig.Compress is nil.
	ErrNoCompressor = errors.New("compressed batch and no compressor configured")
	// errCleaningAborted stops a cleaning whose log was closed or deleted,
	// or whose cleaner was stopped.
	errCleaningAborted = errors.New("cleaning aborted")
)

// CleanerConfig configures a Cleaner. The names in the comments are
// Kafka's broker configs.
type CleanerConfig struct {
	// DedupeBufferSize bounds the memory of the map from key hash to
	// latest offset (log.cleaner.dedupe.buffer.size, default 128 MiB);
	// 24 bytes per key. A cleaning whose dirty keys do not fit cleans up
	// to the offset the map reached, and the next cleaning goes on from
	// there. The map is sized to the dirty section, within this budget.
	DedupeBufferSize int64
	// DedupeBufferLoadFactor is how full the map may get
	// (log.cleaner.io.buffer.load.factor, default 0.9).
	DedupeBufferLoadFactor float64
	// IOBufferSize is the size of the read and of the write buffer
	// (log.cleaner.io.buffer.size, default 512 KiB, shared by both in
	// Kafka); a larger batch grows the read buffer to fit it.
	IOBufferSize int
	// MaxIOBytesPerSecond throttles the bytes the cleaner reads and
	// writes together (log.cleaner.io.max.bytes.per.second); zero,
	// negative, +Inf or math.MaxFloat64 (Kafka's default) mean no limit.
	MaxIOBytesPerSecond float64
	// BackoffMs is how long Run sleeps when no log needs cleaning
	// (log.cleaner.backoff.ms, default 15000).
	BackoffMs int64
	// ProducerIDExpirationMs (producer.id.expiration.ms, default 1 day)
	// is used only without ActiveProducers, to tell which producers found
	// in the log Kafka would still hold state for.
	ProducerIDExpirationMs int64
	// ActiveProducers returns the last record of each producer the
	// broker's producer state holds for a partition (Kafka's
	// lastRecordsOfActiveProducers): the batch holding it is kept, even
	// emptied, so that the producer's sequence and epoch survive
	// cleaning. It is called from the cleaner's goroutine with no lock of
	// the log held, so it may take the partition's lock; the cleaning
	// then stops below the log end offset seen just before the call, so
	// that the state covers every batch it cleans. nil: the cleaner
	// derives the same from the log, scanning every batch header at each
	// cleaning.
	ActiveProducers func(tp TopicPartition) map[int64]LastRecord
}

// LastRecord is what a producer's state says about its last record in a
// partition.
type LastRecord struct {
	// LastDataOffset is the last offset of the producer's last data
	// batch, or -1 if its last entry is a transaction marker that bumped
	// its epoch.
	LastDataOffset int64
	// ProducerEpoch is the producer's current epoch.
	ProducerEpoch int16
}

// DefaultCleanerConfig returns Kafka's defaults.
func DefaultCleanerConfig() CleanerConfig {
	return CleanerConfig{
		DedupeBufferSize:       128 << 20,
		DedupeBufferLoadFactor: 0.9,
		IOBufferSize:           512 << 10,
		MaxIOBytesPerSecond:    math.MaxFloat64,
		BackoffMs:              15000,
		ProducerIDExpirationMs: 24 * 60 * 60 * 1000,
	}
}

func (c CleanerConfig) normalized() CleanerConfig {
	d := DefaultCleanerConfig()
	if c.DedupeBufferSize <= 0 {
		c.DedupeBufferSize = d.DedupeBufferSize
	}
	if !(c.DedupeBufferLoadFactor > 0 && c.DedupeBufferLoadFactor <= 1) {
		c.DedupeBufferLoadFactor = d.DedupeBufferLoadFactor
	}
	if c.IOBufferSize <= 0 {
		c.IOBufferSize = d.IOBufferSize
	}
	c.IOBufferSize = max(c.IOBufferSize, 4096)
	if c.BackoffMs <= 0 {
		c.BackoffMs = d.BackoffMs
	}
	if c.ProducerIDExpirationMs <= 0 {
		c.ProducerIDExpirationMs = d.ProducerIDExpirationMs
	}
	return c
}

// Cleaner compacts the logs whose cleanup.policy includes compact, as
// Kafka's LogCleaner with one cleaner thread: each pass cleans the log
// with the largest share of dirty bytes (above min.cleanable.dirty.ratio,
// or any dirty bytes older than max.compaction.lag.ms), then applies
// retention to every compacted log. See cleanLog for what cleaning keeps.
type Cleaner struct {
	m        *Manager
	cfg      CleanerConfig
	logger   *slog.Logger
	throttle *throttler
	omap     *offsetMap

	mu          sync.Mutex // one pass at a time
	ctx         context.Context
	uncleanable map[*Log]error
	readBuf     []byte // reused between cleanings unless a big batch grew it
}

// NewCleaner returns a cleaner for m's logs. It does nothing until
// CleanOnce or Run.
func NewCleaner(m *Manager, cfg CleanerConfig) *Cleaner {
	c := &Cleaner{
		m:           m,
		cfg:         cfg.normalized(),
		logger:      m.logger.With("component", "log-cleaner"),
		omap:        newOffsetMap(),
		ctx:         context.Background(),
		uncleanable: map[*Log]error{},
	}
	c.throttle = newThrottler(c.cfg.MaxIOBytesPerSecond, time.Now, c.sleep)
	return c
}

// sleep waits d unless the cleaner is stopped first.
func (c *Cleaner) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.ctx.Done():
	case <-t.C:
	}
}

// Run cleans until ctx is done: a pass, then, if it found nothing to
// clean, a sleep of log.cleaner.backoff.ms, as Kafka's CleanerThread. The
// broker runs it in a goroutine of its own and cancels ctx before closing
// the Manager. Errors are logged; a log that fails to clean is left alone
// until it is recreated (Kafka's uncleanable partitions).
func (c *Cleaner) Run(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	for ctx.Err() == nil {
		res, err := c.CleanOnce()
		if err != nil && ctx.Err() == nil {
			c.logger.Error("log cleaning failed", "err", err)
		}
		if res == nil {
			c.sleep(time.Duration(c.cfg.BackoffMs) * time.Millisecond)
		}
	}
}

// CleanResult describes one cleaning of a log.
type CleanResult struct {
	Partition        TopicPartition
	FirstDirtyOffset int64 // where the dirty section began
	EndOffset        int64 // the log is clean below this offset now
	BytesRead        int64 // by the cleaning pass (the map pass is extra)
	BytesWritten     int64
	RecordsRead      int64
	RecordsWritten   int64
	SegmentsBefore   int // segments cleaned
	SegmentsAfter    int // segments they became
	MapFull          bool
}

// CleanOnce makes one pass, as Kafka's cleanFilthiestLog: it cleans the
// filthiest compacted log, if one qualifies, then applies retention
// (Log.DeleteOldSegments) to every compacted log. It returns nil when no
// log needed cleaning.
func (c *Cleaner) CleanOnce() (*CleanResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nowMs := c.m.nowMs()
	var errs []error
	var res *CleanResult
	if ltc := c.filthiest(nowMs); ltc != nil {
		r, err := c.cleanChosen(ltc.l, nowMs, false)
		if err != nil {
			errs = append(errs, err)
		}
		res = r
	}
	for _, l := range c.m.Logs() {
		if !l.cfg.Load().Compact {
			continue
		}
		if _, err := l.tryDeleteOldSegments(nowMs); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

// CleanLog cleans l now, whatever its dirty ratio, up to what
// min.compaction.lag.ms, the active segment and the last stable offset
// allow. It returns nil if there is nothing to clean.
func (c *Cleaner) CleanLog(l *Log) (*CleanResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cleanChosen(l, c.m.nowMs(), true)
}

// cleanChosen cleans l under its maintenance lock and records the new
// cleaner checkpoint, marking l uncleanable on failure.
func (c *Cleaner) cleanChosen(l *Log, nowMs int64, force bool) (*CleanResult, error) {
	var producers *producerSnapshot
	if c.cfg.ActiveProducers != nil {
		leo := l.LogEndOffset()
		producers = &producerSnapshot{leo: leo, last: c.cfg.ActiveProducers(l.tp)}
	}
	l.maintMu.Lock()
	defer l.maintMu.Unlock()
	if l.closed.Load() {
		return nil, nil
	}
	ltc, err := c.logToClean(l, nowMs)
	if err != nil {
		return nil, err
	}
	if ltc.forceCheckpoint {
		if err := c.m.setCleanerCheckpoint(l, ltc.firstDirty); err != nil {
			return nil, err
		}
	}
	if !force && !ltc.cleanable(l.cfg.Load()) || ltc.cleanableBytes == 0 {
		return nil, nil
	}
	res, err := c.cleanLog(l, ltc.firstDirty, ltc.firstUncleanable, nowMs, producers)
	if errors.Is(err, errCleaningAborted) {
		return nil, nil
	}
	if err != nil {
		c.uncleanable[l] = err
		return nil, fmt.Errorf("clean %s: %w", l.tp, err)
	}
	if res == nil {
		return nil, nil
	}
	if err := c.m.setCleanerCheckpoint(l, res.EndOffset); err != nil {
		return res, err
	}
	c.logger.Info("cleaned log", "partition", l.tp.String(), "from", res.FirstDirtyOffset, "to", res.EndOffset,
		"bytes_read", res.BytesRead, "bytes_written", res.BytesWritten, "segments", res.SegmentsBefore, "into", res.SegmentsAfter)
	return res, nil
}

// logToClean is Kafka's LogToClean: a compacted log's dirty section and
// how dirty it is.
type logToClean struct {
	l                *Log
	firstDirty       int64
	firstUncleanable int64 // base offset of the first segment not cleaned
	cleanBytes       int64
	cleanableBytes   int64
	needNow          bool // records older than max.compaction.lag.ms are dirty
	forceCheckpoint  bool // the checkpoint was invalid and is reset
}

func (t *logToClean) ratio() float64 {
	total := t.cleanBytes + t.cleanableBytes
	if total == 0 {
		return 0
	}
	return float64(t.cleanableBytes) / float64(total)
}

// cleanable is Kafka's test in grabFilthiestCompactedLog.
func (t *logToClean) cleanable(cfg *LogConfig) bool {
	return (t.needNow && t.cleanableBytes > 0) || t.ratio() > cfg.MinCleanableDirtyRatio
}

// filthiest picks the compacted log most in need of cleaning, or nil.
func (c *Cleaner) filthiest(nowMs int64) *logToClean {
	for l := range c.uncleanable {
		if l.closed.Load() {
			delete(c.uncleanable, l) // deleted or closed: forget it
		}
	}
	var best *logToClean
	for _, l := range c.m.Logs() {
		cfg := l.cfg.Load()
		if !cfg.Compact || l.closed.Load() || c.uncleanable[l] != nil || l.Err() != nil {
			continue
		}
		ltc, err := c.logToClean(l, nowMs)
		if err != nil {
			c.logger.Warn("cannot assess log for cleaning", "partition", l.tp.String(), "err", err)
			continue
		}
		if ltc.cleanBytes+ltc.cleanableBytes == 0 || !ltc.cleanable(cfg) {
			continue
		}
		if best == nil || ltc.ratio() > best.ratio() {
			best = ltc
		}
	}
	return best
}

// logToClean computes Kafka's cleanableOffsets, maxCompactionDelay and
// calculateCleanableBytes for l.
func (c *Cleaner) logToClean(l *Log, nowMs int64) (*logToClean, error) {
	cfg := l.cfg.Load()
	segs := l.segments()
	lso := l.LogStartOffset()
	leo := l.LogEndOffset()
	t := &logToClean{l: l}
	ckpt, ok := c.m.cleanerCheckpoint(l)
	t.firstDirty = lso
	if ok {
		t.firstDirty = ckpt
	}
	switch {
	case t.firstDirty < lso:
		if ok && !cfg.Delete {
			c.logger.Warn("resetting first dirty offset to the log start offset: the checkpoint is below it",
				"partition", l.tp.String(), "checkpoint", t.firstDirty, "log_start_offset", lso)
		}
		t.firstDirty, t.forceCheckpoint = lso, ok
	case t.firstDirty > leo:
		c.logger.Warn("resetting first dirty offset to the log start offset: the checkpoint is past the log end",
			"partition", l.tp.String(), "checkpoint", t.firstDirty, "log_end_offset", leo)
		t.firstDirty, t.forceCheckpoint = lso, true
	}

	active := segs[len(segs)-1]
	uncleanable := min(l.lastStableOffset(), active.base)
	nonActive := segs[floorSegment(segs, t.firstDirty) : len(segs)-1]
	if cfg.MinCompactionLagMs > 0 {
		for _, s := range nonActive {
			if l.largestTimestamp(s, cfg) > nowMs-cfg.MinCompactionLagMs {
				uncleanable = min(uncleanable, s.base)
				break
			}
		}
	}
	uncleanable = max(uncleanable, t.firstDirty)

	earliest := int64(math.MaxInt64)
	for _, s := range nonActive {
		if ts, err := s.readFirstBatchMaxTimestamp(); err == nil && ts > 0 {
			earliest = min(earliest, ts)
		}
	}
	if earliest < nowMs-cfg.MaxCompactionLagMs {
		t.needNow = true
	}

	// The first uncleanable segment, and the bytes below it.
	fu := active
	if i := floorSegment(segs, uncleanable); i < len(segs)-1 {
		fu = segs[i]
	}
	t.firstUncleanable = fu.base
	for _, s := range segs {
		if s.base < t.firstDirty {
			t.cleanBytes += s.size.Load()
		}
	}
	for _, s := range segmentsIn(segs, min(t.firstDirty, t.firstUncleanable), t.firstUncleanable) {
		t.cleanableBytes += s.size.Load()
	}
	return t, nil
}

// floorSegment is the index of the segment holding offset: the last whose
// base offset is <= offset, or 0.
func floorSegment(segs []*segment, offset int64) int {
	return max(sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })-1, 0)
}

// segmentsIn returns the segments holding offsets in [from, to), as
// Kafka's logSegments(from, to): from the one holding from to the last
// whose base is below to.
func segmentsIn(segs []*segment, from, to int64) []*segment {
	if from >= to {
		return nil
	}
	i := floorSegment(segs, from)
	j := sort.Search(len(segs), func(k int) bool { return segs[k].base >= to })
	if j <= i {
		return nil
	}
	return segs[i:j]
}

// readFirstBatchMaxTimestamp reads the first batch's max timestamp, which
// Kafka compares with max.compaction.lag.ms.
func (s *segment) readFirstBatchMaxTimestamp() (int64, error) {
	sc := newHeaderScanner(s.log, 0, s.size.Load())
	defer sc.release()
	b, err := sc.next()
	if err != nil {
		return noTimestamp, err
	}
	return b.maxTimestamp, nil
}

// checkDone aborts a cleaning whose log was closed or is about to be
// truncated, or whose cleaner was stopped (Kafka's checkCleaningAborted).
func (c *Cleaner) checkDone(l *Log) error {
	if l.closed.Load() || l.abortCleaning.Load() > 0 || c.ctx.Err() != nil {
		return errCleaningAborted
	}
	return nil
}

// groupSegments is Kafka's groupSegmentsBySize: consecutive segments are
// cleaned into one while their logs fit segment.bytes, their indexes fit
// segment.index.bytes, and their offsets stay within 2^31 of the group's
// base.
func groupSegments(segs []*segment, maxSize int64, maxIndexSize int64, firstUncleanable int64) [][]*segment {
	var groups [][]*segment
	for len(segs) > 0 {
		g := segs[:1]
		logSize := segs[0].size.Load()
		idxSize, timeSize := segs[0].indexSizes()
		segs = segs[1:]
		for len(segs) > 0 {
			next := segs[0]
			ni, nt := next.indexSizes()
			lastOffset := firstUncleanable - 1
			if len(segs) > 1 {
				lastOffset = segs[1].base - 1
			}
			if logSize+next.size.Load() > maxSize || idxSize+ni > maxIndexSize || timeSize+nt > maxIndexSize ||
				(next.size.Load() != 0 && lastOffset-g[0].base > math.MaxInt32) {
				break
			}
			g = g[:len(g)+1]
			logSize += next.size.Load()
			idxSize += ni
			timeSize += nt
			segs = segs[1:]
		}
		groups = append(groups, g)
	}
	return groups
}

// indexSizes is the bytes of the segment's two index files (loaded by the
// caller).
func (s *segment) indexSizes() (int64, int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.offIdx)) * offsetEntrySize, int64(len(s.timeIdx)) * timeEntrySize
}
