package storage

import (
	"os"
	"syscall"
)

// evictFromCache drops a file's pages from the page cache (it must have
// been synced), so that the next read comes from the disk, as after a
// machine restart.
func evictFromCache(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	const fadvDontNeed = 4 // POSIX_FADV_DONTNEED
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
