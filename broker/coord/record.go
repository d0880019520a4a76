package coord

import (
	"encoding/binary"
	"math"
	"unicode/utf16"
)

// Record is one record of a coordinator's internal topic (__consumer_offsets,
// __transaction_state): a key and a value in Kafka's coordinator schemas,
// each prefixed by its int16 version. A nil Value is a tombstone. Every
// coordinator uses this type, so one Store implementation serves every
// internal topic.
//
// The records a coordinator hands to a Store carry only Key and Value.
// The records a load replays also say which batch they came from, so that
// transactional offset commits are rebuilt exactly: the zero values mean a
// record of an ordinary (non-transactional, non-control) batch.
type Record struct {
	Key   []byte
	Value []byte

	// Transactional is set for a record of a transactional data batch:
	// an offset commit in it stays pending until a marker of ProducerID
	// commits or aborts it.
	Transactional bool
	// Control is set for a record of a control batch: Key and Value are
	// the control record's (kmsg.ControlRecordKey, then for markers
	// kmsg.EndTxnMarker). COMMIT and ABORT markers end ProducerID's
	// transaction; other control types are skipped.
	Control bool
	// ProducerID and ProducerEpoch are the batch header's; they matter
	// only when Transactional or Control is set.
	ProducerID    int64
	ProducerEpoch int16
}

// KeyVersion reads a record key's version prefix, which Kafka's coordinator
// serde uses as the record type.
func KeyVersion(key []byte) (int16, bool) {
	if len(key) < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(key)), true
}

// PartitionFor returns the internal topic partition of a key (a group id, a
// transactional id) exactly as Kafka: Utils.abs(key.hashCode()) %
// partitions, where hashCode is Java's String.hashCode over UTF-16 code
// units and Utils.abs maps Integer.MIN_VALUE to 0. It returns 0 when
// partitions is not positive.
func PartitionFor(key string, partitions int32) int32 {
	if partitions <= 0 {
		return 0
	}
	h := javaStringHash(key)
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}

// javaStringHash is String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over the
// UTF-16 encoding, wrapping at 32 bits.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

func recordsSize(recs []Record) int {
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
	}
	return n
}
