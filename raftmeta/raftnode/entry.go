package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// A metadata log entry is one raft entry holding a batch of records that
// apply atomically. Its header names the proposal that wrote it so that the
// proposer can match the applied entry to the caller waiting for it:
//
//	byte 0      entry format version (1)
//	bytes 1-8   proposer node ID
//	bytes 9-16  proposer incarnation (random per Start, so proposals made
//	            before a restart never match a waiter made after it)
//	bytes 17-24 proposal sequence number within the incarnation
//	then        record count and length-prefixed records
const (
	entryVersion   = 1
	entryHeaderLen = 25
)

// errBadEntry marks a log entry whose payload cannot be decoded.
var errBadEntry = errors.New("bad metadata log entry")

type entryHeader struct {
	node        uint64
	incarnation uint64
	seq         uint64
}

// encodeEntry encodes recs after a zero header; the Ready loop fills the
// header in with setEntryHeader when it assigns the sequence number.
func encodeEntry(recs []image.Record) []byte {
	b := make([]byte, entryHeaderLen, entryHeaderLen+64*len(recs))
	b[0] = entryVersion
	return image.AppendRecords(b, recs)
}

func setEntryHeader(b []byte, h entryHeader) {
	binary.BigEndian.PutUint64(b[1:], h.node)
	binary.BigEndian.PutUint64(b[9:], h.incarnation)
	binary.BigEndian.PutUint64(b[17:], h.seq)
}

func decodeEntry(b []byte) (entryHeader, []image.Record, error) {
	var h entryHeader
	if len(b) < entryHeaderLen {
		return h, nil, fmt.Errorf("%w: %d bytes is shorter than the header", errBadEntry, len(b))
	}
	if b[0] != entryVersion {
		return h, nil, fmt.Errorf("%w: unknown version %d", errBadEntry, b[0])
	}
	h.node = binary.BigEndian.Uint64(b[1:])
	h.incarnation = binary.BigEndian.Uint64(b[9:])
	h.seq = binary.BigEndian.Uint64(b[17:])
	recs, err := image.DecodeRecords(b[entryHeaderLen:])
	if err != nil {
		return h, nil, fmt.Errorf("%w: %w", errBadEntry, err)
	}
	return h, recs, nil
}
