package coordhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// testLog is a partition log in a temporary dir with a plain batch of
// three records (k0..k2) and a transactional one of two (k3, k4) from
// producer 7 at epoch 2.
func testLog(t *testing.T) *storage.Log {
	t.Helper()
	m, err := storage.OpenManager(storage.ManagerConfig{FS: vfs.Default, Dirs: []string{t.TempDir()}, NodeID: 1,
		ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	lg, err := m.GetOrCreateLog("__consumer_offsets", 0, [16]byte{1}, storage.DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	batch := func(h protocol.BatchHeader, first, n int) []byte {
		recs := make([]protocol.Record, n)
		for i := range recs {
			recs[i] = protocol.Record{OffsetDelta: int32(i), Key: fmt.Appendf(nil, "k%d", first+i), Value: fmt.Appendf(nil, "v%d", first+i)}
		}
		b, err := protocol.BuildBatch(h, recs, protocol.CodecNone)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plain := batch(protocol.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 0, 3)
	txn := batch(protocol.BatchHeader{ProducerID: 7, ProducerEpoch: 2, BaseSequence: 0, Attributes: protocol.AttrTransactional}, 3, 2)
	for _, b := range [][]byte{plain, txn} {
		if _, err := lg.Append(b, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	return lg
}

// TestReadLog: every record from the log start to the log end, in order,
// with the producer fields of transactional batches.
func TestReadLog(t *testing.T) {
	lg := testLog(t)
	var got []group.Record
	for r, err := range ReadLog(context.Background(), lg) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 5 {
		t.Fatalf("read %d records, want 5", len(got))
	}
	for i, r := range got {
		if string(r.Key) != fmt.Sprintf("k%d", i) || string(r.Value) != fmt.Sprintf("v%d", i) {
			t.Fatalf("record %d is %q=%q", i, r.Key, r.Value)
		}
		txn := i >= 3
		if r.Transactional != txn || r.Control {
			t.Fatalf("record %d: transactional %v control %v", i, r.Transactional, r.Control)
		}
		if txn && (r.ProducerID != 7 || r.ProducerEpoch != 2) {
			t.Fatalf("record %d: producer %d epoch %d, want 7 and 2", i, r.ProducerID, r.ProducerEpoch)
		}
	}
}

// TestReadLogFromLogStart: records below the log start offset, in a batch
// that straddles it, are left out; a consumer that stops early stops the
// read; a cancelled context ends it with its error.
func TestReadLogFromLogStart(t *testing.T) {
	lg := testLog(t)
	if err := lg.IncrementLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for r, err := range ReadLog(context.Background(), lg) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, string(r.Key))
		if len(keys) == 2 {
			break
		}
	}
	if fmt.Sprint(keys) != "[k2 k3]" {
		t.Fatalf("read %v, want [k2 k3]", keys)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	for _, err := range ReadLog(ctx, lg) {
		n++
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read with a cancelled context: %v", err)
		}
	}
	if n != 1 {
		t.Fatalf("a cancelled read yielded %d times, want its error once", n)
	}
}
