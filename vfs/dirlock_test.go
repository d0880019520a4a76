package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLockDirRefusesSecondHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, LockFileName))
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(os.Getpid()); strings.TrimSpace(string(got)) != want {
		t.Fatalf("lock file holds %q, want pid %s", got, want)
	}
	before, err := os.Stat(filepath.Join(dir, LockFileName))
	if err != nil {
		t.Fatal(err)
	}

	_, err = LockDir(dir)
	var held *DirLockedError
	if !errors.As(err, &held) || !errors.Is(err, ErrDirLocked) {
		t.Fatalf("second LockDir: %v, want a DirLockedError", err)
	}
	if held.Dir != dir || held.PID != os.Getpid() {
		t.Fatalf("error names dir %q pid %d, want %q pid %d", held.Dir, held.PID, dir, os.Getpid())
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("message %q does not name the dir and the pid", msg)
	}
	after, err := os.Stat(filepath.Join(dir, LockFileName))
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Fatal("the refused LockDir changed the lock file")
	}

	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir after Unlock: %v", err)
	}
	l2.Unlock()
}
