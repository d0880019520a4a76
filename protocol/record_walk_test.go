package protocol

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// A batch whose records are walked as its bytes arrive, in pieces of any
// size, validates to exactly what ValidateBatch says of the same bytes:
// the same BatchInfo for a valid batch, the same error for a damaged one
// (the walk met the damage and the validation started over, or the
// validation walks on into it). For a valid batch, the walk has already
// been through every record when its last byte arrives.
func TestRecordWalkMatchesValidateBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var recs []Record
	for i := range 40 {
		r := Record{OffsetDelta: int32(i), TimestampDelta: int64(rng.IntN(1000)) - 300, Value: testPayload(rng.IntN(300), uint64(i))}
		if i%3 != 0 {
			r.Key = []byte(fmt.Sprint("k", i))
		}
		if i%5 == 0 {
			r.Headers = []Header{{Key: "h", Value: []byte("v")}}
		}
		recs = append(recs, r)
	}
	valid, err := BuildBatch(BatchHeader{FirstTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs, CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	for try := range 3000 {
		batch := append([]byte(nil), valid...)
		if try > 0 {
			// Damage a byte of the records; the CRC is the damaged
			// bytes' own, so only the records' parse can tell.
			for range 1 + rng.IntN(2) {
				batch[BatchHeaderSize+rng.IntN(len(batch)-BatchHeaderSize)] = byte(rng.Uint32())
			}
		}
		crc := BatchCRC(batch)
		wantInfo, wantErr := ValidateBatchCRC(batch, 1<<20, crc)

		var w RecordWalk
		if !w.Start(batch[:BatchHeaderSize]) {
			t.Fatal("Start refused an uncompressed batch")
		}
		for got := BatchHeaderSize; got < len(batch); {
			got = min(len(batch), got+1+rng.IntN(700))
			w.Advance(batch[BatchHeaderSize:got])
		}
		if try == 0 && (!w.ok || w.i != int32(len(recs))) {
			t.Fatalf("the walk of a valid batch stopped at record %d of %d (ok %v)", w.i, len(recs), w.ok)
		}
		info, err := ValidateBatchWalked(batch, 1<<20, crc, &w)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("try %d: walked validation says %v, ValidateBatch %v", try, err, wantErr)
		}
		if err == nil && info != wantInfo {
			t.Fatalf("try %d: walked validation found %+v, ValidateBatch %+v", try, info, wantInfo)
		}
	}
}

// A walk started on another batch's header, or on a compressed one, is
// not used.
func TestRecordWalkOfOtherBatchIgnored(t *testing.T) {
	a := benchBatch(t, CodecNone)
	b := resign(t, append([]byte(nil), a...), func(h *BatchHeader) { h.FirstTimestamp = 99 })
	var w RecordWalk
	w.Start(a[:BatchHeaderSize])
	w.Advance(a[BatchHeaderSize:])
	want, _ := ValidateBatch(b, 1<<20)
	got, err := ValidateBatchWalked(b, 1<<20, BatchCRC(b), &w)
	if err != nil || got != want {
		t.Fatalf("validating b with a's walk: %+v, %v; want %+v", got, err, want)
	}
	if w.Start(benchBatch(t, CodecZstd)[:BatchHeaderSize]) {
		t.Fatal("Start took a compressed batch")
	}
}
