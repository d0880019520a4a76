package producerstate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"strconv"
	"strings"
)

// The snapshot file format is Kafka's (ProducerStateManager's
// PID_SNAPSHOT_MAP_SCHEMA), all big-endian:
//
//	version  int16 (1)
//	crc      uint32, CRC-32C of every byte after it
//	entries  int32 count, then per producer:
//	  producer_id int64, epoch int16, last_sequence int32,
//	  last_offset int64, offset_delta int32, timestamp int64,
//	  coordinator_epoch int32, current_txn_first_offset int64
//
// Only each producer's last batch is kept, so after a restart only a retry
// of that batch is recognised as a duplicate, as in Kafka.
const (
	snapshotVersion     = 1
	snapshotHeaderSize  = 2 + 4 + 4
	snapshotEntrySize   = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	snapshotCRCStart    = 6
	snapshotSuffix      = ".snapshot"
	snapshotOffsetWidth = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptSnapshot is wrapped by every DecodeSnapshot error: Kafka
// deletes such a snapshot and rebuilds from an older one or the log.
var ErrCorruptSnapshot = errors.New("corrupt producer state snapshot")

// EncodeSnapshot serialises the state in Kafka's .snapshot format, entries
// ordered by producer id so equal states give equal bytes.
func (s *State) EncodeSnapshot() []byte {
	return encodeSnapshot(s.producers)
}

// EncodeSnapshotBelow serialises the state of the batches below offset,
// for the snapshot named by offset that is taken when the log rolls to a
// segment starting there: the broker updates the state with a batch
// before it appends it, so a roll inside that append finds the batch in
// the state already. If the latest Update was of a batch at or above
// offset, its producer's entry from before it is written instead. Only
// that one batch can lie past offset: appends are serialized, and the
// caller snapshots at the log end.
func (s *State) EncodeSnapshotBelow(offset int64) []byte {
	if !s.last.set || s.last.firstOffset < offset {
		return encodeSnapshot(s.producers)
	}
	m := make(map[int64]*entry, len(s.producers))
	for id, e := range s.producers {
		m[id] = e
	}
	if s.last.before != nil {
		m[s.last.producerID] = s.last.before
	} else {
		delete(m, s.last.producerID)
	}
	return encodeSnapshot(m)
}

// OngoingTransactions decodes a snapshot's ongoing transactions: the first
// offset of each producer's open transaction. storage rebuilds the
// transaction index from them (storage.ManagerConfig.ProducerSnapshotTxns).
func OngoingTransactions(data []byte) (map[int64]int64, error) {
	st, err := DecodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]int64, len(st.inTxn))
	for id := range st.inTxn {
		out[id] = st.producers[id].txnFirstOffset
	}
	return out, nil
}

func encodeSnapshot(producers map[int64]*entry) []byte {
	ids := make([]int64, 0, len(producers))
	for id := range producers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })

	buf := make([]byte, snapshotHeaderSize, snapshotHeaderSize+len(ids)*snapshotEntrySize)
	binary.BigEndian.PutUint16(buf[0:], snapshotVersion)
	binary.BigEndian.PutUint32(buf[6:], uint32(len(ids)))
	for _, id := range ids {
		e := producers[id]
		lastOffset, offsetDelta := int64(-1), int32(0)
		if b, ok := e.last(); ok {
			lastOffset, offsetDelta = b.LastOffset, b.OffsetDelta
		}
		buf = binary.BigEndian.AppendUint64(buf, uint64(id))
		buf = binary.BigEndian.AppendUint16(buf, uint16(e.epoch))
		buf = binary.BigEndian.AppendUint32(buf, uint32(e.lastSeq()))
		buf = binary.BigEndian.AppendUint64(buf, uint64(lastOffset))
		buf = binary.BigEndian.AppendUint32(buf, uint32(offsetDelta))
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.lastTimestamp))
		buf = binary.BigEndian.AppendUint32(buf, uint32(e.coordinatorEpoch))
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.txnFirstOffset))
	}
	binary.BigEndian.PutUint32(buf[2:], crc32.Checksum(buf[snapshotCRCStart:], castagnoli))
	return buf
}

// DecodeSnapshot parses a .snapshot file, verifying its version, CRC and
// length. As Kafka's readSnapshot, an entry with a negative last offset has
// no batch, a negative transaction offset means no transaction, and the
// timestamp is both the producer's and its batch's. Expired producers are
// not dropped here: the caller applies ExpireProducers with its clock, as
// Kafka filters them when loading.
func DecodeSnapshot(data []byte) (*State, error) {
	if len(data) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptSnapshot, len(data), snapshotHeaderSize)
	}
	if v := int16(binary.BigEndian.Uint16(data[0:])); v != snapshotVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrCorruptSnapshot, v)
	}
	stored := binary.BigEndian.Uint32(data[2:])
	if computed := crc32.Checksum(data[snapshotCRCStart:], castagnoli); stored != computed {
		return nil, fmt.Errorf("%w: stored CRC %d, computed %d", ErrCorruptSnapshot, stored, computed)
	}
	count := int32(binary.BigEndian.Uint32(data[6:]))
	body := data[snapshotHeaderSize:]
	if count < 0 || int64(count)*snapshotEntrySize != int64(len(body)) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptSnapshot, count, len(body))
	}
	s := New()
	for i := 0; i < int(count); i++ {
		p := body[i*snapshotEntrySize:]
		id := int64(binary.BigEndian.Uint64(p[0:]))
		e := &entry{
			epoch:            int16(binary.BigEndian.Uint16(p[8:])),
			lastTimestamp:    int64(binary.BigEndian.Uint64(p[26:])),
			coordinatorEpoch: int32(binary.BigEndian.Uint32(p[34:])),
			txnFirstOffset:   int64(binary.BigEndian.Uint64(p[38:])),
		}
		seq := int32(binary.BigEndian.Uint32(p[10:]))
		lastOffset := int64(binary.BigEndian.Uint64(p[14:]))
		offsetDelta := int32(binary.BigEndian.Uint32(p[22:]))
		if _, dup := s.producers[id]; dup {
			return nil, fmt.Errorf("%w: producer %d appears twice", ErrCorruptSnapshot, id)
		}
		if lastOffset >= 0 {
			e.addBatch(BatchMetadata{LastSeq: seq, LastOffset: lastOffset, OffsetDelta: offsetDelta, Timestamp: e.lastTimestamp})
		}
		if e.txnFirstOffset < 0 {
			e.txnFirstOffset = -1
		} else {
			s.inTxn[id] = struct{}{}
		}
		s.producers[id] = e
	}
	return s, nil
}

// SnapshotFileName is the name of the snapshot holding the state of every
// batch below offset: the offset in 20 digits and ".snapshot", as Kafka's
// LogFileUtils.producerSnapshotFile. offset must not be negative.
func SnapshotFileName(offset int64) string {
	return fmt.Sprintf("%0*d%s", snapshotOffsetWidth, offset, snapshotSuffix)
}

// ParseSnapshotFileName returns the offset a snapshot file name stands
// for; other names (including ".snapshot.deleted") are an error.
func ParseSnapshotFileName(name string) (int64, error) {
	digits, ok := strings.CutSuffix(name, snapshotSuffix)
	if !ok || len(digits) != snapshotOffsetWidth {
		return 0, fmt.Errorf("parse snapshot file name %q: want %d digits and %q", name, snapshotOffsetWidth, snapshotSuffix)
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("parse snapshot file name %q: offset is not decimal", name)
		}
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse snapshot file name %q: %w", name, err)
	}
	return off, nil
}
