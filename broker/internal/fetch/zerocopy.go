package fetch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
)

// Zero-copy fetch: records go from the segment file to the socket with
// sendfile(2), never through a buffer in user space, where nothing in
// them needs changing, which for Fetch v4+ (magic 2 only, no
// down-conversion; read_committed lists aborted transactions beside the
// records and leaves them as they are) is always. A read finds the batches
// (storage.Log.ReadSlice) and pins their segment file; the connection's
// writer sends the response as pieces in order: encoded bytes, a file
// range, encoded bytes, ... and unpins the files.
//
// The response is encoded by kmsg like any other, twice, with an
// 8-byte placeholder as each such partition's records: all zero bytes the
// first time, all 0xff the second. The two encodings differ exactly at the
// placeholders, which finds them without decoding anything; each
// placeholder and its length prefix are then replaced by the real length
// and the file range. Go's own sendfile path (io.Copy from an *os.File to
// a *net.TCPConn) sends from the file's current offset, which all the
// readers of a segment share, so the writer calls sendfile with an
// explicit offset through the socket's RawConn instead, waiting in the
// poller when the socket is full.
//
// The bytes are read from the file when they are sent, so the writer
// holds back the frame's last byte until it has checked that no
// truncation changed the segments under the send (storage.FileSlice's
// Intact); if one did, it closes the connection instead of completing a
// frame that may mix two logs, and the client fetches again.

// ZeroCopyResponse is a Fetch response some of whose partitions' records
// are in segment files, sent by the connection's writer (Writer.Write).
type ZeroCopyResponse struct {
	*kmsg.FetchResponse
	Records []FileRecords
}

// FileRecords places a slice in the response: Topics[Topic].Partitions[Partition].
type FileRecords struct {
	Topic, Partition int
	Slice            *storage.FileSlice
}

// Release unpins the response's files, once sent or abandoned.
func (z *ZeroCopyResponse) Release() {
	for _, r := range z.Records {
		r.Slice.Release()
	}
}

// setRecords makes every file partition's records b.
func (z *ZeroCopyResponse) setRecords(b []byte) {
	for _, r := range z.Records {
		z.Topics[r.Topic].Partitions[r.Partition].RecordBatches = b
	}
}

// RecordBytes is the size of the records the response sends from files.
func (z *ZeroCopyResponse) RecordBytes() int64 {
	var n int64
	for _, r := range z.Records {
		n += r.Slice.Len()
	}
	return n
}

// ReleaseResponse releases what an unsent response holds.
func ReleaseResponse(resp kmsg.Response) {
	if z, ok := resp.(*ZeroCopyResponse); ok {
		z.Release()
	}
}

const placeholderLen = 8

var (
	placeholderLo = make([]byte, placeholderLen)
	placeholderHi = bytes.Repeat([]byte{0xff}, placeholderLen)
)

// sendfileBytes counts the record bytes sent with sendfile,
// sendfileCalls the sendfile system calls made (those that found the
// socket full too) and sendfileSlices the file slices sent, for tests.
var sendfileBytes, sendfileCalls, sendfileSlices atomic.Int64

// SendfileBytes is the number of record bytes sent with sendfile since the
// process started, for tests.
func SendfileBytes() int64 { return sendfileBytes.Load() }

// SendfileCalls is the number of sendfile system calls made since the
// process started, and SendfileSlices the number of file slices (one
// partition's records each) they sent, for tests: a slice that takes many
// calls waited on a full socket between them.
func SendfileCalls() (calls, slices int64) { return sendfileCalls.Load(), sendfileSlices.Load() }

// ErrRecordsChanged ends a connection whose response read segment bytes
// that a truncation may have changed during the send.
var ErrRecordsChanged = errors.New("fetch: a truncation changed the log while its records were sent")

// Writer writes ZeroCopyResponse responses for one connection's
// writer goroutine; its buffers are reused from response to response.
// Create it with NewWriter.
type Writer struct {
	raw      syscall.RawConn // the socket's; nil when sendfile cannot be used
	lo, hi   []byte          // the two encodings
	prefixes []byte          // the real length prefixes
	pieces   []framePiece
	copyBuf  []byte // for sends that cannot use sendfile
}

// NewWriter is a Writer for the socket behind raw, which sends records with
// sendfile; with a nil raw it copies them through a buffer.
func NewWriter(raw syscall.RawConn) *Writer { return &Writer{raw: raw} }

// framePiece is encoded bytes, or a file slice when slice is set.
type framePiece struct {
	b     []byte
	slice *storage.FileSlice
}

func (p framePiece) len() int64 {
	if p.slice != nil {
		return p.slice.Len()
	}
	return int64(len(p.b))
}

// Write sends one response. The caller releases z afterwards; an error
// means the connection must close (the frame may be incomplete).
func (zw *Writer) Write(w *bufio.Writer, corr int32, z *ZeroCopyResponse) error {
	z.setRecords(placeholderLo)
	zw.lo = protocol.AppendResponse(zw.lo[:0], corr, z.FetchResponse)
	z.setRecords(placeholderHi)
	zw.hi = protocol.AppendResponse(zw.hi[:0], corr, z.FetchResponse)
	z.setRecords(nil)
	if !zw.split(z) {
		// Not expected: the encodings did not differ as placeholders do.
		return zw.writeCopied(w, corr, z)
	}
	if zw.raw == nil {
		return zw.writePieces(w, z)
	}
	// The response goes out corked, so that it leaves in full segments
	// (cork): a 16-partition response is otherwise 16 short segments
	// more, each a trip through the TCP stack and a wake-up of the
	// client. The frame's end is flushed before the cork is cleared.
	if err := cork(zw.raw, true); err != nil {
		return fmt.Errorf("fetch: set TCP_CORK: %w", err)
	}
	err := zw.writePieces(w, z)
	if err == nil {
		err = w.Flush()
	}
	if cerr := cork(zw.raw, false); err == nil && cerr != nil {
		err = fmt.Errorf("fetch: clear TCP_CORK: %w", cerr)
	}
	return err
}

// writePieces sends the pieces split found, holding back the frame's
// last byte until the files are known intact, then writing it to w.
func (zw *Writer) writePieces(w *bufio.Writer, z *ZeroCopyResponse) error {
	pieces := zw.pieces
	last := len(pieces) - 1
	for _, p := range pieces[:last] {
		if err := zw.writePiece(w, p, p.len()); err != nil {
			return err
		}
	}
	// Everything but the frame's last byte, then the check, then it.
	lp := pieces[last]
	n := lp.len() - 1
	if err := zw.writePiece(w, lp, n); err != nil {
		return err
	}
	var final [1]byte
	if lp.slice == nil {
		final[0] = lp.b[n]
	} else if _, err := lp.slice.ReadAt(final[:], n); err != nil {
		return fmt.Errorf("fetch: read records: %w", err)
	}
	for _, r := range z.Records {
		if !r.Slice.Intact() {
			return ErrRecordsChanged
		}
	}
	_, err := w.Write(final[:])
	return err
}

// split cuts the encoding at the placeholders into zw.pieces, with the
// real length prefixes and the frame size. It reports false if the
// encodings do not show exactly one placeholder per file partition.
func (zw *Writer) split(z *ZeroCopyResponse) bool {
	lo, hi := zw.lo, zw.hi
	if len(lo) != len(hi) || len(lo) < 4 {
		return false
	}
	flexible := z.IsFlexible()
	// kmsg writes records as nullable bytes: an int32 length, or in
	// flexible versions a uvarint of the length plus one.
	oldPrefix := []byte{0, 0, 0, placeholderLen}
	if flexible {
		oldPrefix = []byte{placeholderLen + 1}
	}
	zw.pieces = zw.pieces[:0]
	// Filled before any piece points into it, so never reallocated.
	zw.prefixes = prefixBuf(zw.prefixes, len(z.Records))
	frame := int64(len(lo) - 4)
	prev, k := 0, 0
	for i := 0; i < len(lo); {
		if lo[i] == hi[i] {
			i++
			continue
		}
		start := i - len(oldPrefix)
		if k == len(z.Records) || start < prev || i+placeholderLen > len(lo) ||
			!bytes.Equal(lo[start:i], oldPrefix) ||
			!bytes.Equal(lo[i:i+placeholderLen], placeholderLo) || !bytes.Equal(hi[i:i+placeholderLen], placeholderHi) {
			return false
		}
		s := z.Records[k].Slice
		p0 := len(zw.prefixes)
		if flexible {
			zw.prefixes = binary.AppendUvarint(zw.prefixes, uint64(s.Len())+1)
		} else {
			zw.prefixes = binary.BigEndian.AppendUint32(zw.prefixes, uint32(s.Len()))
		}
		zw.addBytes(lo[prev:start])
		zw.addBytes(zw.prefixes[p0:])
		zw.pieces = append(zw.pieces, framePiece{slice: s})
		frame += int64(len(zw.prefixes)-p0) + s.Len() - int64(len(oldPrefix)) - placeholderLen
		i += placeholderLen
		prev, k = i, k+1
	}
	if k != len(z.Records) || frame > math.MaxInt32 {
		return false
	}
	zw.addBytes(lo[prev:])
	binary.BigEndian.PutUint32(lo, uint32(frame))
	return true
}

// prefixBuf returns b emptied, with room for n length prefixes of up to
// 5 bytes each.
func prefixBuf(b []byte, n int) []byte {
	if cap(b) < 5*n {
		return make([]byte, 0, 5*n)
	}
	return b[:0]
}

func (zw *Writer) addBytes(b []byte) {
	if len(b) > 0 {
		zw.pieces = append(zw.pieces, framePiece{b: b})
	}
}

// writePiece writes the first n bytes of p.
func (zw *Writer) writePiece(w *bufio.Writer, p framePiece, n int64) error {
	if p.slice == nil {
		_, err := w.Write(p.b[:n])
		return err
	}
	if n == 0 {
		return nil
	}
	if zw.raw == nil {
		return zw.copySlice(w, p.slice, n)
	}
	// What is buffered goes first: sendfile writes to the socket itself.
	if err := w.Flush(); err != nil {
		return err
	}
	f, pos := p.slice.File()
	sent, calls, err := sendfile(zw.raw, f, pos, n)
	sendfileBytes.Add(sent)
	sendfileCalls.Add(calls)
	sendfileSlices.Add(1)
	if err != nil {
		return fmt.Errorf("fetch: sendfile %s: %w", f.Name(), err)
	}
	if sent < n {
		// The file is shorter than when it was read: truncated.
		return fmt.Errorf("fetch: sendfile %s: %d of %d bytes: %w", f.Name(), sent, n, ErrRecordsChanged)
	}
	return nil
}

// copySlice writes the first n bytes of s through a buffer.
func (zw *Writer) copySlice(w *bufio.Writer, s *storage.FileSlice, n int64) error {
	if zw.copyBuf == nil {
		zw.copyBuf = make([]byte, 64<<10)
	}
	for off := int64(0); off < n; {
		b := zw.copyBuf[:min(int64(len(zw.copyBuf)), n-off)]
		if _, err := s.ReadAt(b, off); err != nil {
			return fmt.Errorf("fetch: read records: %w", err)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}

// writeCopied sends z with its records read into memory, as the copying
// path does.
func (zw *Writer) writeCopied(w *bufio.Writer, corr int32, z *ZeroCopyResponse) error {
	for _, r := range z.Records {
		b := make([]byte, r.Slice.Len())
		if _, err := r.Slice.ReadAt(b, 0); err != nil {
			return fmt.Errorf("fetch: read records: %w", err)
		}
		z.Topics[r.Topic].Partitions[r.Partition].RecordBatches = b
	}
	for _, r := range z.Records {
		if !r.Slice.Intact() {
			return ErrRecordsChanged
		}
	}
	zw.lo = protocol.AppendResponse(zw.lo[:0], corr, z.FetchResponse)
	z.setRecords(nil)
	_, err := w.Write(zw.lo)
	return err
}
