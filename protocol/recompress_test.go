package protocol

import (
	"errors"
	"reflect"
	"runtime"
	"testing"
)

// TestRecompressBatch re-encodes a batch from every encoding a producer
// may send to every codec and checks that the records, the header fields
// and the validation are those of the original.
func TestRecompressBatch(t *testing.T) {
	recs, raw := streamRecords()
	h := BatchHeader{PartitionLeaderEpoch: 3, Attributes: AttrTransactional, FirstTimestamp: 1000, MaxTimestamp: 2000,
		ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40}
	sources := map[string][]byte{}
	for name, enc := range encodings(t, raw) {
		b := batchOf(t, enc.c, int32(len(recs)), enc.body)
		sources[name] = resign(t, b, func(bh *BatchHeader) {
			bh.PartitionLeaderEpoch, bh.Attributes = h.PartitionLeaderEpoch, h.Attributes|int16(enc.c)
			bh.FirstTimestamp, bh.MaxTimestamp = h.FirstTimestamp, h.MaxTimestamp
			bh.ProducerID, bh.ProducerEpoch, bh.BaseSequence = h.ProducerID, h.ProducerEpoch, h.BaseSequence
		})
	}
	sources["none"] = resign(t, batchOf(t, CodecNone, int32(len(recs)), raw), func(bh *BatchHeader) {
		bh.PartitionLeaderEpoch, bh.Attributes = h.PartitionLeaderEpoch, h.Attributes
		bh.FirstTimestamp, bh.MaxTimestamp = h.FirstTimestamp, h.MaxTimestamp
		bh.ProducerID, bh.ProducerEpoch, bh.BaseSequence = h.ProducerID, h.ProducerEpoch, h.BaseSequence
	})
	for name, src := range sources {
		for _, c := range allCodecs {
			out, err := RecompressBatch(src, c, 1<<20, 1<<20)
			if err != nil {
				t.Fatalf("%s to %s: %v", name, c, err)
			}
			info, err := ValidateBatch(out, 1<<20)
			if err != nil {
				t.Fatalf("%s to %s: the result does not validate: %v", name, c, err)
			}
			got := info.Header
			if got.Codec() != c || !got.IsTransactional() || got.ProducerID != 7 || got.ProducerEpoch != 2 ||
				got.BaseSequence != 40 || got.PartitionLeaderEpoch != 3 || got.FirstTimestamp != 1000 ||
				got.MaxTimestamp != 2000 || got.NumRecords != int32(len(recs)) || got.LastOffsetDelta != int32(len(recs)-1) {
				t.Fatalf("%s to %s: header %+v", name, c, got)
			}
			var back []Record
			if err := DecodeBatch(out, 1<<20, func(_ *BatchHeader, r Record) error { back = append(back, r); return nil }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, recs) {
				t.Fatalf("%s to %s: records changed", name, c)
			}
		}
	}
}

// TestRecompressBatchBomb re-encodes a small batch holding a 90 MiB record
// of zeros: to gzip it fits max.message.bytes and is done with a few MiB;
// uncompressed (and snappy's 32 KiB chunks) it does not, and fails with
// ErrBatchTooLarge having held about the limit.
func TestRecompressBatchBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("decompresses 90 MiB several times")
	}
	raw := AppendRecord(nil, Record{Key: []byte("k"), Value: make([]byte, bombSize)})
	body, err := Compress(CodecLZ4, nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	raw = nil
	src := batchOf(t, CodecLZ4, 1, body)
	for _, tt := range []struct {
		c       Codec
		tooBig  bool
		maxHeap uint64
	}{
		{CodecGzip, false, 8 << 20},
		{CodecZstd, false, 12 << 20},
		{CodecNone, true, 8 << 20},
		{CodecSnappy, true, 8 << 20},
	} {
		t.Run(tt.c.String(), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			out, err := RecompressBatch(src, tt.c, 100<<20, 1<<20)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes out, allocated %d bytes, err %v", len(out), alloc, err)
			if tt.tooBig != errors.Is(err, ErrBatchTooLarge) || (!tt.tooBig && err != nil) {
				t.Fatalf("err = %v, want too large: %v", err, tt.tooBig)
			}
			if !raceEnabled && alloc > tt.maxHeap {
				t.Fatalf("allocated %d bytes, want at most %d", alloc, tt.maxHeap)
			}
		})
	}
}
