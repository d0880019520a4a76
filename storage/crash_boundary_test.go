package storage

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// boundaryBatches is the produce sequence the crash tests cut: enough
// batches of ~190 bytes to roll three 800-byte segments.
const boundaryBatches = 14

// crashAt wraps mem so that, once armed, the write numbered tear (from 1)
// stores half its data and fails, and every operation after it fails: the
// process died inside that write. tear 0 never fails.
type crashAt struct {
	mu     sync.Mutex
	armed  bool
	writes int
	tear   int
	dead   bool
}

func (c *crashAt) inject(op vfs.Op, _ string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return nil
	}
	if c.dead {
		return vfs.ErrInjected
	}
	if op != vfs.OpWrite {
		return nil
	}
	c.writes++
	if c.writes == c.tear {
		c.dead = true
		return &vfs.ShortWriteError{Err: vfs.ErrInjected}
	}
	return nil
}

// runBoundarySequence appends boundaryBatches batches with flush.messages=1
// on a filesystem that dies at the write numbered tear, and returns what
// was acknowledged (every append that returned without error) and the
// number of writes the sequence made.
func runBoundarySequence(t *testing.T, mem *vfs.MemFS, tear int) (acked []appended, writes int) {
	t.Helper()
	c := &crashAt{tear: tear}
	fsys := vfs.NewFaulty(mem, c.inject)
	cfg := smallConfig(800, 100)
	cfg.FlushMessages = 1
	m := openTestManager(t, fsys, cfg)
	l := createTestLog(t, m, cfg)
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
	for i := range boundaryBatches {
		b := batchOf(2, int64(1000+i), 50)
		res, err := l.Append(b, 7, 0)
		if err != nil {
			break
		}
		acked = append(acked, appended{base: res.FirstOffset, last: res.LastOffset, data: b})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The manager is abandoned, not closed: the process is gone.
	return acked, c.writes
}

// TestCrashAtEveryWriteBoundary cuts a produce sequence (flush.messages=1,
// three segment rolls) at every write it makes, tearing that write in
// half, and restarts twice: after a power loss (only what was fsynced
// survives) and after a process crash (everything written survives,
// including the torn half). Recovery must keep every acknowledged batch
// byte for byte, never a torn one, and take the next append at the offset
// after the last batch it kept.
func TestCrashAtEveryWriteBoundary(t *testing.T) {
	_, total := runBoundarySequence(t, vfs.NewMem(), 0)
	if total < boundaryBatches {
		t.Fatalf("the sequence made %d writes for %d batches", total, boundaryBatches)
	}
	for tear := 1; tear <= total; tear++ {
		for _, powerLoss := range []bool{true, false} {
			name := fmt.Sprintf("write %d of %d/process crash", tear, total)
			if powerLoss {
				name = fmt.Sprintf("write %d of %d/power loss", tear, total)
			}
			t.Run(name, func(t *testing.T) {
				mem := vfs.NewMem()
				acked, _ := runBoundarySequence(t, mem, tear)
				if powerLoss {
					mem.Crash()
				}
				m := openTestManager(t, mem)
				defer m.Close()
				l, ok := m.Log("orders", 0)
				if !ok && powerLoss && len(acked) == 0 {
					// Never flushed, so its creation was not synced
					// either: the broker makes it again from the
					// metadata.
					return
				}
				if !ok {
					t.Fatal("log lost")
				}
				got := parseAll(t, readAll(t, l))
				// Every acknowledged batch is back, unchanged.
				if len(got) < len(acked) {
					t.Fatalf("%d batches recovered, %d were acknowledged", len(got), len(acked))
				}
				data := readAll(t, l)
				var want []byte
				for _, a := range acked {
					want = append(want, a.data...)
				}
				if !bytes.Equal(data[:len(want)], want) {
					t.Fatal("acknowledged batches differ after recovery")
				}
				// Beyond them at most the batch that was being written, and
				// only whole (parseAll checked each CRC): after a power loss
				// nothing unsynced.
				extra := len(got) - len(acked)
				if extra > 1 || (powerLoss && extra != 0) {
					t.Fatalf("%d batches recovered beyond the %d acknowledged", extra, len(acked))
				}
				if extra == 1 {
					b := batchOf(2, int64(1000+len(acked)), 50)
					if h := got[len(got)-1]; h.BaseOffset != int64(2*len(acked)) || !bytes.Equal(data[len(want):], withBaseOffset(b, h.BaseOffset)) {
						t.Fatalf("the unacknowledged batch came back changed: %+v", h)
					}
				}
				leo := int64(2 * len(got))
				if l.LogEndOffset() != leo {
					t.Fatalf("LEO %d, want %d", l.LogEndOffset(), leo)
				}
				// Reads by offset work through the rebuilt indexes.
				for off := int64(0); off < leo; off += 2 {
					r, err := l.Read(off, 1, leo, true)
					if err != nil {
						t.Fatalf("read at %d: %v", off, err)
					}
					if hs := parseAll(t, r.Data); len(hs) == 0 || hs[0].BaseOffset != off {
						t.Fatalf("read at %d returned %+v", off, hs)
					}
				}
				if a := mustAppend(t, l, batchOf(1, 5000, 10), 0); a.base != leo {
					t.Fatalf("next append at %d, want %d", a.base, leo)
				}
			})
		}
	}
}

// withBaseOffset is batch as the log stores it at base: Append rewrites
// only the base offset (and the partition leader epoch, 7 here), which the
// CRC does not cover.
func withBaseOffset(batch []byte, base int64) []byte {
	out := append([]byte(nil), batch...)
	for i := range 8 {
		out[i] = byte(uint64(base) >> (56 - 8*i))
	}
	out[12], out[13], out[14], out[15] = 0, 0, 0, 7
	return out
}
