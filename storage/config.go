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

	"github.com/gregorbroker/gregor/protocol"
)

// LogConfig is the per-topic configuration a log obeys. The names in the
// comments are Kafka's topic configs.
type LogConfig struct {
	SegmentBytes       int64 // segment.bytes, default 1 GiB
	SegmentMs          int64 // segment.ms, default 7 days
	IndexIntervalBytes int32 // index.interval.bytes, default 4096
	SegmentIndexBytes  int32 // segment.index.bytes, default 10 MiB (max index file size; roll when full)
	FlushMessages      int64 // flush.messages, default math.MaxInt64 (never force)
	FlushMs            int64 // flush.ms, default math.MaxInt64
}

// DefaultLogConfig returns Kafka's defaults.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 60 * 60 * 1000,
		IndexIntervalBytes: 4096,
		SegmentIndexBytes:  10 << 20,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
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
	return c
}

// maxOffsetEntries is how many .index entries fit in segment.index.bytes.
func (c LogConfig) maxOffsetEntries() int { return int(c.SegmentIndexBytes) / offsetEntrySize }

// maxTimeEntries is how many .timeindex entries fit in segment.index.bytes.
func (c LogConfig) maxTimeEntries() int { return int(c.SegmentIndexBytes) / timeEntrySize }
