//go:build linux || darwin || freebsd || windows

package broker

import (
	"path/filepath"
	"testing"
)

// TestDirSpace: a directory's filesystem has a size and usable bytes no
// larger than it; a missing directory is an error (DescribeLogDirs
// answers KAFKA_STORAGE_ERROR for it).
func TestDirSpace(t *testing.T) {
	dir := t.TempDir()
	total, usable, err := dirSpace(dir)
	if err != nil {
		t.Fatal(err)
	}
	if total <= 0 || usable < 0 || usable > total {
		t.Fatalf("total %d, usable %d", total, usable)
	}
	if _, _, err := dirSpace(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("no error for a missing directory")
	}
}
