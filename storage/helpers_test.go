package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// testBatch describes a magic-2 batch for tests: one record per timestamp,
// each value a fixed size.
type testBatch struct {
	timestamps []int64
	valueSize  int
	gzip       bool
	appendTime int64 // if non-zero, LogAppendTime with this timestamp
}

// build encodes the batch with base offset 0, as a producer sends it.
func (tb testBatch) build() []byte {
	var recs []byte
	first := tb.timestamps[0]
	maxTs := first
	for i, ts := range tb.timestamps {
		maxTs = max(maxTs, ts)
		var body []byte
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, ts-first)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, -1) // null key
		val := bytes.Repeat([]byte{byte('a' + i%26)}, tb.valueSize)
		body = binary.AppendVarint(body, int64(len(val)))
		body = append(body, val...)
		body = binary.AppendVarint(body, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	attrs := uint16(0)
	if tb.gzip {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(recs)
		w.Close()
		recs = z.Bytes()
		attrs |= uint16(protocol.CodecGzip)
	}
	if tb.appendTime != 0 {
		attrs |= protocol.AttrLogAppendTime
		maxTs = tb.appendTime
	}
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+len(recs))
	binary.BigEndian.PutUint64(b[0:], 0)
	binary.BigEndian.PutUint32(b[8:], uint32(protocol.BatchHeaderSize-12+len(recs)))
	binary.BigEndian.PutUint32(b[12:], 0xffffffff) // leader epoch -1
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], attrs)
	binary.BigEndian.PutUint32(b[23:], uint32(len(tb.timestamps)-1))
	binary.BigEndian.PutUint64(b[27:], uint64(first))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[43:], 0xffffffffffffffff) // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(len(tb.timestamps)))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], protocol.BatchCRC(b))
	return b
}

// batchOf builds a batch of n records with timestamps ts, ts+1, ...
func batchOf(n int, ts int64, valueSize int) []byte {
	tss := make([]int64, n)
	for i := range tss {
		tss[i] = ts + int64(i)
	}
	return testBatch{timestamps: tss, valueSize: valueSize}.build()
}

func gunzip(codec protocol.Codec, data []byte) ([]byte, error) {
	if codec != protocol.CodecGzip {
		return nil, fmt.Errorf("test decompressor: codec %s", codec)
	}
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

const (
	testDir     = "/data/kafka"
	testCluster = "MkU3OEVBNTcwNTJENDM2Qg"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openTestManager opens testDir on fsys with a clock stopped at 0 ms, the
// clock tests pass to Append. cfg, if given, is every topic's config.
func openTestManager(t testing.TB, fsys vfs.FS, cfg ...LogConfig) *Manager {
	t.Helper()
	mc := ManagerConfig{
		FS: fsys, Dirs: []string{testDir}, NodeID: 1, ClusterID: testCluster,
		Logger: quietLogger(), Decompress: gunzip,
		Now: func() time.Time { return time.UnixMilli(0) },
	}
	if len(cfg) > 0 {
		mc.TopicConfig = func(string) LogConfig { return cfg[0] }
	}
	m, err := OpenManager(mc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func createTestLog(t testing.TB, m *Manager, cfg LogConfig) *Log {
	t.Helper()
	l, err := m.GetOrCreateLog("orders", 0, [16]byte{1, 2, 3}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func smallConfig(segmentBytes int64, interval int32) LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentBytes = segmentBytes
	cfg.IndexIntervalBytes = interval
	return cfg
}

// appended records what a test appended, to check reads against.
type appended struct {
	base, last int64
	data       []byte // the batch as written, with its assigned offset
}

func mustAppend(t testing.TB, l *Log, batch []byte, now int64) appended {
	t.Helper()
	res, err := l.Append(batch, 7, now)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return appended{base: res.FirstOffset, last: res.LastOffset, data: batch}
}

// parseAll splits read data into batches, checking each CRC.
func parseAll(t testing.TB, data []byte) []protocol.BatchHeader {
	t.Helper()
	var out []protocol.BatchHeader
	for len(data) > 0 {
		h, err := protocol.ParseBatchHeader(data)
		if err != nil {
			t.Fatalf("read data does not parse: %v", err)
		}
		if err := protocol.VerifyCRC(data[:h.Size()]); err != nil {
			t.Fatalf("read batch at offset %d: %v", h.BaseOffset, err)
		}
		out = append(out, h)
		data = data[h.Size():]
	}
	return out
}

// readAll reads the whole log from its start through repeated Reads.
func readAll(t testing.TB, l *Log) []byte {
	t.Helper()
	var out []byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		r, err := l.Read(off, 1<<20, l.LogEndOffset(), true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		hs := parseAll(t, r.Data)
		if len(hs) == 0 {
			t.Fatalf("read at %d returned nothing below LEO %d", off, l.LogEndOffset())
		}
		out = append(out, r.Data...)
		off = hs[len(hs)-1].LastOffset() + 1
	}
	return out
}
