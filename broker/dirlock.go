package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gregorbroker/gregor/vfs"
)

// lockDirs takes the lock of every log dir and of the metadata dir
// (metadata.log.dir, else the first log dir) before anything in them is
// read or written, as Kafka locks each log dir and its metadata dir: a
// second process on the same data would lose records the first
// acknowledged. On failure it releases what it took, so a refused start
// leaves the dirs as it found them.
func (s *Server) lockDirs() error {
	var seen []string
	meta := s.cfg.MetadataDir()
	for _, dir := range append(slices.Clone(s.cfg.LogDirs), meta) {
		clean := filepath.Clean(dir)
		if slices.Contains(seen, clean) {
			continue
		}
		seen = append(seen, clean)
		l, err := vfs.LockDir(dir)
		switch {
		case errors.Is(err, vfs.ErrDirLocked):
			s.unlockDirs()
			return err
		case err != nil && clean == filepath.Clean(meta):
			// Without its metadata log the node cannot run at all, as
			// Kafka stops when its metadata dir fails.
			s.unlockDirs()
			return fmt.Errorf("metadata log dir: %w", err)
		case err != nil:
			// As Kafka: a disk error while locking is the dir's failure,
			// not the node's; opening the dir meets it again and takes the
			// dir offline if others remain.
			s.log.Error("lock log dir", "dir", dir, "err", err)
			continue
		}
		s.dirLocks = append(s.dirLocks, l)
	}
	return nil
}

// unlockDirs releases the dir locks; Close calls it last, once every file
// in the dirs is closed.
func (s *Server) unlockDirs() {
	for _, l := range s.dirLocks {
		if err := l.Unlock(); err != nil {
			s.log.Warn("release data dir lock", "dir", l.Dir(), "err", err)
		}
	}
	s.dirLocks = nil
}
