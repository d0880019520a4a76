package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestNearest(t *testing.T) {
	names := []string{"topic", "produce", "consume", "offsets", "group", "groups", "cluster", "quorum", "config", "txn"}
	tests := map[string]string{
		"topc": "topic", "tpoic": "topic", "prodcue": "produce", "consum": "consume", "grop": "group",
		"clster": "cluster", "cofnig": "config", "tx": "txn", "q": "", "zzzzzz": "", "serve": "",
	}
	for in, want := range tests {
		if got := nearest(in, names); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRecordFormatRoundTrip: what writeRecord prints in a format, a
// recordReader reads back in the same format, escapes and a last line
// without its newline included.
func TestRecordFormatRoundTrip(t *testing.T) {
	parts, err := parseFormat(`%p|%k\t%h=>%v\n`)
	if err != nil {
		t.Fatal(err)
	}
	recs := []*kgo.Record{
		{Partition: 2, Key: []byte("a"), Value: []byte("x y"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "g", Value: []byte("")}}},
		{Partition: 0, Key: []byte(""), Value: []byte("|tab\t inside")},
	}
	var buf []byte
	for _, r := range recs {
		buf = writeRecord(buf, parts, r)
	}
	want := "2|a\th=1,g==>x y\n0|\t=>|tab\t inside\n"
	if string(buf) != want {
		t.Fatalf("wrote %q, want %q", buf, want)
	}
	rr, err := newRecordReader(bytes.NewReader(bytes.TrimSuffix(buf, []byte("\n"))), parts)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		got, err := rr.next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got.Partition != r.Partition || string(got.Key) != string(r.Key) || string(got.Value) != string(r.Value) || len(got.Headers) != len(r.Headers) {
			t.Errorf("record %d read as %+v, want %+v", i, got, r)
		}
	}
	if _, err := rr.next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last record: %v, want EOF", err)
	}
}

func TestRecordFormatErrors(t *testing.T) {
	for _, f := range []string{`%q`, `\x`} {
		if _, err := parseFormat(f); err == nil {
			t.Errorf("parseFormat(%q) accepted", f)
		}
	}
	for _, f := range []string{`%k%v`, `%o %v`, ``} {
		parts, _ := parseFormat(f)
		if _, err := newRecordReader(strings.NewReader(""), parts); err == nil {
			t.Errorf("input format %q accepted", f)
		}
	}
	parts, _ := parseFormat(`%k:%v\n`)
	rr, _ := newRecordReader(strings.NewReader("no delimiter\n"), parts)
	if _, err := rr.next(); err == nil || !strings.Contains(err.Error(), `input ended before ":"`) {
		t.Errorf("a line without the key delimiter: %v", err)
	}
	parts, _ = parseFormat(`%p %v\n`)
	rr, _ = newRecordReader(strings.NewReader("x v\n"), parts)
	if _, err := rr.next(); err == nil || !strings.Contains(err.Error(), "not a partition") {
		t.Errorf("a bad partition: %v", err)
	}
}

func TestParseTimeAndOffsets(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tests := map[string]time.Time{
		"1700000000000":        time.UnixMilli(1700000000000),
		"2026-12-01T10:00:00Z": time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		"2026-12-01 10:00:00":  time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		"2026-11-30":           time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"1h":                   now.Add(-time.Hour),
		"-90m":                 now.Add(-90 * time.Minute),
	}
	for in, want := range tests {
		got, err := parseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseTime("yesterday", now); err == nil {
		t.Error("parseTime accepted yesterday")
	}
	for in, want := range map[string]string{
		"start": kgo.NewOffset().AtStart().String(), "end": kgo.NewOffset().AtEnd().String(),
		"42": kgo.NewOffset().At(42).String(), "-5": kgo.NewOffset().AtEnd().Relative(-5).String(),
		"@1700000000000": kgo.NewOffset().AfterMilli(1700000000000).String(),
	} {
		got, err := parseStartOffset(in, now)
		if err != nil || got.String() != want {
			t.Errorf("parseStartOffset(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestResetTargetChoice(t *testing.T) {
	if _, err := chooseTarget(true, true, "", "", ""); err == nil {
		t.Error("two targets accepted")
	}
	if _, err := chooseTarget(false, false, "", "", ""); err == nil {
		t.Error("no target accepted")
	}
	if got, err := chooseTarget(false, false, "", "", "-3"); err != nil || got.kind != "shift" || got.n != -3 {
		t.Errorf("--shift-by -3: %+v %v", got, err)
	}
	if topic, ps, err := splitTopicArg("orders:2,0"); err != nil || topic != "orders" || len(ps) != 2 || ps[0] != 0 {
		t.Errorf("orders:2,0 = %s %v %v", topic, ps, err)
	}
}

func TestWriteRecordFields(t *testing.T) {
	parts, err := parseFormat(`%t/%p@%o %T k%K=%k v%S=%v 100%%\0`)
	if err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "t", Partition: 3, Offset: 42, Timestamp: time.UnixMilli(1700000000123), Key: []byte("ab"), Value: []byte("xyz")}
	if got, want := string(writeRecord(nil, parts, r)), "t/3@42 1700000000123 k2=ab v3=xyz 100%\x00"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}

// TestScanBatches: what consume -e counts as still to read past a quiet
// point: data batches, but not transaction markers nor (read committed)
// batches of an aborted transaction, until that producer's marker.
func TestScanBatches(t *testing.T) {
	batch := func(first int64, last int32, pid int64, control bool) []byte {
		b := kmsg.RecordBatch{FirstOffset: first, LastOffsetDelta: last, ProducerID: pid, Magic: 2, NumRecords: last + 1}
		if control {
			b.Attributes = 0x20
		}
		raw := b.AppendTo(nil)
		// Length counts the bytes after itself (offset and length).
		binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
		return raw
	}
	aborted := []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 0}}
	abortedThenMarker := append(batch(0, 1, 7, false), batch(2, 0, 7, true)...)
	tests := []struct {
		name          string
		data          []byte
		from          int64
		readCommitted bool
		next          int64
		visible       bool
	}{
		{"aborted batch and its marker, read committed", abortedThenMarker, 0, true, 3, false},
		{"the same, read uncommitted", abortedThenMarker, 0, false, 2, true},
		{"a later batch of the same producer", append(abortedThenMarker, batch(3, 0, 7, false)...), 0, true, 4, true},
		{"only the marker past the start", abortedThenMarker, 2, false, 3, false},
		{"a truncated batch is left for the next fetch", batch(0, 0, 1, false)[:20], 0, false, 0, false},
	}
	for _, tt := range tests {
		part := &kmsg.FetchResponseTopicPartition{RecordBatches: tt.data, AbortedTransactions: aborted}
		next, visible := scanBatches(part, tt.from, tt.readCommitted)
		if next != tt.next || visible != tt.visible {
			t.Errorf("%s: next %d visible %v, want %d %v", tt.name, next, visible, tt.next, tt.visible)
		}
	}
}
