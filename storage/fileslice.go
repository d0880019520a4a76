package storage

import (
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gregorbroker/gregor/protocol"
)

// FileSlice is a run of whole batches in a segment's .log, found by
// ReadSlice, for a caller that sends them to a socket straight from the
// file (sendfile) instead of through a buffer. The segment's .log stays
// open until Release, even if the segment is deleted meanwhile: a deleted
// segment's bytes never change, and the file is closed by the last
// Release.
//
// The bytes are read when they are sent, after ReadSlice returned. Only a
// truncation changes a segment's bytes in place (a follower cutting its
// log, after which new appends may reuse the positions), so a sender
// checks Intact after its last read of the slice and before it completes
// the frame that carries it; a false Intact means the bytes sent may mix
// the log before and after a truncation, and the frame must not be
// completed (Kafka's FileRecords.writeTo fails the same way when it finds
// its file truncated).
type FileSlice struct {
	l          *Log
	seg        *segment
	file       *os.File
	pos        int64 // of the first batch in the file
	size       int64
	lastOffset int64
	gen        int64 // the log's truncation count when the read began
	released   atomic.Bool
}

// Len is the number of bytes in the slice: whole batches, at least one.
func (f *FileSlice) Len() int64 { return f.size }

// LastOffset is the last offset of the slice's last batch.
func (f *FileSlice) LastOffset() int64 { return f.lastOffset }

// File returns the segment's .log and the position of the slice's first
// byte in it. The caller must read it with positional reads or sendfile
// with an explicit offset (other senders share the file offset), only
// within [pos, pos+Len), and not after Release.
func (f *FileSlice) File() (*os.File, int64) { return f.file, f.pos }

// ReadAt reads the slice's bytes from off, relative to its start, for a
// sender that cannot use sendfile.
func (f *FileSlice) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= f.size {
		return 0, io.EOF
	}
	want := len(p)
	if rest := f.size - off; int64(want) > rest {
		p = p[:rest]
	}
	n, err := f.seg.log.ReadAt(p, f.pos+off)
	if err == nil && n < want {
		err = io.EOF
	}
	return n, err
}

// Intact reports whether the bytes of the slice read so far are the ones
// ReadSlice found: no truncation of the log has completed, and none is in
// progress, since the read began (a truncation cuts the file before it
// counts itself, and a read of a cut range comes back short), and the log
// was not closed (another Log could then open the files and cut them).
func (f *FileSlice) Intact() bool {
	return !f.l.closed.Load() && f.l.truncations.Load() == f.gen
}

// Release unpins the segment's file. It may be called more than once;
// calls after the first do nothing.
func (f *FileSlice) Release() {
	if f.released.CompareAndSwap(false, true) {
		f.seg.log.unpin()
		f.seg.unpinSend()
	}
}

// readRange finds the batches segment.read would return, without reading
// them: their position and size in the .log and the last offset of the
// last one. found is false when offset lies past this segment's batches;
// size is 0 when it found none to return. The offset index takes the
// search close to the end of the range, so only a few batch headers are
// read, not the records.
//
// gen is the log's truncation count when the read began: the header of
// the batch just past the range, which the next fetch of the partition
// usually starts at, is kept as the segment's hint for reads of the same
// count, so that such a fetch reads no header to find its first batch (a
// truncation moves the count on, and a read during one starts again).
func (s *segment) readRange(offset int64, maxBytes int32, limit int64, minOne bool, gen int64, cfg *LogConfig, logger *slog.Logger) (pos, size, lastOffset int64, found bool, err error) {
	first, ok, err := s.firstBatch(offset, gen, cfg, logger)
	if err != nil || !ok {
		return 0, 0, 0, false, err
	}
	if first.baseOffset >= limit {
		return 0, 0, 0, true, nil
	}
	budget := int64(max(maxBytes, 0))
	if first.size > budget {
		if !minOne {
			return 0, 0, 0, true, nil
		}
		return first.pos, first.size, first.lastOffset, true, nil
	}
	// The size before the index: entries are added after the bytes they
	// point at are published.
	end := min(first.pos+budget, s.size.Load())
	from := first.pos + first.size
	// The last indexed batch that starts at or before end with every
	// batch before it below limit: all the batches from first to it are
	// returned, so the scan can start there.
	skip, prev := int64(-1), from
	prevLast := int64(-1) // the last offset of the indexed batch at prev, when there is one
	s.mu.RLock()
	j := sort.Search(len(s.offIdx), func(i int) bool {
		e := s.offIdx[i]
		return int64(e.pos) > end || s.base+int64(e.rel) >= limit
	})
	if j > 0 && int64(s.offIdx[j-1].pos) > from {
		skip = int64(s.offIdx[j-1].pos)
		if j > 1 && int64(s.offIdx[j-2].pos) >= from {
			prev, prevLast = int64(s.offIdx[j-2].pos), s.base+int64(s.offIdx[j-2].rel)
		}
	}
	s.mu.RUnlock()

	hr := newHeaderReader(s.log)
	defer hr.release()
	if skip < 0 {
		stop, last := hr.scan(from, end, limit)
		s.keepHint(hr, gen)
		if stop == from {
			last = first.lastOffset
		}
		return first.pos, stop - first.pos, last, true, nil
	}
	stop, last := hr.scan(skip, end, limit)
	s.keepHint(hr, gen)
	if stop == skip && hr.hasNext && hr.next.pos == skip && prevLast == hr.next.baseOffset-1 {
		// The batch at prev ends just below the one at skip in offsets,
		// and every batch holds at least one: none lies between them, so
		// it is the last one returned.
		return first.pos, skip - first.pos, prevLast, true, nil
	}
	if stop == skip {
		// Nothing after skip fits: the last batch returned is the one
		// ending at skip, found from the entry before.
		var got int64
		if got, last = hr.scan(prev, skip, limit); got != skip {
			// The index points inside a batch: walk every header.
			if stop, last = hr.scan(from, end, limit); stop == from {
				last = first.lastOffset
			}
		}
	}
	return first.pos, stop - first.pos, last, true, nil
}

// firstBatch is translate, answered from the segment's hint when that is
// the batch holding offset, read at the same truncation count gen.
func (s *segment) firstBatch(offset, gen int64, cfg *LogConfig, logger *slog.Logger) (batchInfo, bool, error) {
	h := s.hint.Load()
	if h == nil || h.gen != gen || offset < h.b.baseOffset || offset > h.b.lastOffset || h.b.pos+h.b.size > s.size.Load() {
		return s.translate(offset, cfg, logger)
	}
	// The rest of readRange uses the indexes.
	if err := s.ensureLoaded(cfg, logger); err != nil {
		return batchInfo{}, false, err
	}
	return h.b, true, nil
}

// batchHint is the header of a batch readRange found just past its
// range, at the log's truncation count gen.
type batchHint struct {
	gen int64
	b   batchInfo
}

// keepHint makes the batch the scan stopped at, if it read one, the
// segment's hint.
func (s *segment) keepHint(hr *headerReader, gen int64) {
	if hr.hasNext {
		s.hint.Store(&batchHint{gen: gen, b: hr.next})
	}
}

// headerReader reads batch headers at chosen positions of a segment,
// through a small window, so that a run of small batches costs one read
// and a large batch costs the read of its header only.
type headerReader struct {
	r    io.ReaderAt
	buf  []byte
	bpos int64 // file position of buf[0]
	blen int   // valid bytes in buf
	// next is the whole batch the last scan stopped at, which lay past
	// its end or limit, when hasNext is set.
	next    batchInfo
	hasNext bool
}

const headerWindow = 4 << 10

var headerBufs = sync.Pool{New: func() any { b := make([]byte, headerWindow); return &b }}

func newHeaderReader(r io.ReaderAt) *headerReader {
	return &headerReader{r: r, buf: *headerBufs.Get().(*[]byte)}
}

func (h *headerReader) release() {
	b := h.buf
	h.buf = nil
	headerBufs.Put(&b)
}

// scan walks the batches from pos and returns where the last one that
// ends at or before end, with a base offset below limit, ends (pos when
// none does) and its last offset. A batch it cannot parse ends the walk
// as the end of the range does: the copying read stops there too.
func (h *headerReader) scan(pos, end, limit int64) (stop, lastOffset int64) {
	stop, lastOffset = pos, -1
	big := false // the last batch was larger than the window
	for pos+protocol.BatchHeaderSize <= end {
		if pos < h.bpos || pos+protocol.BatchHeaderSize > h.bpos+int64(h.blen) {
			n := int64(protocol.BatchHeaderSize)
			if !big {
				n = min(int64(len(h.buf)), end-pos)
			}
			if m, _ := h.r.ReadAt(h.buf[:n], pos); int64(m) < n {
				return stop, lastOffset
			}
			h.bpos, h.blen = pos, int(n)
		}
		off := pos - h.bpos
		b, err := decodeBatchPrefix(h.buf[off:off+protocol.BatchHeaderSize], pos)
		if err != nil {
			return stop, lastOffset
		}
		if b.baseOffset >= limit || pos+b.size > end {
			h.next, h.hasNext = b, true
			return stop, lastOffset
		}
		big = b.size > int64(len(h.buf))
		pos += b.size
		stop, lastOffset = pos, b.lastOffset
	}
	return stop, lastOffset
}
