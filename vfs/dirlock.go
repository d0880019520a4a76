package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFileName is the file in a data directory that its owning process
// holds locked, as Kafka's LogManager holds ".lock" in every log dir and
// in the metadata dir.
const LockFileName = ".lock"

// ErrDirLocked is returned (wrapped in a *DirLockedError) when another
// process holds a directory's lock.
var ErrDirLocked = errors.New("directory is locked by another process")

// DirLockedError names the directory whose lock is held elsewhere, and the
// holder's pid when the lock file records one.
type DirLockedError struct {
	Dir string
	PID int // 0 when the lock file names no process
}

func (e *DirLockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "another process (pid " + strconv.Itoa(e.PID) + ")"
	}
	return fmt.Sprintf("data directory %s is in use by %s: its %s is locked; only one gregor may use a directory at a time",
		e.Dir, holder, LockFileName)
}

// Unwrap makes errors.Is(err, ErrDirLocked) true.
func (e *DirLockedError) Unwrap() error { return ErrDirLocked }

// DirLock is a held lock on a directory. The operating system releases it
// when the process exits, however it exits, so a crash leaves no stale
// lock behind.
type DirLock struct {
	dir string
	f   *os.File
}

// Dir is the locked directory.
func (l *DirLock) Dir() string { return l.dir }

// Unlock releases the lock. The lock file stays: removing it would let a
// process that opened the old file and one that creates a new one both
// believe they hold the lock.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := unlockFile(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if err != nil {
		return fmt.Errorf("unlock %s: %w", l.dir, err)
	}
	return nil
}

// LockDir takes the exclusive lock of dir on the operating system's file
// system, creating dir if it does not exist, and writes this process's id
// into the lock file. It never waits: if another process (or another
// DirLock in this one) holds the lock it returns a *DirLockedError and
// changes nothing in dir. The lock is advisory: it keeps out other gregor
// processes, which all take it before reading their dirs.
func LockDir(dir string) (*DirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	held, err := tryLockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !held {
		pid := readPID(f)
		f.Close()
		return nil, &DirLockedError{Dir: dir, PID: pid}
	}
	if err := writePID(f); err != nil {
		unlockFile(f)
		f.Close()
		return nil, fmt.Errorf("lock %s: write pid: %w", path, err)
	}
	return &DirLock{dir: dir, f: f}, nil
}

// readPID reads the holder's pid from the lock file; 0 if it has none.
func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// writePID replaces the lock file's content with this process's id, for
// the message another process prints when it finds the lock held.
func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}
