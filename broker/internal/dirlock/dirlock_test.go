package dirlock

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

// TestLockReleasesOnRefusal: the metadata dir (the first log dir) is
// locked once; a dir already locked refuses the whole set and releases
// what was taken before it, so that the set can be locked once it is free.
func TestLockReleasesOnRefusal(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d1, d2 := t.TempDir(), t.TempDir()
	cfg := &config.Broker{LogDirs: []string{d1, d2}}

	held, err := Lock(&config.Broker{LogDirs: []string{d2}}, log)
	if err != nil || len(held) != 1 {
		t.Fatalf("lock %s: %d locks, %v", d2, len(held), err)
	}
	if locks, err := Lock(cfg, log); !errors.Is(err, vfs.ErrDirLocked) || locks != nil {
		t.Fatalf("lock with %s held elsewhere: %d locks, %v, want ErrDirLocked", d2, len(locks), err)
	}
	// d1 was released when d2 refused.
	only1, err := Lock(&config.Broker{LogDirs: []string{d1}}, log)
	if err != nil {
		t.Fatalf("lock %s after the refusal: %v", d1, err)
	}
	Unlock(only1, log)
	Unlock(held, log)

	locks, err := Lock(cfg, log)
	if err != nil || len(locks) != 2 {
		t.Fatalf("lock %v: %d locks, %v, want 2", cfg.LogDirs, len(locks), err)
	}
	Unlock(locks, log)
}
