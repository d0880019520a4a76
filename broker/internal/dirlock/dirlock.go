// Package dirlock takes the locks of a broker's data dirs before anything
// in them is read or written.
package dirlock

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

// Lock takes the lock of every log dir and of the metadata dir
// (metadata.log.dir, else the first log dir) before anything in them is
// read or written, as Kafka locks each log dir and its metadata dir: a
// second process on the same data would lose records the first
// acknowledged. On failure it releases what it took, so a refused start
// leaves the dirs as it found them.
func Lock(cfg *config.Broker, log *slog.Logger) ([]*vfs.DirLock, error) {
	var locks []*vfs.DirLock
	var seen []string
	meta := cfg.MetadataDir()
	for _, dir := range append(slices.Clone(cfg.LogDirs), meta) {
		clean := filepath.Clean(dir)
		if slices.Contains(seen, clean) {
			continue
		}
		seen = append(seen, clean)
		l, err := vfs.LockDir(dir)
		switch {
		case errors.Is(err, vfs.ErrDirLocked):
			Unlock(locks, log)
			return nil, err
		case err != nil && clean == filepath.Clean(meta):
			// Without its metadata log the node cannot run at all, as
			// Kafka stops when its metadata dir fails.
			Unlock(locks, log)
			return nil, fmt.Errorf("metadata log dir: %w", err)
		case err != nil:
			// As Kafka: a disk error while locking is the dir's failure,
			// not the node's; opening the dir meets it again and takes the
			// dir offline if others remain.
			log.Error("lock log dir", "dir", dir, "err", err)
			continue
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// Unlock releases the dir locks; the server calls it last, once every
// file in the dirs is closed.
func Unlock(locks []*vfs.DirLock, log *slog.Logger) {
	for _, l := range locks {
		if err := l.Unlock(); err != nil {
			log.Warn("release data dir lock", "dir", l.Dir(), "err", err)
		}
	}
}
