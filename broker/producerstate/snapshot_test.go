package producerstate

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// goldenState is the state behind goldenSnapshot.
func goldenState() *State {
	s := New()
	// Producer 1000: a plain idempotent batch, sequences 0..9 at 100..109.
	s.Update(batch(1000, 3, 0, 10), 100, 109, 1700000000000)
	// Producer 7: a transaction open since offset 5, sequences 0..1.
	s.Update(txnBatch(7, 0, 0, 2), 5, 6, 42)
	// Producer 9: known only from a marker, so it has no batch.
	s.ApplyMarker(Marker{ProducerID: 9, ProducerEpoch: 2, CoordinatorEpoch: 4}, 8, 77)
	return s
}

// goldenSnapshot is written field by field from Kafka's
// PID_SNAPSHOT_MAP_SCHEMA. The CRC-32C of the bytes after it was computed
// with a bitwise CRC-32C (polynomial 0x82F63B78), not this package's code.
var goldenSnapshot = strings.Join([]string{
	"0001",     // version int16
	"5b148047", // crc uint32
	"00000003", // entry count int32
	// producer 7
	"0000000000000007", // producer_id int64
	"0000",             // epoch int16
	"00000001",         // last_sequence int32
	"0000000000000006", // last_offset int64
	"00000001",         // offset_delta int32
	"000000000000002a", // timestamp int64 (42)
	"ffffffff",         // coordinator_epoch int32 (-1)
	"0000000000000005", // current_txn_first_offset int64
	// producer 9
	"0000000000000009",
	"0002",
	"ffffffff",         // no batch: last_sequence -1
	"ffffffffffffffff", // last_offset -1
	"00000000",         // offset_delta 0
	"000000000000004d", // 77
	"00000004",
	"ffffffffffffffff", // no transaction
	// producer 1000
	"00000000000003e8",
	"0003",
	"00000009",
	"000000000000006d", // 109
	"00000009",
	"0000018bcfe56800", // 1700000000000
	"ffffffff",
	"ffffffffffffffff",
}, "")

func TestSnapshotGolden(t *testing.T) {
	want, _ := hex.DecodeString(goldenSnapshot)
	got := goldenState().EncodeSnapshot()
	if !bytes.Equal(got, want) {
		t.Fatalf("snapshot\n got %x\nwant %x", got, want)
	}
	empty, _ := hex.DecodeString("0001" + "48674bc7" + "00000000")
	if got := New().EncodeSnapshot(); !bytes.Equal(got, empty) {
		t.Fatalf("empty snapshot %x, want %x", got, empty)
	}
}

func TestSnapshotDecode(t *testing.T) {
	data, _ := hex.DecodeString(goldenSnapshot)
	s, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []ProducerInfo{
		{ProducerID: 7, Epoch: 0, LastSequence: 1, LastTimestamp: 42, CoordinatorEpoch: -1, CurrentTxnStartOffset: 5},
		{ProducerID: 9, Epoch: 2, LastSequence: -1, LastTimestamp: 77, CoordinatorEpoch: 4, CurrentTxnStartOffset: -1},
		{ProducerID: 1000, Epoch: 3, LastSequence: 9, LastTimestamp: 1700000000000, CoordinatorEpoch: -1, CurrentTxnStartOffset: -1},
	}
	if got := s.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
	if got := s.Batches(9); len(got) != 0 {
		t.Fatalf("producer 9 has batches %+v", got)
	}
	if off, ok := s.LastStableOffsetFirst(); !ok || off != 5 {
		t.Fatalf("first undecided %d %v, want 5", off, ok)
	}
	// After a restart, a retry of the last batch is still a duplicate.
	dup, err := s.Check(batch(1000, 3, 0, 10))
	if err != nil || dup == nil || *dup != (Duplicate{FirstOffset: 100, LastOffset: 109, Timestamp: 1700000000000}) {
		t.Fatalf("retry after restart: %+v %v", dup, err)
	}
	// Producer 9 has an epoch but no batch: it must start at sequence 0.
	if _, err := s.Check(batch(9, 2, 4, 1)); code(err) != 45 {
		t.Fatalf("producer 9 at sequence 4: %v", err)
	}
	if !bytes.Equal(s.EncodeSnapshot(), data) {
		t.Fatal("re-encoding changed the bytes")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	l := newLog()
	for i := int32(0); i < 40; i++ {
		id := int64(i % 7)
		b := batch(id, int16(id), i/7*3, 3)
		b.IsTransactional = id == 3
		l.mustAppend(t, b)
	}
	l.s.ApplyMarker(Marker{ProducerID: 5, ProducerEpoch: 5, CoordinatorEpoch: 11}, l.next, 99)
	data := l.s.EncodeSnapshot()
	s, err := DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Producers(), l.s.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip %+v\nwant %+v", got, want)
	}
	if !bytes.Equal(s.EncodeSnapshot(), data) {
		t.Fatal("encode(decode(x)) != x")
	}
}

func TestSnapshotCorrupt(t *testing.T) {
	good, _ := hex.DecodeString(goldenSnapshot)
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	// withCRC fixes the CRC so that only the structure is wrong.
	withCRC := func(b []byte) []byte {
		b = bytes.Clone(b)
		crc := castagnoliSum(b[6:])
		b[2], b[3], b[4], b[5] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
		return b
	}
	count := func(n uint32) []byte {
		b := bytes.Clone(good)
		b[6], b[7], b[8], b[9] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		return withCRC(b)
	}
	dupEntry := withCRC(append(count(4), good[10:10+snapshotEntrySize]...))
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short header", good[:9]},
		{"version 0", withCRC(append([]byte{0, 0}, good[2:]...))},
		{"version 2", withCRC(append([]byte{0, 2}, good[2:]...))},
		{"bit flip in crc", flip(3)},
		{"bit flip in count", flip(8)},
		{"bit flip in an entry", flip(40)},
		{"bit flip in the last byte", flip(len(good) - 1)},
		{"truncated entry", withCRC(good[:len(good)-1])},
		{"trailing byte", withCRC(append(bytes.Clone(good), 0))},
		{"count too high", count(4)},
		{"count too low", count(2)},
		{"negative count", count(0xffffffff)},
		{"huge count", count(0x7fffffff)},
		{"producer twice", dupEntry},
	}
	for _, tt := range tests {
		s, err := DecodeSnapshot(tt.data)
		if err == nil || !errors.Is(err, ErrCorruptSnapshot) || s != nil {
			t.Errorf("%s: state %v, err %v; want ErrCorruptSnapshot", tt.name, s, err)
		}
	}
}

func castagnoliSum(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func TestSnapshotFileName(t *testing.T) {
	tests := []struct {
		offset int64
		name   string
	}{
		{0, "00000000000000000000.snapshot"},
		{1234, "00000000000000001234.snapshot"},
		{9223372036854775807, "09223372036854775807.snapshot"},
	}
	for _, tt := range tests {
		if got := SnapshotFileName(tt.offset); got != tt.name {
			t.Errorf("SnapshotFileName(%d) = %q, want %q", tt.offset, got, tt.name)
		}
		if got, err := ParseSnapshotFileName(tt.name); err != nil || got != tt.offset {
			t.Errorf("ParseSnapshotFileName(%q) = %d, %v", tt.name, got, err)
		}
	}
	for _, bad := range []string{
		"", ".snapshot", "1234.snapshot", "00000000000000001234.log",
		"00000000000000001234.snapshot.deleted", "0000000000000000123x.snapshot",
		"-0000000000000000001.snapshot", "+0000000000000000001.snapshot",
		"99999999999999999999.snapshot", "000000000000000000001.snapshot",
	} {
		if off, err := ParseSnapshotFileName(bad); err == nil {
			t.Errorf("ParseSnapshotFileName(%q) = %d, want an error", bad, off)
		}
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	good, _ := hex.DecodeString(goldenSnapshot)
	f.Add(good)
	f.Add(New().EncodeSnapshot())
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		// Random bytes rarely carry a valid CRC: try them again with the
		// CRC fixed, to reach the structure checks.
		if len(data) >= 6 {
			fixed := bytes.Clone(data)
			crc := castagnoliSum(fixed[6:])
			fixed[2], fixed[3], fixed[4], fixed[5] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
			checkDecode(t, fixed)
		}
	})
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	s, err := DecodeSnapshot(data)
	if err != nil {
		if s != nil {
			t.Fatal("state with an error")
		}
		return
	}
	// Whatever decodes re-encodes to something that decodes to the
	// same state.
	again, err := DecodeSnapshot(s.EncodeSnapshot())
	if err != nil {
		t.Fatalf("re-encoded snapshot does not decode: %v", err)
	}
	if !reflect.DeepEqual(again.Producers(), s.Producers()) {
		t.Fatalf("re-decoded %+v, want %+v", again.Producers(), s.Producers())
	}
	for _, p := range s.Producers() {
		if !reflect.DeepEqual(again.Batches(p.ProducerID), s.Batches(p.ProducerID)) {
			t.Fatalf("producer %d batches differ", p.ProducerID)
		}
	}
}

// TestEncodeSnapshotBelow: a snapshot taken at a roll inside the append
// of a batch (the state already holds it) leaves that batch out: its
// producer's entry from before, or no entry for a new producer; batches
// below the offset stay.
func TestEncodeSnapshotBelow(t *testing.T) {
	s := New()
	s.Update(batch(1, 0, 0, 2), 0, 1, 10)
	s.Update(batch(2, 0, 0, 1), 2, 2, 20) // p2's first batch, at the roll offset
	decode := func(b []byte) *State {
		t.Helper()
		st, err := DecodeSnapshot(b)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := decode(s.EncodeSnapshotBelow(2))
	if _, ok := st.Producer(2); ok || st.Len() != 1 {
		t.Fatalf("below 2: %+v, want producer 1 only", st.Producers())
	}
	if !bytes.Equal(s.EncodeSnapshotBelow(3), s.EncodeSnapshot()) {
		t.Fatal("below 3 differs from the whole state, which lies below 3")
	}
	// p1's second batch, in a transaction, rolls at 3: the snapshot keeps
	// its first batch and no transaction.
	s.Update(txnBatch(1, 0, 2, 1), 3, 3, 30)
	st = decode(s.EncodeSnapshotBelow(3))
	bs := st.Batches(1)
	if p, _ := st.Producer(1); len(bs) != 1 || bs[0].LastOffset != 1 || bs[0].LastSeq != 1 || p.CurrentTxnStartOffset != -1 || p.LastTimestamp != 10 {
		t.Fatalf("below 3: producer 1 %+v batches %+v", p, bs)
	}
	if _, ok := st.LastStableOffsetFirst(); ok {
		t.Fatal("below 3: a transaction is open")
	}
	// The whole state has p1's transaction open from 3.
	txns, err := OngoingTransactions(s.EncodeSnapshot())
	if err != nil || len(txns) != 1 || txns[1] != 3 {
		t.Fatalf("ongoing transactions %v, %v; want producer 1 from 3", txns, err)
	}
	if txns, err := OngoingTransactions(s.EncodeSnapshotBelow(3)); err != nil || len(txns) != 0 {
		t.Fatalf("ongoing transactions below 3: %v, %v", txns, err)
	}
	if _, err := OngoingTransactions([]byte{0, 1}); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}
