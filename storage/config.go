// Package storage keeps partition logs on disk in Apache Kafka's own
// layout, so that a segment written here reads in Kafka's DumpLogSegments
// and the other way round.
//
// A log dir holds meta.properties, recovery-point-offset-checkpoint,
// log-start-offset-checkpoint and one directory per partition,
// <topic>-<partition>. A partition directory holds segments, each named by
// its base offset in 20 zero-padded digits: the .log (record batches as the
// producer sent them, with the broker-assigned base offset and partition
// leader epoch), the .index (8-byte entries: offset relative to the base,
// byte position in the .log) and the .timeindex (12-byte entries: timestamp,
// relative offset). Indexes are sparse and point at batches, never into
// them, as Kafka's LogSegment.append does.
//
// All disk access goes through vfs.FS, so that crash and fault tests are
// ordinary unit tests. storage knows nothing of the network.
package storage

import (
	"math"
	"math/rand/v2"

	"github.com/gregorbroker/gregor/protocol"
)

// LogConfig is the per-topic configuration a log obeys. The names in the
// comments are Kafka's topic configs. Build one from DefaultLogConfig and
// override fields: the zero value of the retention and cleanup fields does
// not mean Kafka's default.
type LogConfig struct {
	SegmentBytes       int64 // segment.bytes, default 1 GiB
	SegmentMs          int64 // segment.ms, default 7 days
	SegmentJitterMs    int64 // segment.jitter.ms (log.roll.jitter.ms), default 0
	IndexIntervalBytes int32 // index.interval.bytes, default 4096
	SegmentIndexBytes  int32 // segment.index.bytes, default 10 MiB (max index file size; roll when full)
	FlushMessages      int64 // flush.messages, default math.MaxInt64 (never force)
	FlushMs            int64 // flush.ms, default math.MaxInt64

	// cleanup.policy: Delete applies retention.ms and retention.bytes,
	// Compact lets the Cleaner compact the log. Default: Delete only.
	// With neither, only segments below the log start offset are deleted.
	Delete  bool
	Compact bool

	RetentionMs       int64 // retention.ms, default 7 days; negative: no time limit
	RetentionBytes    int64 // retention.bytes, default -1; negative: no size limit
	FileDeleteDelayMs int64 // file.delete.delay.ms, default 60000

	DeleteRetentionMs      int64   // delete.retention.ms, default 1 day
	MinCompactionLagMs     int64   // min.compaction.lag.ms, default 0
	MaxCompactionLagMs     int64   // max.compaction.lag.ms, default math.MaxInt64
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio, default 0.5
}

// DefaultLogConfig returns Kafka's defaults.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * 60 * 60 * 1000,
		IndexIntervalBytes:     4096,
		SegmentIndexBytes:      10 << 20,
		FlushMessages:          math.MaxInt64,
		FlushMs:                math.MaxInt64,
		Delete:                 true,
		RetentionMs:            7 * 24 * 60 * 60 * 1000,
		RetentionBytes:         -1,
		FileDeleteDelayMs:      60000,
		DeleteRetentionMs:      24 * 60 * 60 * 1000,
		MaxCompactionLagMs:     math.MaxInt64,
		MinCleanableDirtyRatio: 0.5,
	}
}

// normalized replaces values that cannot work with something that can: a
// non-positive size or interval takes Kafka's default, and segment.bytes is
// capped at what a 32-bit index position can address. The broker validates
// topic configs as Kafka does; this only keeps a bad value from breaking
// the log.
func (c LogConfig) normalized() LogConfig {
	d := DefaultLogConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentBytes > math.MaxInt32 {
		c.SegmentBytes = math.MaxInt32
	}
	if c.SegmentBytes < protocol.BatchHeaderSize {
		c.SegmentBytes = protocol.BatchHeaderSize
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.SegmentJitterMs < 0 {
		c.SegmentJitterMs = 0
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.SegmentIndexBytes <= 0 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.FlushMessages <= 0 {
		c.FlushMessages = d.FlushMessages
	}
	if c.FlushMs <= 0 {
		c.FlushMs = d.FlushMs
	}
	if c.FileDeleteDelayMs < 0 {
		c.FileDeleteDelayMs = d.FileDeleteDelayMs
	}
	if c.DeleteRetentionMs < 0 {
		c.DeleteRetentionMs = d.DeleteRetentionMs
	}
	if c.MinCompactionLagMs < 0 {
		c.MinCompactionLagMs = 0
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = d.MaxCompactionLagMs
	}
	if !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1) { // NaN too
		c.MinCleanableDirtyRatio = d.MinCleanableDirtyRatio
	}
	return c
}

// maxOffsetEntries is how many .index entries fit in segment.index.bytes.
func (c LogConfig) maxOffsetEntries() int { return int(c.SegmentIndexBytes) / offsetEntrySize }

// maxTimeEntries is how many .timeindex entries fit in segment.index.bytes.
func (c LogConfig) maxTimeEntries() int { return int(c.SegmentIndexBytes) / timeEntrySize }

// maxSegmentMs is how old a segment may grow before it is rolled: a
// compacted log rolls by max.compaction.lag.ms too, so that the cleaner,
// which never touches the active segment, can meet that lag (Kafka's
// LogConfig.maxSegmentMs).
func (c LogConfig) maxSegmentMs() int64 {
	if c.Compact && c.MaxCompactionLagMs > 0 {
		return min(c.MaxCompactionLagMs, c.SegmentMs)
	}
	return c.SegmentMs
}

// randomSegmentJitter draws a new segment's roll jitter in
// [0, min(segment.jitter.ms, segment.ms)), as Kafka's randomSegmentJitter,
// so that partitions created together do not all roll at once.
func (c LogConfig) randomSegmentJitter() int64 {
	if c.SegmentJitterMs <= 0 {
		return 0
	}
	return rand.Int64N(min(c.SegmentJitterMs, c.SegmentMs))
}
