package storage

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// TestFlushToSharesFsyncs: appends deferred under flush.messages=1 are
// made durable by one FlushTo, and the FlushTo calls of the others then
// return without an fsync of their own (group commit).
func TestFlushToSharesFsyncs(t *testing.T) {
	var syncs atomic.Int64
	fsys := vfs.NewFaulty(vfs.NewMem(), func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, ".log") {
			syncs.Add(1)
		}
		return nil
	})
	m := openTestManager(t, fsys)
	defer m.Close()
	cfg := DefaultLogConfig()
	cfg.FlushMessages = 1
	l := createTestLog(t, m, cfg)
	var lasts []int64
	for i := 0; i < 3; i++ {
		res, flush, err := l.AppendDeferFlush(batchOf(2, 1, 10), 0, 0)
		if err != nil || !flush {
			t.Fatalf("append %d: flush=%v err=%v", i, flush, err)
		}
		lasts = append(lasts, res.LastOffset)
	}
	if l.RecoveryPoint() != 0 {
		t.Fatalf("recovery point %d before any FlushTo", l.RecoveryPoint())
	}
	before := syncs.Load()
	if err := l.FlushTo(lasts[2] + 1); err != nil {
		t.Fatal(err)
	}
	if got := syncs.Load() - before; got != 1 {
		t.Fatalf("first FlushTo synced the log %d times, want 1", got)
	}
	for _, last := range lasts[:2] {
		if err := l.FlushTo(last + 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := syncs.Load() - before; got != 1 {
		t.Fatalf("covered FlushTo calls synced again: %d syncs in all", got)
	}
	if l.RecoveryPoint() != lasts[2]+1 {
		t.Fatalf("recovery point %d, want %d", l.RecoveryPoint(), lasts[2]+1)
	}
}
