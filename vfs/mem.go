package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrCrashed is returned by a file handle opened before MemFS.Crash: the
// process that held it is considered dead.
var ErrCrashed = errors.New("vfs: file handle from before a simulated crash")

// MemFS is an in-memory FS for tests. It keeps, besides each file's current
// contents, the contents as of its last Sync, and, besides each directory's
// current entries, the entries as of its last SyncDir. Crash throws away
// everything that was not made durable, as a power loss would.
//
// All paths live under one root; relative paths are taken from the root.
// MemFS is safe for concurrent use.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
	gen  uint64 // bumped by Crash so that older handles fail
}

// memNode is a file or a directory.
type memNode struct {
	dir     bool
	mode    fs.FileMode
	modTime time.Time

	// Directory state.
	children map[string]*memNode // current entries
	durable  map[string]*memNode // entries as of the last SyncDir

	// File state.
	data      []byte
	synced    []byte // contents as of the last Sync
	dirtyFrom int    // lowest byte changed since the last Sync
}

// NewMem returns an empty in-memory filesystem.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode(0o755)}
}

func newDirNode(perm fs.FileMode) *memNode {
	return &memNode{
		dir:      true,
		mode:     fs.ModeDir | perm.Perm(),
		modTime:  time.Now(),
		children: map[string]*memNode{},
		durable:  map[string]*memNode{},
	}
}

func newFileNode(perm fs.FileMode) *memNode {
	return &memNode{mode: perm.Perm(), modTime: time.Now(), dirtyFrom: math.MaxInt}
}

// Crash simulates a power loss: every file reverts to its contents at its
// last Sync and every directory to its entries at its last SyncDir. Files
// opened before the crash return ErrCrashed from then on.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	revert(m.root, map[*memNode]bool{})
}

func revert(n *memNode, seen map[*memNode]bool) {
	if seen[n] {
		return
	}
	seen[n] = true
	if !n.dir {
		n.data = append([]byte(nil), n.synced...)
		n.dirtyFrom = math.MaxInt
		return
	}
	n.children = make(map[string]*memNode, len(n.durable))
	for name, c := range n.durable {
		n.children[name] = c
		revert(c, seen)
	}
}

// split cleans name and returns its components below the root.
func split(name string) []string {
	p := filepath.ToSlash(filepath.Clean(name))
	p = strings.TrimPrefix(p, "/")
	if p == "." || p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// lookupLocked walks to the node named by parts. It returns the parent
// directory too, which may exist when the node does not.
func (m *MemFS) lookupLocked(op, name string) (parent, node *memNode, base string, err error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, m.root, "/", nil
	}
	dir := m.root
	for _, p := range parts[:len(parts)-1] {
		next, ok := dir.children[p]
		if !ok {
			return nil, nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		if !next.dir {
			return nil, nil, "", &fs.PathError{Op: op, Path: name, Err: errNotDir}
		}
		dir = next
	}
	base = parts[len(parts)-1]
	return dir, dir.children[base], base, nil
}

var (
	errNotDir   = errors.New("not a directory")
	errIsDir    = errors.New("is a directory")
	errNotEmpty = errors.New("directory not empty")
	errTooLarge = errors.New("file too large for an in-memory filesystem")
)

// maxMemFileSize bounds a MemFS file so that a wild offset is an error, not
// an enormous allocation.
const maxMemFileSize = 1 << 32

// Create creates or truncates the named file for reading and writing.
func (m *MemFS) Create(name string) (File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens the named file read-only.
func (m *MemFS) Open(name string) (File, error) {
	return m.OpenFile(name, os.O_RDONLY, 0)
}

// OpenFile opens the named file with os.OpenFile's flags.
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, n, base, err := m.lookupLocked("open", name)
	if err != nil {
		return nil, err
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	writable := acc == os.O_WRONLY || acc == os.O_RDWR
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case n == nil:
		if parent == nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
		}
		n = newFileNode(perm)
		parent.children[base] = n
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case n.dir && writable:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errIsDir}
	}
	if flag&os.O_TRUNC != 0 && writable && !n.dir {
		n.truncate(0)
	}
	return &memFile{
		fs:       m,
		node:     n,
		name:     name,
		gen:      m.gen,
		readable: acc == os.O_RDONLY || acc == os.O_RDWR,
		writable: writable,
		append:   flag&os.O_APPEND != 0,
	}, nil
}

// Remove removes the named file or empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, n, base, err := m.lookupLocked("remove", name)
	if err != nil {
		return err
	}
	if n == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if parent == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrInvalid}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: errNotEmpty}
	}
	delete(parent.children, base)
	return nil
}

// RemoveAll removes a path and everything below it. A missing path is not
// an error.
func (m *MemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parent, n, base, err := m.lookupLocked("removeall", name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if n == nil {
		return nil
	}
	if parent == nil {
		return &fs.PathError{Op: "removeall", Path: name, Err: fs.ErrInvalid}
	}
	// Only the entry in the parent goes: the subtree stays reachable from
	// the parent's durable entries until the parent is synced, so a crash
	// brings it back, as it would on a real disk.
	delete(parent.children, base)
	return nil
}

// Rename renames oldname to newname, replacing a file or empty directory
// at newname.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oparent, n, obase, err := m.lookupLocked("rename", oldname)
	if err != nil {
		return err
	}
	if n == nil || oparent == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	nparent, existing, nbase, err := m.lookupLocked("rename", newname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if nparent == nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrInvalid}
	}
	if existing == n {
		return nil
	}
	if existing != nil {
		switch {
		case existing.dir && !n.dir:
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errIsDir}
		case !existing.dir && n.dir:
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errNotDir}
		case existing.dir && len(existing.children) > 0:
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errNotEmpty}
		}
	}
	if n.dir && isAncestor(n, nparent) {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrInvalid}
	}
	delete(oparent.children, obase)
	nparent.children[nbase] = n
	return nil
}

// isAncestor reports whether d is dir or lies below dir.
func isAncestor(dir, d *memNode) bool {
	if dir == d {
		return true
	}
	for _, c := range dir.children {
		if c.dir && isAncestor(c, d) {
			return true
		}
	}
	return false
}

// MkdirAll creates a directory and any missing parents.
func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.root
	for _, p := range split(dir) {
		next, ok := cur.children[p]
		if !ok {
			next = newDirNode(perm)
			cur.children[p] = next
		} else if !next.dir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: errNotDir}
		}
		cur = next
	}
	return nil
}

// ReadDir lists a directory, sorted by name.
func (m *MemFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, _, err := m.lookupLocked("readdir", dir)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: errNotDir}
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]fs.DirEntry, len(names))
	for i, name := range names {
		out[i] = fs.FileInfoToDirEntry(n.children[name].info(name))
	}
	return out, nil
}

// Stat describes the named file.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, base, err := m.lookupLocked("stat", name)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return n.info(base), nil
}

// Chtimes sets the named file's modification time (MemFS keeps no access
// time). Like a real file system's metadata it survives a crash.
func (m *MemFS) Chtimes(name string, atime, mtime time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, _, err := m.lookupLocked("chtimes", name)
	if err != nil {
		return err
	}
	if n == nil {
		return &fs.PathError{Op: "chtimes", Path: name, Err: fs.ErrNotExist}
	}
	n.modTime = mtime
	return nil
}

// SyncDir makes the current entries of dir durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, n, _, err := m.lookupLocked("syncdir", dir)
	if err != nil {
		return err
	}
	if n == nil {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: fs.ErrNotExist}
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: errNotDir}
	}
	n.durable = make(map[string]*memNode, len(n.children))
	for name, c := range n.children {
		n.durable[name] = c
	}
	return nil
}

func (n *memNode) info(name string) fs.FileInfo {
	return memInfo{name: path.Base(filepath.ToSlash(name)), size: int64(len(n.data)), mode: n.mode, modTime: n.modTime}
}

// truncate sets the file's size, zero-filling when it grows.
func (n *memNode) truncate(size int) {
	if size < len(n.data) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-len(n.data))...)
	}
	n.dirtyFrom = min(n.dirtyFrom, size)
	n.modTime = time.Now()
}

// writeAt writes p at off, zero-filling any gap.
func (n *memNode) writeAt(p []byte, off int) {
	if end := off + len(p); end > len(n.data) {
		if end <= cap(n.data) {
			n.data = n.data[:end]
		} else {
			grown := make([]byte, end, max(end, 2*cap(n.data)))
			copy(grown, n.data)
			n.data = grown
		}
	}
	copy(n.data[off:], p)
	n.dirtyFrom = min(n.dirtyFrom, off)
	n.modTime = time.Now()
}

// sync makes the current contents durable, copying only what changed.
func (n *memNode) sync() {
	keep := min(n.dirtyFrom, len(n.synced), len(n.data))
	n.synced = append(n.synced[:keep], n.data[keep:]...)
	n.dirtyFrom = math.MaxInt
}

type memInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.modTime }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

// memFile is an open MemFS file.
type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	gen      uint64
	readable bool
	writable bool
	append   bool
	off      int64
	closed   bool
}

// checkLocked returns the error an operation on f must fail with, if any.
func (f *memFile) checkLocked(op string) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.gen != f.fs.gen:
		return &fs.PathError{Op: op, Path: f.name, Err: ErrCrashed}
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	n, err := f.readAtLocked("read", p, f.off)
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.readAtLocked("readat", p, off)
}

func (f *memFile) readAtLocked(op string, p []byte, off int64) (int, error) {
	if err := f.checkLocked(op); err != nil {
		return 0, err
	}
	if !f.readable {
		return 0, &fs.PathError{Op: op, Path: f.name, Err: fs.ErrPermission}
	}
	if f.node.dir {
		return 0, &fs.PathError{Op: op, Path: f.name, Err: errIsDir}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: op, Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.node.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkWriteLocked("write"); err != nil {
		return 0, err
	}
	if f.append {
		f.off = int64(len(f.node.data))
	}
	if f.off+int64(len(p)) > maxMemFileSize {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: errTooLarge}
	}
	f.node.writeAt(p, int(f.off))
	f.off += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkWriteLocked("writeat"); err != nil {
		return 0, err
	}
	if f.append {
		// As os.File: positional writes contradict O_APPEND.
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: fs.ErrInvalid}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: fs.ErrInvalid}
	}
	if off+int64(len(p)) > maxMemFileSize {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: errTooLarge}
	}
	f.node.writeAt(p, int(off))
	return len(p), nil
}

func (f *memFile) checkWriteLocked(op string) error {
	if err := f.checkLocked(op); err != nil {
		return err
	}
	if !f.writable {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrPermission}
	}
	return nil
}

func (f *memFile) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("seek"); err != nil {
		return 0, err
	}
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = f.off + offset
	case io.SeekEnd:
		abs = int64(len(f.node.data)) + offset
	default:
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	if abs < 0 {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	f.off = abs
	return abs, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("sync"); err != nil {
		return err
	}
	if !f.node.dir {
		f.node.sync()
	}
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkWriteLocked("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if size > maxMemFileSize {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: errTooLarge}
	}
	f.node.truncate(int(size))
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("stat"); err != nil {
		return nil, err
	}
	return f.node.info(f.name), nil
}

func (f *memFile) Name() string { return f.name }
