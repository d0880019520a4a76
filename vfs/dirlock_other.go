//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package vfs

import (
	"errors"
	"os"
)

// tryLockFile has no flock to call on this system: rather than run
// without the guarantee that no second process shares a data dir, it
// refuses.
func tryLockFile(f *os.File) (bool, error) {
	return false, errors.New("locking a data directory is not supported on this system")
}

func unlockFile(f *os.File) error { return nil }
