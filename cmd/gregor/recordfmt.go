package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A record format, as kcat's -f: literal text with %-fields. produce
// reads records in this form, consume writes them.
//
//	%k key       %v value      %h headers as k=v,k2=v2
//	%p partition %o offset     %t topic
//	%T timestamp in Unix milliseconds
//	%K key length  %S value length (output only)
//	%% a percent sign; \n \r \t \\ \0 escapes
const formatHelp = `format fields: %k key, %v value, %h headers (k=v,k2=v2), %p partition,
%o offset, %t topic, %T timestamp (Unix ms), %K key length, %S value length,
%% a percent sign; escapes \n \r \t \\ \0.`

// formatPart is a literal followed by a field ('k', 'v', ...), or a
// literal alone at the end (field 0).
type formatPart struct {
	lit   []byte
	field byte
}

// parseFormat splits a format into its parts, resolving escapes.
func parseFormat(f string) ([]formatPart, error) {
	var parts []formatPart
	var lit []byte
	for i := 0; i < len(f); i++ {
		ch := f[i]
		switch {
		case ch == '\\' && i+1 < len(f):
			i++
			e, ok := map[byte]byte{'n': '\n', 'r': '\r', 't': '\t', '\\': '\\', '0': 0}[f[i]]
			if !ok {
				return nil, usagef("format %q: unknown escape \\%c", f, f[i])
			}
			lit = append(lit, e)
		case ch == '%' && i+1 < len(f):
			i++
			if f[i] == '%' {
				lit = append(lit, '%')
				continue
			}
			if !strings.ContainsRune("kvhpotTKS", rune(f[i])) {
				return nil, usagef("format %q: unknown field %%%c (%s)", f, f[i], formatHelp)
			}
			parts = append(parts, formatPart{lit: lit, field: f[i]})
			lit = nil
		default:
			lit = append(lit, ch)
		}
	}
	if len(lit) > 0 {
		parts = append(parts, formatPart{lit: lit})
	}
	return parts, nil
}

// writeRecord appends r in the format to buf.
func writeRecord(buf []byte, parts []formatPart, r *kgo.Record) []byte {
	for _, p := range parts {
		buf = append(buf, p.lit...)
		switch p.field {
		case 'k':
			buf = append(buf, r.Key...)
		case 'v':
			buf = append(buf, r.Value...)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, h.Key...)
				buf = append(buf, '=')
				buf = append(buf, h.Value...)
			}
		case 'p':
			buf = strconv.AppendInt(buf, int64(r.Partition), 10)
		case 'o':
			buf = strconv.AppendInt(buf, r.Offset, 10)
		case 't':
			buf = append(buf, r.Topic...)
		case 'T':
			buf = strconv.AppendInt(buf, r.Timestamp.UnixMilli(), 10)
		case 'K':
			buf = strconv.AppendInt(buf, int64(len(r.Key)), 10)
		case 'S':
			buf = strconv.AppendInt(buf, int64(len(r.Value)), 10)
		}
	}
	return buf
}

// recordReader reads records in a format from a stream.
type recordReader struct {
	r     *bufio.Reader
	parts []formatPart
	line  int
}

// newRecordReader checks that the format can be read: every field but
// the last is followed by a literal that ends it, and the fields are ones
// a producer sets.
func newRecordReader(r io.Reader, parts []formatPart) (*recordReader, error) {
	if len(parts) == 0 {
		return nil, usagef("an input format needs a field")
	}
	for i, p := range parts {
		if p.field != 0 && !strings.ContainsRune("kvhpT", rune(p.field)) {
			return nil, usagef("%%%c cannot be read from input (only %%k %%v %%h %%p %%T)", p.field)
		}
		if i > 0 && len(p.lit) == 0 && p.field != 0 {
			return nil, usagef("input fields %%%c and %%%c need a delimiter between them", parts[i-1].field, p.field)
		}
	}
	// A format that ends with a field reads it to the end of the line.
	if parts[len(parts)-1].field != 0 {
		parts = append(parts, formatPart{lit: []byte("\n")})
	}
	return &recordReader{r: bufio.NewReaderSize(r, 1<<16), parts: parts}, nil
}

// next reads one record; io.EOF when the input ends between records.
func (rr *recordReader) next() (*kgo.Record, error) {
	rec := &kgo.Record{Partition: -1}
	rr.line++
	for i, p := range rr.parts {
		if i == 0 {
			if err := rr.expect(p.lit); err != nil {
				return nil, err
			}
		}
		if p.field == 0 {
			break
		}
		field, err := rr.readUntil(rr.parts[i+1].lit, i+1 == len(rr.parts)-1)
		if err != nil {
			return nil, err
		}
		if err := setField(rec, p.field, field); err != nil {
			return nil, fmt.Errorf("record %d: %w", rr.line, err)
		}
	}
	return rec, nil
}

// expect reads a leading literal; io.EOF if the input is at its end.
func (rr *recordReader) expect(lit []byte) error {
	if _, err := rr.r.Peek(1); err == io.EOF {
		return io.EOF
	}
	got := make([]byte, len(lit))
	if _, err := io.ReadFull(rr.r, got); err != nil || !bytes.Equal(got, lit) {
		return fmt.Errorf("record %d: does not start with %q", rr.line, lit)
	}
	return nil
}

// readUntil reads up to the delimiter and drops it. The last field of a
// record may also end at the end of the input (a last line without a
// newline).
func (rr *recordReader) readUntil(delim []byte, last bool) ([]byte, error) {
	var out []byte
	for {
		chunk, err := rr.r.ReadBytes(delim[len(delim)-1])
		out = append(out, chunk...)
		if bytes.HasSuffix(out, delim) {
			return out[:len(out)-len(delim)], nil
		}
		if err == io.EOF && last && len(out) > 0 {
			return out, nil
		}
		if err == io.EOF {
			return nil, fmt.Errorf("record %d: input ended before %q", rr.line, delim)
		}
		if err != nil {
			return nil, fmt.Errorf("read input: %w", err)
		}
	}
}

func setField(rec *kgo.Record, field byte, b []byte) error {
	switch field {
	case 'k':
		rec.Key = b
	case 'v':
		rec.Value = b
	case 'h':
		hs, err := parseHeaders(string(b))
		if err != nil {
			return err
		}
		rec.Headers = append(rec.Headers, hs...)
	case 'p':
		p, err := strconv.ParseInt(string(b), 10, 32)
		if err != nil || p < 0 {
			return fmt.Errorf("partition %q is not a partition number", b)
		}
		rec.Partition = int32(p)
	case 'T':
		ms, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return fmt.Errorf("timestamp %q is not Unix milliseconds", b)
		}
		rec.Timestamp = time.UnixMilli(ms)
	}
	return nil
}

// parseHeaders reads k=v,k2=v2 (an empty string is no header).
func parseHeaders(s string) ([]kgo.RecordHeader, error) {
	var out []kgo.RecordHeader
	if s == "" {
		return nil, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("header %q is not key=value", kv)
		}
		out = append(out, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return out, nil
}

// jsonRecord is a record as `consume --json` writes it and `produce
// --json` reads it, one object a line. Keys and values that are not UTF-8
// travel base64-encoded in key_base64 and value_base64 instead.
type jsonRecord struct {
	Topic       string       `json:"topic,omitempty"`
	Partition   *int32       `json:"partition,omitempty"`
	Offset      *int64       `json:"offset,omitempty"`
	Timestamp   *int64       `json:"timestamp,omitempty"` // Unix milliseconds
	Key         *string      `json:"key"`
	KeyBase64   *string      `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 *string      `json:"value_base64,omitempty"`
	Headers     []jsonHeader `json:"headers,omitempty"`
}

type jsonHeader struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func toJSONRecord(r *kgo.Record) jsonRecord {
	ts := r.Timestamp.UnixMilli()
	j := jsonRecord{Topic: r.Topic, Partition: &r.Partition, Offset: &r.Offset, Timestamp: &ts}
	j.Key, j.KeyBase64 = textOrBase64(r.Key)
	j.Value, j.ValueBase64 = textOrBase64(r.Value)
	for _, h := range r.Headers {
		j.Headers = append(j.Headers, jsonHeader{h.Key, string(h.Value)})
	}
	return j
}

func textOrBase64(b []byte) (text, b64 *string) {
	if b == nil {
		return nil, nil
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// fromJSONRecord makes a record to produce from one JSON line.
func fromJSONRecord(line []byte) (*kgo.Record, error) {
	var j jsonRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, err
	}
	rec := &kgo.Record{Partition: -1}
	var err error
	if rec.Key, err = bytesOf(j.Key, j.KeyBase64); err != nil {
		return nil, fmt.Errorf("key_base64: %w", err)
	}
	if rec.Value, err = bytesOf(j.Value, j.ValueBase64); err != nil {
		return nil, fmt.Errorf("value_base64: %w", err)
	}
	if j.Partition != nil {
		rec.Partition = *j.Partition
	}
	if j.Timestamp != nil {
		rec.Timestamp = time.UnixMilli(*j.Timestamp)
	}
	for _, h := range j.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	return rec, nil
}

func bytesOf(text, b64 *string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, errors.New("give the text or the base64 form, not both")
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		return base64.StdEncoding.DecodeString(*b64)
	}
	return nil, nil
}
