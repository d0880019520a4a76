// Package vfs is the small filesystem interface through which storage and
// raftmeta reach the disk. Production code uses Default (the OS); tests use
// an in-memory filesystem that can simulate a crash, or a wrapper that
// injects errors, so that crash and fault tests are ordinary unit tests.
package vfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File is an open file. It is the subset of *os.File that storage needs.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	// Sync flushes the file's written data to stable storage.
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Stat returns the file's metadata.
	Stat() (fs.FileInfo, error)
	// Name returns the path the file was opened with.
	Name() string
}

// OSFiler is implemented by a File that wraps an operating-system file
// and may hand it out, so that its bytes can go to a socket with sendfile
// instead of through a buffer. Files that must see every read (Faulty's,
// MemFS's) do not implement it.
type OSFiler interface {
	// OSFile returns the underlying file, or nil if there is none.
	OSFile() *os.File
}

// OSFile returns the operating-system file behind f, or nil when f is not
// one (an in-memory file, or a wrapper that must see every read). The
// caller must not close it, move its file offset, or use it after f is
// closed.
func OSFile(f File) *os.File {
	switch f := f.(type) {
	case *os.File:
		return f
	case OSFiler:
		return f.OSFile()
	}
	return nil
}

// FS is a filesystem. Paths are OS paths.
type FS interface {
	// Create creates or truncates the named file for reading and writing.
	Create(name string) (File, error)
	// Open opens the named file read-only.
	Open(name string) (File, error)
	// OpenFile opens the named file with os.OpenFile's flags.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Remove removes the named file or empty directory.
	Remove(name string) error
	// RemoveAll removes a path and everything below it.
	RemoveAll(name string) error
	// Rename renames (moves) oldname to newname, replacing newname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(dir string) ([]fs.DirEntry, error)
	// Stat describes the named file.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the creation, renaming or removal of entries in dir
	// durable.
	SyncDir(dir string) error
	// Chtimes sets the named file's access and modification times, as
	// os.Chtimes (Kafka's cleaner keeps a cleaned segment's age so).
	Chtimes(name string, atime, mtime time.Time) error
}

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) { return os.Create(name) }
func (osFS) Open(name string) (File, error)   { return os.Open(name) }
func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) ReadDir(dir string) ([]fs.DirEntry, error)   { return os.ReadDir(dir) }
func (osFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }
func (osFS) Chtimes(name string, atime, mtime time.Time) error {
	return os.Chtimes(name, atime, mtime)
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

// ReadFile reads the whole named file from fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFileAtomic writes data to name so that after a crash the file holds
// either its old contents or data, never a mix: it writes a temporary file,
// syncs it, renames it over name and syncs the directory.
func WriteFileAtomic(fsys FS, name string, data []byte) error {
	if err := ReplaceFile(fsys, name, data); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(name))
}

// ReplaceFile is WriteFileAtomic without the directory's sync: after a
// crash the file holds either its old contents or data, never a mix, but
// which of the two is up to whether the directory was synced since (a
// later WriteFileAtomic in it syncs it). It is for a file whose old
// contents mean the same as data, where the directory's sync would buy
// nothing.
func ReplaceFile(fsys FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.Rename(tmp, name)
}
