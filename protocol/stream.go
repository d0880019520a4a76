package protocol

import (
	"errors"
	"fmt"
	"io"
)

// streamWindow is the buffer through which the records of a compressed
// batch pass while they are validated. A record that fits is parsed in
// place; a larger one is read field by field with its key, value and
// header bytes skipped. Validation thus holds this much of the records at
// a time, whatever they decompress to, as Kafka's LogValidator does with
// its skip-key-value iterator.
const streamWindow = 64 << 10

// minStreamWindow is the smallest window that holds any varint whole.
const minStreamWindow = 10

// errRecordsTruncated is the record stream ending inside a record.
var errRecordsTruncated = errors.New("records run past the end of the batch")

// notNull stands for the key or value of a record read by the streaming
// path, which skips its bytes: it is only ever compared with nil.
var notNull = []byte{}

// recordStream reads the records section of a batch from a decompressing
// reader through a fixed window. Errors from the reader are kept in srcErr
// so callers can tell a codec failure (CORRUPT_MESSAGE) from malformed
// records (INVALID_RECORD).
type recordStream struct {
	src    io.Reader
	buf    []byte // the window; unread bytes are buf[r:w]
	r, w   int
	eof    bool
	read   int // bytes read from src so far
	limit  int // read past this fails with ErrUncompressedTooLarge
	srcErr error
}

// fill reads until at least need bytes (at most the window) are unread
// or the source ends. It returns the source's error, which also stays in
// srcErr.
func (s *recordStream) fill(need int) error {
	need = min(need, len(s.buf))
	if s.w-s.r >= need || s.eof {
		return s.srcErr
	}
	if len(s.buf)-s.r < need {
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	}
	stalls := 0
	for s.w-s.r < need {
		n, err := s.src.Read(s.buf[s.w:])
		s.w += n
		s.read += n
		switch {
		case s.read > s.limit:
			s.srcErr = ErrUncompressedTooLarge
		case err == io.EOF:
			s.eof = true
			return nil
		case errors.Is(err, ErrUncompressedTooLarge):
			s.srcErr = err
		case err != nil:
			s.srcErr = fmt.Errorf("%w: %w", ErrCorrupt, err)
		case n == 0:
			// A reader that makes no progress would otherwise spin forever.
			if stalls++; stalls > 100 {
				s.srcErr = fmt.Errorf("%w: %w", ErrCorrupt, io.ErrNoProgress)
			}
		default:
			stalls = 0
		}
		if s.srcErr != nil {
			s.eof = true
			return s.srcErr
		}
	}
	return nil
}

// atEnd reports whether nothing is left to read: what follows the last
// record must be the end of the stream, and reading to it is also what
// lets a codec check its own trailing checksum.
func (s *recordStream) atEnd() (bool, error) {
	if err := s.fill(1); err != nil {
		return false, err
	}
	return s.w == s.r, nil
}

// next parses the next record into v. A record that fits the window is
// parsed in place by parseRecord, so its key and value alias the window
// until the next call; a larger one is skipped through (skipRecord).
func (s *recordStream) next(v *recordView) error {
	if err := s.fill(binaryMaxVarint32); err != nil {
		return err
	}
	if s.w == s.r {
		return errRecordsTruncated
	}
	length, p, err := readZigzag32(s.buf[s.r:s.w], 0)
	if err != nil {
		return fmt.Errorf("length: %w", err)
	}
	if length < 0 {
		return fmt.Errorf("negative length %d", length)
	}
	if total := p + int(length); total <= len(s.buf) {
		if err := s.fill(total); err != nil {
			return err
		}
		end, err := parseRecord(s.buf[s.r:s.w], 0, v)
		if err != nil {
			return err
		}
		s.r += end
		return nil
	}
	s.r += p
	b := recordBody{s: s, left: int(length)}
	return b.parse(v)
}

// binaryMaxVarint32 is the most bytes a varint of an int32 takes.
const binaryMaxVarint32 = 5

// recordBody reads the fields of one record too large for the window,
// never past the record's stated length, applying the checks of
// parseRecord and skipping the bytes of keys, values and headers.
type recordBody struct {
	s    *recordStream
	left int // bytes of the record not yet read
}

func (b *recordBody) parse(v *recordView) error {
	var err error
	attr, err := b.readByte()
	if err != nil {
		return fmt.Errorf("attributes: %w", err)
	}
	v.attributes = int8(attr)
	if v.timestampDelta, err = b.varint64(); err != nil {
		return fmt.Errorf("timestamp delta: %w", err)
	}
	if v.offsetDelta, err = b.varint32(); err != nil {
		return fmt.Errorf("offset delta: %w", err)
	}
	if v.key, err = b.skipNullable(); err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if v.value, err = b.skipNullable(); err != nil {
		return fmt.Errorf("value: %w", err)
	}
	if v.numHeaders, err = b.varint32(); err != nil {
		return fmt.Errorf("header count: %w", err)
	}
	if v.numHeaders < 0 {
		return fmt.Errorf("negative header count %d", v.numHeaders)
	}
	v.headers = nil
	// Each header takes at least two bytes, so this loop is bounded by the
	// record's length whatever the count claims.
	for i := range v.numHeaders {
		klen, err := b.varint32()
		if err != nil {
			return fmt.Errorf("header %d key length: %w", i, err)
		}
		if klen < 0 {
			return fmt.Errorf("header %d: null or negative key length %d", i, klen)
		}
		if err := b.skip(int(klen)); err != nil {
			return fmt.Errorf("header %d key: %w", i, err)
		}
		if _, err := b.skipNullable(); err != nil {
			return fmt.Errorf("header %d value: %w", i, err)
		}
	}
	if b.left != 0 {
		return fmt.Errorf("%d bytes after the fields, inside the record's length", b.left)
	}
	return nil
}

// window is the unread part of the window that belongs to the record,
// after making up to want bytes of it available.
func (b *recordBody) window(want int) ([]byte, error) {
	s := b.s
	if err := s.fill(min(want, b.left)); err != nil {
		return nil, err
	}
	return s.buf[s.r:min(s.w, s.r+b.left)], nil
}

func (b *recordBody) readByte() (byte, error) {
	w, err := b.window(1)
	if err != nil {
		return 0, err
	}
	if len(w) == 0 {
		return 0, b.runOut()
	}
	b.consume(1)
	return w[0], nil
}

func (b *recordBody) varint32() (int32, error) {
	w, err := b.window(binaryMaxVarint32)
	if err != nil {
		return 0, err
	}
	x, p, err := readZigzag32(w, 0)
	if err != nil {
		return 0, err
	}
	b.consume(p)
	return x, nil
}

func (b *recordBody) varint64() (int64, error) {
	w, err := b.window(10)
	if err != nil {
		return 0, err
	}
	x, p, err := readZigzag64(w, 0)
	if err != nil {
		return 0, err
	}
	b.consume(p)
	return x, nil
}

// skipNullable reads a varint length and skips that many bytes; -1 is
// null and returns nil, anything else notNull.
func (b *recordBody) skipNullable() ([]byte, error) {
	n, err := b.varint32()
	if err != nil {
		return nil, err
	}
	switch {
	case n == -1:
		return nil, nil
	case n < 0:
		return nil, fmt.Errorf("negative length %d", n)
	}
	if err := b.skip(int(n)); err != nil {
		return nil, err
	}
	return notNull, nil
}

// skip passes over n bytes of the record through the window.
func (b *recordBody) skip(n int) error {
	if n > b.left {
		return fmt.Errorf("length %d runs past the record (%d bytes left)", n, b.left)
	}
	for n > 0 {
		w, err := b.window(min(n, len(b.s.buf)))
		if err != nil {
			return err
		}
		if len(w) == 0 {
			return b.runOut()
		}
		k := min(n, len(w))
		b.consume(k)
		n -= k
	}
	return nil
}

func (b *recordBody) consume(n int) {
	b.s.r += n
	b.left -= n
}

// runOut is the error for a stream that ended inside the record.
func (b *recordBody) runOut() error {
	return fmt.Errorf("length runs past the end (%d bytes of the record missing)", b.left)
}
