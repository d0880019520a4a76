package storage

import (
	"errors"
	"fmt"
	"syscall"
)

// A full disk is not a failed disk. Kafka takes a log dir offline on any
// IOException, out-of-space included, and brings it back only with a
// restart; Gregor instead treats a write or file creation refused for want
// of space (ENOSPC, or EDQUOT for a quota) as an error of that one append:
// the bytes it may have written past the log end are cut off again, the
// log keeps no sticky error, and the next append succeeds once space
// returns. A file creation refused for want of file descriptors (EMFILE,
// ENFILE: a roll, a new log) is treated the same way. Only a failed fsync (after which the page cache may have
// dropped the data, whatever the errno) or a failed truncation of the
// partial write stays sticky and takes the dir offline.

// IsNoSpace reports whether err is the disk (or the user's quota) running
// out of space.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// IsExhausted reports whether err is a resource running out rather than a
// disk failing: space (IsNoSpace), or file descriptors (EMFILE for the
// process, ENFILE for the system), which a file creation or a roll meets.
// Such an error fails the one operation and leaves the log usable.
func IsExhausted(err error) bool {
	return IsNoSpace(err) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// errSyncFailed marks an fsync failure inside an operation that also
// writes, so that an fsync refused with ENOSPC is never mistaken for a
// write that can simply be retried.
var errSyncFailed = errors.New("fsync failed")

// transientWriteErr reports whether err, from a write path of the log,
// leaves the log usable: the disk ran out of space, or the process out of
// file descriptors, before anything was published, and no fsync failed.
func transientWriteErr(err error) bool {
	return IsExhausted(err) && !errors.Is(err, errSyncFailed)
}

// syncErr wraps an fsync failure so that transientWriteErr refuses it.
func syncErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errSyncFailed, err)
}

// failedWriteLocked handles a write of batches at pos in the active
// segment that failed: out of space, it cuts off whatever part of the
// batches reached the file (a shorter file needs no space) and leaves the
// log usable; any other failure, or a cut that fails, is sticky. The
// caller holds l.mu and has not yet published the batches.
func (l *Log) failedWriteLocked(seg *segment, pos int64, err error) error {
	err = fmt.Errorf("append %s: %w", l.tp, err)
	if !transientWriteErr(err) {
		l.err = err
		return err
	}
	if errors.Is(err, errLogFileOpen) {
		// The closed .log could not be reopened (out of descriptors):
		// nothing reached it.
		return err
	}
	if terr := seg.log.Truncate(pos); terr != nil {
		l.err = fmt.Errorf("%w; cutting the partial write: %v", err, terr)
		return l.err
	}
	return err
}

// deferIndexFilesLocked is the way out of an index rewrite that found the
// disk full during recovery or an index rebuild: the index files are a
// cache of the .log, so the segment goes on with its entries in memory
// only. The partly written files are removed (which needs no space), so a
// later start rebuilds them rather than trust a short one, and marked
// unwritten, so that a flush of the active segment writes them whole. A
// start-up on a full disk thus still serves reads. The caller holds s.mu.
func (s *segment) deferIndexFilesLocked() {
	for _, ext := range []string{indexSuffix, timeIndexSuffix} {
		s.fsys.Remove(s.path(ext))
	}
	s.offPersisted, s.timePersisted = 0, 0
}

// syncErrFile is syncErr naming the file.
func syncErrFile(name string, err error) error {
	return fmt.Errorf("%s: %w", name, syncErr(err))
}
