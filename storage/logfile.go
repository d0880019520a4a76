package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// logFile is a segment's .log, opened on first use and closed again when
// it has been idle a while or too many are open (fdCache), so that idle
// partitions hold no file descriptor: 10,000 partitions would otherwise
// hold 10,000 descriptors (issue 17). It is a vfs.File, so the code that
// reads, writes, truncates and syncs a segment's .log does not know.
//
// Every operation holds mu for reading while it uses the file; the cache
// closes a file only with mu held for writing (TryLock: it never waits for
// an operation), so no read, write or sync is ever cut by a close. A
// FileSlice, whose bytes are sent after the read that found them
// returned, pins the file (pins) and keeps it open until Release.
//
// A file written since its last Sync is synced before the cache closes
// it: the data is then on disk before the descriptor goes, and a Sync
// through a later descriptor has nothing of it left to lose. A failed
// sync leaves the file open and is returned by the next Sync, so the
// log's flush sees it and goes sticky as it would have.
type logFile struct {
	fsys  vfs.FS
	cache *fdCache // nil: never closed before Close (a segment no log owns yet)

	mu      sync.RWMutex
	name    string   // current path; renames go through rename
	f       vfs.File // nil while closed
	final   bool     // Close was called: never opened again
	syncErr error    // a sync by the cache that failed, for the next Sync

	pins    atomic.Int32 // FileSlices holding the file open
	dirty   atomic.Bool  // written or truncated since the last sync
	lastUse atomic.Int64 // unix nanoseconds of the last operation
}

// newLogFile makes the handle of an existing file, without opening it.
func newLogFile(fsys vfs.FS, cache *fdCache, name string) *logFile {
	return &logFile{fsys: fsys, cache: cache, name: name}
}

// errLogFileOpen marks a failure to reopen a closed .log: the operation
// did not reach the file (an append that meets it wrote nothing to cut).
var errLogFileOpen = errors.New("reopen segment file")

// errLogFileClosed is what an operation on a closed-for-good .log returns,
// as *os.File's use after Close.
var errLogFileClosed = fs.ErrClosed

// get returns the open file with mu held for reading; the caller calls
// put. It opens the file if the cache closed it.
func (h *logFile) get() (vfs.File, error) {
	for {
		h.mu.RLock()
		if h.f != nil {
			return h.f, nil
		}
		final := h.final
		h.mu.RUnlock()
		if final {
			return nil, &fs.PathError{Op: "use", Path: h.Name(), Err: errLogFileClosed}
		}
		if err := h.open(); err != nil {
			return nil, err
		}
	}
}

func (h *logFile) put() {
	h.lastUse.Store(time.Now().UnixNano())
	h.mu.RUnlock()
}

// open opens the file if it is closed.
func (h *logFile) open() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil || h.final {
		return nil
	}
	f, err := h.fsys.OpenFile(h.name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", errLogFileOpen, err)
	}
	h.f = f
	h.lastUse.Store(time.Now().UnixNano())
	if h.cache != nil {
		h.cache.opened(h)
	}
	return nil
}

// tryCloseIdle closes the file if nothing uses or pins it, syncing it
// first if it was written since its last sync. It reports whether the
// file is closed now.
func (h *logFile) tryCloseIdle() bool {
	if !h.mu.TryLock() {
		return false
	}
	defer h.mu.Unlock()
	if h.f == nil {
		return true
	}
	if h.pins.Load() > 0 || h.final {
		return false
	}
	if h.dirty.Load() {
		h.dirty.Store(false)
		if err := h.f.Sync(); err != nil {
			h.dirty.Store(true)
			h.syncErr = err
			return false
		}
	}
	// Nothing was lost: the data was synced. A failed close of a synced
	// file has nothing more to report.
	h.f.Close()
	h.f = nil
	if h.cache != nil {
		h.cache.closed(h)
	}
	return true
}

// pinOS pins the file open for a FileSlice and returns the operating-system
// file behind it; nil (and no pin) if there is none.
func (h *logFile) pinOS() (*os.File, error) {
	f, err := h.get()
	if err != nil {
		return nil, err
	}
	defer h.put()
	osf := vfs.OSFile(f)
	if osf != nil {
		h.pins.Add(1)
	}
	return osf, nil
}

// unpin releases a pinOS.
func (h *logFile) unpin() { h.pins.Add(-1) }

// isOS reports whether the filesystem hands out operating-system files,
// which FileSlices need, without opening anything: only the default one
// does.
func (h *logFile) isOS() bool { return h.fsys == vfs.Default }

// rename moves the file, open or not, and follows it.
func (h *logFile) rename(to string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fsys.Rename(h.name, to); err != nil {
		return err
	}
	h.name = to
	return nil
}

// Name is the file's current path.
func (h *logFile) Name() string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.name
}

// ReadAt reads at off, opening the file if needed.
func (h *logFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := h.get()
	if err != nil {
		return 0, err
	}
	defer h.put()
	return f.ReadAt(p, off)
}

// WriteAt writes at off; the file is synced before the cache closes it.
func (h *logFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := h.get()
	if err != nil {
		return 0, err
	}
	defer h.put()
	h.dirty.Store(true)
	return f.WriteAt(p, off)
}

// Truncate cuts the file; the cut is synced before the cache closes it.
func (h *logFile) Truncate(size int64) error {
	f, err := h.get()
	if err != nil {
		return err
	}
	defer h.put()
	h.dirty.Store(true)
	return f.Truncate(size)
}

// Sync flushes the file. A closed file has nothing unsynced (the cache
// synced it before closing) unless that sync failed, which Sync returns.
func (h *logFile) Sync() error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.syncErr != nil {
		return h.syncErr
	}
	if h.f == nil {
		if h.final {
			return &fs.PathError{Op: "sync", Path: h.name, Err: errLogFileClosed}
		}
		return nil
	}
	wasDirty := h.dirty.Swap(false)
	if err := h.f.Sync(); err != nil {
		if wasDirty {
			h.dirty.Store(true)
		}
		return err
	}
	return nil
}

// Stat describes the file; a closed one is looked up by name rather than
// opened.
func (h *logFile) Stat() (fs.FileInfo, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.f != nil {
		return h.f.Stat()
	}
	if h.final {
		return nil, &fs.PathError{Op: "stat", Path: h.name, Err: errLogFileClosed}
	}
	return h.fsys.Stat(h.name)
}

// Close closes the file for good. The segment calls it once nothing reads
// or pins the file any more (segment.closeForGood, the last FileSlice's
// Release).
func (h *logFile) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.final {
		return nil
	}
	h.final = true
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	if h.cache != nil {
		h.cache.closed(h)
	}
	return err
}

// The stream methods of vfs.File: segment files are only read and
// written at explicit positions, so these are never used.
var errLogFileStream = errors.New("segment file: stream access not supported")

func (h *logFile) Read([]byte) (int, error)       { return 0, errLogFileStream }
func (h *logFile) Write([]byte) (int, error)      { return 0, errLogFileStream }
func (h *logFile) Seek(int64, int) (int64, error) { return 0, errLogFileStream }
func (h *logFile) idleSince() int64               { return h.lastUse.Load() }

// fdCache bounds the segment .log files a Manager holds open: a file idle
// for longer than idle is closed, and when more than max are open the
// least recently used beyond the bound are closed (Kafka keeps every
// segment open and asks for a large descriptor limit instead). Sweeps run
// from a timer while any file is open, and at once when an open goes over
// the bound; a busy file (an operation in flight, a FileSlice out) is
// left for the next sweep.
type fdCache struct {
	max  int
	idle time.Duration

	mu       sync.Mutex
	open     map[*logFile]struct{}
	timer    *time.Timer // the next sweep; nil while none is due
	stopped  bool
	sweeping atomic.Bool
}

// Defaults of the fdCache. The bound is half the descriptor limit, so that
// every partition a busy broker produces to keeps its file open: a
// produce to 10,000 partitions under a bound of 2,000 reopened a file for
// nearly every batch, and the cache synced each one it closed (a written
// file is synced before its descriptor goes), which was 28% of the
// broker's CPU (issue 17, session 9). The other half stays for sockets,
// index files and checkpoints. Idle files still close after a minute, so
// idle partitions hold none.
const (
	// maxOpenSegmentFilesCap bounds the default however high the limit.
	maxOpenSegmentFilesCap = 50_000
	defaultSegmentFileIdle = 60 * time.Second
	// minOpenSegmentFiles is the bound's floor however low the
	// descriptor limit: below it every produce to a few partitions would
	// reopen files.
	minOpenSegmentFiles = 16
	// unknownLimitOpenSegmentFiles is the bound where the descriptor
	// limit is not an rlimit.
	unknownLimitOpenSegmentFiles = 2000
)

// segmentFileBound is the bound on open segment files when the config sets
// none: half the process's descriptor limit (so that under a limit of
// 1,024, a container's or a systemd unit's, the segments leave the other
// half to the sockets, index files, checkpoints and metadata log instead
// of failing accepts and opens with EMFILE), at least 16 and at most
// 50,000; 2,000 when the limit is unknown.
func segmentFileBound(nofile uint64) int {
	if nofile == 0 {
		return unknownLimitOpenSegmentFiles
	}
	return int(max(min(nofile/2, maxOpenSegmentFilesCap), minOpenSegmentFiles))
}

func newFDCache(max int, idle time.Duration) *fdCache {
	if max <= 0 {
		max = segmentFileBound(openFileLimit())
	}
	if idle <= 0 {
		idle = defaultSegmentFileIdle
	}
	return &fdCache{max: max, idle: idle, open: map[*logFile]struct{}{}}
}

// opened records a file just opened; the caller holds h.mu.
func (c *fdCache) opened(h *logFile) {
	c.mu.Lock()
	c.open[h] = struct{}{}
	n := len(c.open)
	if c.timer == nil && !c.stopped {
		c.timer = time.AfterFunc(c.sweepEvery(), c.sweepFromTimer)
	}
	c.mu.Unlock()
	if n > c.max && c.sweeping.CompareAndSwap(false, true) {
		go func() {
			defer c.sweeping.Store(false)
			c.sweep(time.Now())
		}()
	}
}

// closed records a file just closed; the caller holds h.mu.
func (c *fdCache) closed(h *logFile) {
	c.mu.Lock()
	delete(c.open, h)
	c.mu.Unlock()
}

func (c *fdCache) sweepEvery() time.Duration { return max(c.idle/4, 10*time.Millisecond) }

// sweepFromTimer sweeps and arms the next sweep while files stay open.
func (c *fdCache) sweepFromTimer() {
	c.sweep(time.Now())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	if len(c.open) > 0 && !c.stopped {
		c.timer = time.AfterFunc(c.sweepEvery(), c.sweepFromTimer)
	}
}

// sweep closes the files idle since before now-idle, then the least
// recently used until at most max are open.
func (c *fdCache) sweep(now time.Time) {
	c.mu.Lock()
	files := make([]*logFile, 0, len(c.open))
	for h := range c.open {
		files = append(files, h)
	}
	c.mu.Unlock()
	sort.Slice(files, func(i, j int) bool { return files[i].idleSince() < files[j].idleSince() })
	excess := len(files) - c.max
	cutoff := now.Add(-c.idle).UnixNano()
	for _, h := range files {
		if excess <= 0 && h.idleSince() > cutoff {
			break
		}
		if h.tryCloseIdle() {
			excess--
		}
	}
}

// openCount is how many segment files are open.
func (c *fdCache) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// stop ends the sweeps, at Manager.Close.
func (c *fdCache) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}
