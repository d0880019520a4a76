package broker

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

// TestSecondServerOnLockedDirTouchesNothing: a second server on the data
// dirs of a running one fails with a DirLockedError naming the dir before
// it makes a single file system call through its FS, for each of several
// log dirs.
func TestSecondServerOnLockedDirTouchesNothing(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	startServer(t, dirA, func(c *config.Broker) { c.LogDirs = []string{dirA, dirB} })

	for _, dirs := range [][]string{{dirA}, {dirB}, {t.TempDir(), dirB}} {
		var mu sync.Mutex
		var ops []string
		fsys := vfs.NewFaulty(vfs.Default, func(op vfs.Op, path string) error {
			mu.Lock()
			ops = append(ops, fmt.Sprint(op, " ", path))
			mu.Unlock()
			return nil
		})
		cfg := testConfig(t, dirs[0])
		cfg.LogDirs = dirs
		s, err := New(cfg, Options{Logger: testLogger(), FS: fsys})
		if err == nil {
			s.Close()
			t.Fatalf("second server on %v started", dirs)
		}
		var held *vfs.DirLockedError
		if !errors.As(err, &held) || held.Dir != dirs[len(dirs)-1] && held.Dir != dirA {
			t.Fatalf("second server on %v: %v, want the lock of a held dir", dirs, err)
		}
		mu.Lock()
		if len(ops) > 0 {
			t.Errorf("refused server on %v used its FS: %v", dirs, ops)
		}
		mu.Unlock()
	}
}
