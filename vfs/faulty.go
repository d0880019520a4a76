package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Op names a filesystem operation that a Faulty filesystem can fail.
type Op int

// The operations an inject function is asked about. File operations carry
// the name the file was opened with.
const (
	OpCreate    Op = iota + 1 // FS.Create
	OpOpen                    // FS.Open
	OpOpenFile                // FS.OpenFile
	OpRemove                  // FS.Remove
	OpRemoveAll               // FS.RemoveAll
	OpRename                  // FS.Rename (path is the old name)
	OpMkdirAll                // FS.MkdirAll
	OpReadDir                 // FS.ReadDir
	OpStat                    // FS.Stat and File.Stat
	OpSyncDir                 // FS.SyncDir
	OpRead                    // File.Read and File.ReadAt
	OpWrite                   // File.Write and File.WriteAt
	OpSeek                    // File.Seek
	OpSync                    // File.Sync
	OpTruncate                // File.Truncate
	OpClose                   // File.Close
	OpChtimes                 // FS.Chtimes
)

var opNames = map[Op]string{
	OpCreate: "create", OpOpen: "open", OpOpenFile: "openfile", OpRemove: "remove",
	OpRemoveAll: "removeall", OpRename: "rename", OpMkdirAll: "mkdirall",
	OpReadDir: "readdir", OpStat: "stat", OpSyncDir: "syncdir", OpRead: "read",
	OpWrite: "write", OpSeek: "seek", OpSync: "sync", OpTruncate: "truncate",
	OpClose: "close", OpChtimes: "chtimes",
}

// String names the operation.
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// ErrInjected is a convenient error for inject functions to return.
var ErrInjected = errors.New("vfs: injected fault")

// ShortWriteError, returned by an inject function for OpWrite, makes the
// write store the first half of its data and then fail with Err, as a disk
// that fills up mid-write does.
type ShortWriteError struct{ Err error }

func (e *ShortWriteError) Error() string { return "short write: " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ShortWriteError) Unwrap() error { return e.Err }

// NewFaulty wraps inner so that every operation first asks inject; when
// inject returns an error the operation fails with it (wrapped in an
// fs.PathError) without reaching inner, except that a *ShortWriteError for
// OpWrite writes half the data first. inject must be safe for concurrent
// use if the filesystem is.
func NewFaulty(inner FS, inject func(op Op, path string) error) FS {
	return &faultyFS{inner: inner, inject: inject}
}

type faultyFS struct {
	inner  FS
	inject func(op Op, path string) error
}

func (f *faultyFS) check(op Op, name string) error {
	if err := f.inject(op, name); err != nil {
		return &fs.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

func (f *faultyFS) wrap(file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

func (f *faultyFS) Create(name string) (File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.Create(name))
}

func (f *faultyFS) Open(name string) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.Open(name))
}

func (f *faultyFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := f.check(OpOpenFile, name); err != nil {
		return nil, err
	}
	return f.wrap(f.inner.OpenFile(name, flag, perm))
}

func (f *faultyFS) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *faultyFS) RemoveAll(name string) error {
	if err := f.check(OpRemoveAll, name); err != nil {
		return err
	}
	return f.inner.RemoveAll(name)
}

func (f *faultyFS) Rename(oldname, newname string) error {
	if err := f.check(OpRename, oldname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

func (f *faultyFS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := f.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir, perm)
}

func (f *faultyFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if err := f.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.inner.ReadDir(dir)
}

func (f *faultyFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.check(OpStat, name); err != nil {
		return nil, err
	}
	return f.inner.Stat(name)
}

func (f *faultyFS) Chtimes(name string, atime, mtime time.Time) error {
	if err := f.check(OpChtimes, name); err != nil {
		return err
	}
	return f.inner.Chtimes(name, atime, mtime)
}

func (f *faultyFS) SyncDir(dir string) error {
	if err := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

// faultyFile asks its filesystem's inject function before each operation.
type faultyFile struct {
	File
	fs *faultyFS
}

func (f *faultyFile) Read(p []byte) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if n, err, done := f.shortWrite(p, func(b []byte) (int, error) { return f.File.Write(b) }); done {
		return n, err
	}
	return f.File.Write(p)
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if n, err, done := f.shortWrite(p, func(b []byte) (int, error) { return f.File.WriteAt(b, off) }); done {
		return n, err
	}
	return f.File.WriteAt(p, off)
}

// shortWrite applies an injected write fault. done reports whether the
// fault replaced the write.
func (f *faultyFile) shortWrite(p []byte, write func([]byte) (int, error)) (n int, err error, done bool) {
	ierr := f.fs.inject(OpWrite, f.Name())
	if ierr == nil {
		return 0, nil, false
	}
	perr := &fs.PathError{Op: OpWrite.String(), Path: f.Name(), Err: ierr}
	var sw *ShortWriteError
	if !errors.As(ierr, &sw) {
		return 0, perr, true
	}
	n, werr := write(p[:len(p)/2])
	if werr != nil {
		return n, werr, true
	}
	return n, perr, true
}

func (f *faultyFile) Seek(offset int64, whence int) (int64, error) {
	if err := f.fs.check(OpSeek, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Seek(offset, whence)
}

func (f *faultyFile) Sync() error {
	if err := f.fs.check(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultyFile) Stat() (fs.FileInfo, error) {
	if err := f.fs.check(OpStat, f.Name()); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

// Close releases the inner file even when a fault is injected, as a real
// close that reports an error still frees the descriptor.
func (f *faultyFile) Close() error {
	ierr := f.fs.check(OpClose, f.Name())
	cerr := f.File.Close()
	if ierr != nil {
		return ierr
	}
	return cerr
}
