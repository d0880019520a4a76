package storage

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// kv is a record for cleaner tests. A nil key is a null key; tombstone
// makes the value null.
type kv struct {
	key       []byte
	value     string
	tombstone bool
}

func k(key, value string) kv { return kv{key: []byte(key), value: value} }
func tomb(key string) kv     { return kv{key: []byte(key), tombstone: true} }
func nullKey(value string) kv {
	return kv{value: value}
}

// kbatch describes a keyed batch.
type kbatch struct {
	recs        []kv
	ts          int64 // timestamp of every record
	codec       protocol.Codec
	pid         int64 // producer id; 0 means none (-1 on the wire)
	epoch       int16
	seq         int32
	txn         bool
	control     int16 // with pid: a control batch of this type, if marker is set
	marker      bool
	appendTime  bool
	leaderEpoch int32
}

// build encodes the batch with base offset 0, as a producer sends it.
func (b kbatch) build(t testing.TB) []byte {
	t.Helper()
	h := protocol.BatchHeader{
		PartitionLeaderEpoch: -1, FirstTimestamp: b.ts, MaxTimestamp: b.ts,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}
	if b.pid != 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = b.pid, b.epoch, b.seq
	}
	if b.txn {
		h.Attributes |= protocol.AttrTransactional
	}
	if b.appendTime {
		h.Attributes |= protocol.AttrLogAppendTime
	}
	var recs []protocol.Record
	if b.marker {
		h.Attributes |= protocol.AttrControl | protocol.AttrTransactional
		h.BaseSequence = -1
		key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(b.control))
		val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 5)
		recs = append(recs, protocol.Record{Key: key, Value: val})
	}
	for i, r := range b.recs {
		rec := protocol.Record{OffsetDelta: int32(i), Key: r.key}
		if !r.tombstone {
			rec.Value = []byte(r.value)
		}
		recs = append(recs, rec)
	}
	out, err := protocol.BuildBatch(h, recs, b.codec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testClock is a settable clock in milliseconds.
type testClock struct{ ms atomic.Int64 }

func (c *testClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }
func (c *testClock) set(ms int64)   { c.ms.Store(ms) }

// openCleanerManager opens testDir on fsys with protocol's codecs and the
// given clock.
func openCleanerManager(t testing.TB, fsys vfs.FS, clock *testClock, cfg LogConfig) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerConfig{
		FS: fsys, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster,
		Logger: quietLogger(), Now: clock.now,
		Decompress:  func(c protocol.Codec, b []byte) ([]byte, error) { return protocol.Decompress(c, b, 64<<20) },
		Compress:    protocol.Compress,
		TopicConfig: func(string) LogConfig { return cfg },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// compactConfig is a compacted topic's config with big segments (tests
// roll by hand) and no delay before deleted files go.
func compactConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.IndexIntervalBytes = 64
	cfg.FileDeleteDelayMs = 0
	return cfg
}

// forceRoll closes the active segment, as a full segment would.
func forceRoll(t testing.TB, l *Log) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active().size.Load() == 0 {
		return
	}
	if _, err := l.rollLocked(l.nowMs()); err != nil {
		t.Fatal(err)
	}
}

// gotBatch and gotRec are what reading a log gives back.
type gotBatch struct {
	base, last int64
	n          int32
	attrs      int16
	pid        int64
	seq        int32
}

type gotRec struct {
	offset int64
	key    string
	value  string // "<nil>" for a tombstone
}

func (r gotRec) String() string { return fmt.Sprintf("%d:%s=%s", r.offset, r.key, r.value) }

// dumpLog reads the whole log and decodes every batch and record,
// checking CRCs and that offsets rise.
func dumpLog(t testing.TB, l *Log) ([]gotBatch, []gotRec) {
	t.Helper()
	data := readAll(t, l)
	var bs []gotBatch
	var rs []gotRec
	last := int64(-1)
	for len(data) > 0 {
		batch, rest, h, err := protocol.NextBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		data = rest
		if h.BaseOffset <= last {
			t.Fatalf("batch at %d after offset %d", h.BaseOffset, last)
		}
		bs = append(bs, gotBatch{base: h.BaseOffset, last: h.LastOffset(), n: h.NumRecords, attrs: h.Attributes, pid: h.ProducerID, seq: h.BaseSequence})
		err = protocol.DecodeBatch(batch, 64<<20, func(h *protocol.BatchHeader, r protocol.Record) error {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if off <= last || off > h.LastOffset() {
				return fmt.Errorf("record offset %d after %d, batch %d..%d", off, last, h.BaseOffset, h.LastOffset())
			}
			last = off
			if h.IsControl() {
				return nil
			}
			v := string(r.Value)
			if r.Value == nil {
				v = "<nil>"
			}
			rs = append(rs, gotRec{offset: off, key: string(r.Key), value: v})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		last = h.LastOffset()
	}
	return bs, rs
}
