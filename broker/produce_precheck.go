package broker

import (
	"encoding/binary"
	"sync"

	"github.com/gregorbroker/gregor/protocol"
)

// A produce request of many megabytes no longer sits in the CPU's cache
// once its last byte has arrived: checking each batch's CRC-32C after the
// whole frame is read pays for bringing every byte back from memory (a
// quarter of the broker's CPU per GiB at 16 partitions, docs/performance.md).
// So, while a Produce frame's body is read in chunks, producePrecheck
// follows the request's structure over the bytes received so far and
// checksums each batch piece by piece as its bytes land, each chunk right
// after the socket read that wrote it. The records of an uncompressed
// batch are parsed the same way, each once it has wholly arrived
// (protocol.RecordWalk), and when the batch's last byte is in it is
// validated (protocol.ValidateBatchWalked) with the CRC and the records
// already walked: walking a whole 1 KiB-record batch at its end cost a
// cache miss per record.
//
// What it learns is a fact about a range of the frame's bytes (this range
// has this CRC; this range is a valid batch with this BatchInfo), not about
// the request: the produce handler looks a batch up by its first byte and
// length (validateProduced), so a request the precheck misreads, or one
// that is malformed and refused by the normal parse, can never lend a
// verdict to the wrong bytes. The handler's checks and their order are
// unchanged: only the CRC computation, and for a valid uncompressed batch
// the record walk, are taken from what the precheck found.

// precheckMinFrame is the smallest Produce frame prechecked: a smaller one
// is still cached when its handler runs.
const precheckMinFrame = 64 << 10

// batchVerdict is what the precheck learnt of one batch of a frame.
type batchVerdict struct {
	off, size int    // the batch's bytes in the frame
	crc       uint32 // the CRC-32C of those bytes from the attributes on
	// validated is set when protocol.ValidateBatchCRC found the batch
	// valid, with maxUncompressed as its limit; info is what it returned.
	validated       bool
	maxUncompressed int
	info            protocol.BatchInfo
}

// precheckStage is where in a Produce request's structure the precheck is.
type precheckStage uint8

const (
	stageHeader    precheckStage = iota // request header to the topic count
	stageTopic                          // a topic's name (or id) and partition count
	stagePartition                      // a partition's index and records length
	stageRecords                        // inside a partition's records
	stagePartTags                       // a partition's tagged fields (v9+)
	stageTopicTags                      // a topic's tagged fields (v9+)
	stageTail                           // the request's tagged fields (v9+)
	stageDone                           // the whole request was followed
	stageStopped                        // the structure made no sense: no more verdicts
)

// producePrecheck follows one Produce frame (see above). A frameReader
// keeps one and reuses it, and its verdicts, frame after frame.
type producePrecheck struct {
	size            int // the frame's size
	version         int16
	flexible        bool
	maxUncompressed int
	stage           precheckStage
	pos             int // the next byte to parse
	topics, parts   int // left to read of the current array
	recEnd          int // the end of the current partition's records
	// The batch being checksummed: its bytes are frame[batchOff:batchEnd],
	// those before crcPos are in crc. batchEnd is 0 between batches.
	batchOff, batchEnd, crcPos int
	crc                        uint32
	// walk parses the batch's records as they arrive, when it is
	// uncompressed (it walks nothing otherwise).
	walk     protocol.RecordWalk
	verdicts []batchVerdict
}

// start readies p for a frame of size bytes whose first bytes (at least
// the api key and version) are head, and reports whether it is a Produce
// frame it can follow.
func (p *producePrecheck) start(head []byte, size, maxUncompressed int) bool {
	p.reset()
	if len(head) < 4 {
		return false
	}
	key := int16(binary.BigEndian.Uint16(head))
	version := int16(binary.BigEndian.Uint16(head[2:]))
	// v0-v2 carry no magic-2 batches and are answered UNSUPPORTED_VERSION.
	if key != apiKeyProduce || version < 3 || version > 13 {
		return false
	}
	*p = producePrecheck{
		size:            size,
		version:         version,
		flexible:        version >= 9,
		maxUncompressed: maxUncompressed,
		stage:           stageHeader,
		verdicts:        p.verdicts,
	}
	return true
}

// reset forgets the last frame's verdicts, before the next frame.
func (p *producePrecheck) reset() {
	p.stage = stageStopped
	clear(p.verdicts) // the verdicts hold nothing of the frame, but keep none
	p.verdicts = p.verdicts[:0]
}

// active reports whether more of the frame can still yield verdicts.
func (p *producePrecheck) active() bool {
	return p.stage != stageStopped && p.stage != stageDone
}

// advance goes as far as the frame's bytes received so far, frame (the
// first len(frame) bytes of the frame), allow.
func (p *producePrecheck) advance(frame []byte) {
	for p.active() {
		if p.stage == stageRecords {
			if !p.records(frame) {
				return
			}
			continue
		}
		r := precheckReader{b: frame, size: p.size, pos: p.pos, flexible: p.flexible}
		topics, parts := p.topics, p.parts
		next := p.structure(&r)
		if r.short {
			// Wait for more bytes, then parse this element again from
			// where it starts.
			p.topics, p.parts = topics, parts
			return
		}
		if r.bad {
			p.stage = stageStopped
			return
		}
		p.pos, p.stage = r.pos, next
	}
}

// structure parses the element of the request's structure at r's
// position, returning the stage that follows it.
func (p *producePrecheck) structure(r *precheckReader) precheckStage {
	switch p.stage {
	case stageHeader:
		r.skip(8) // api key, version, correlation id
		r.skipString(false, true)
		if p.flexible {
			r.skipTags()
		}
		r.skipString(p.flexible, true) // transactional id
		r.skip(6)                      // acks, timeout
		p.topics = r.arrayLen()
		return p.nextTopic()
	case stageTopic:
		if p.version >= 13 {
			r.skip(16) // topic id
		} else {
			r.skipString(p.flexible, false)
		}
		p.parts = r.arrayLen()
		return p.nextPartition()
	case stagePartition:
		r.skip(4) // partition index
		n := r.bytesLen()
		if r.short || r.bad {
			return p.stage
		}
		if n > p.size-r.pos {
			r.bad = true // the request is malformed: its parse refuses it
			return p.stage
		}
		if n <= 0 {
			return p.afterRecords()
		}
		p.recEnd = r.pos + n
		p.batchEnd = 0
		return stageRecords
	case stagePartTags:
		if p.flexible {
			r.skipTags()
		}
		return p.nextPartition()
	case stageTopicTags:
		if p.flexible {
			r.skipTags()
		}
		return p.nextTopic()
	case stageTail:
		if p.flexible {
			r.skipTags()
		}
		return stageDone
	}
	r.bad = true
	return p.stage
}

func (p *producePrecheck) nextTopic() precheckStage {
	if p.topics <= 0 {
		return stageTail
	}
	p.topics--
	return stageTopic
}

func (p *producePrecheck) nextPartition() precheckStage {
	if p.parts <= 0 {
		return stageTopicTags
	}
	p.parts--
	return stagePartition
}

func (p *producePrecheck) afterRecords() precheckStage {
	if p.flexible {
		return stagePartTags
	}
	return p.nextPartition()
}

// records checksums the batches of the current partition's records as
// far as frame goes. It returns false when it needs more bytes.
func (p *producePrecheck) records(frame []byte) bool {
	for {
		if p.batchEnd == 0 {
			if p.pos == p.recEnd {
				p.stage = p.afterRecords()
				return true
			}
			if !p.startBatch(frame) {
				return false
			}
			continue
		}
		upto := min(len(frame), p.batchEnd)
		if p.crcPos < upto {
			p.crc = protocol.UpdateBatchCRC(p.crc, frame[p.crcPos:upto])
			p.crcPos = upto
			p.walk.Advance(frame[p.batchOff+protocol.BatchHeaderSize : upto])
		}
		if p.crcPos < p.batchEnd {
			return false
		}
		p.finishBatch(frame[p.batchOff:p.batchEnd])
		p.pos, p.batchEnd = p.batchEnd, 0
	}
}

// startBatch reads the header of the batch at p.pos once its bytes are
// there (false until then). Records that do not hold a whole magic-2
// batch there get no verdict from here to their end: the handler's own
// checks answer for them.
func (p *producePrecheck) startBatch(frame []byte) bool {
	left := p.recEnd - p.pos
	if left < protocol.BatchHeaderSize {
		p.pos = p.recEnd
		return true
	}
	if len(frame)-p.pos < protocol.BatchHeaderSize {
		return false
	}
	b := frame[p.pos:]
	size := 12 + int(int32(binary.BigEndian.Uint32(b[8:])))
	if b[16] != 2 || size < protocol.BatchHeaderSize || size > left {
		p.pos = p.recEnd
		return true
	}
	p.batchOff, p.batchEnd = p.pos, p.pos+size
	p.crcPos, p.crc = p.pos+protocol.BatchCRCStart, 0
	p.walk.Start(b[:protocol.BatchHeaderSize])
	return true
}

// finishBatch records the verdict of a batch whose bytes have all been
// checksummed, validating it whole if it is uncompressed.
func (p *producePrecheck) finishBatch(batch []byte) {
	v := batchVerdict{off: p.batchOff, size: len(batch), crc: p.crc}
	if batch[protocol.BatchCRCStart+1]&protocol.AttrCompressionMask == 0 {
		// A compressed batch is left to the handler: decompressing it
		// here would not be cheaper, and the topic may recompress it.
		info, err := protocol.ValidateBatchWalked(batch, p.maxUncompressed, p.crc, &p.walk)
		if err == nil {
			v.validated, v.maxUncompressed, v.info = true, p.maxUncompressed, info
		}
	}
	p.verdicts = append(p.verdicts, v)
}

// precheckReader reads the small fields of a Produce request's structure
// from the bytes received so far: short when they run out (the element is
// parsed again once more arrived), bad when they cannot be a request.
type precheckReader struct {
	b          []byte // the bytes received so far
	size       int    // the whole frame's
	pos        int
	flexible   bool
	short, bad bool
}

func (r *precheckReader) failed() bool { return r.short || r.bad }

func (r *precheckReader) skip(n int) {
	if r.failed() {
		return
	}
	if n < 0 {
		r.bad = true
		return
	}
	if len(r.b)-r.pos < n {
		r.short = true
		return
	}
	r.pos += n
}

func (r *precheckReader) uvarint() uint64 {
	if r.failed() {
		return 0
	}
	if r.pos >= len(r.b) {
		// Also where records skipped past the bytes received so far.
		r.short = true
		return 0
	}
	v, n := binary.Uvarint(r.b[r.pos:])
	switch {
	case n == 0:
		r.short = true
	case n < 0:
		r.bad = true
	default:
		r.pos += n
	}
	return v
}

func (r *precheckReader) int16() int16 {
	r.skip(2)
	if r.failed() {
		return 0
	}
	return int16(binary.BigEndian.Uint16(r.b[r.pos-2:]))
}

func (r *precheckReader) int32() int32 {
	r.skip(4)
	if r.failed() {
		return 0
	}
	return int32(binary.BigEndian.Uint32(r.b[r.pos-4:]))
}

// skipString skips a string, compact or not, that may be null or not.
func (r *precheckReader) skipString(compact, nullable bool) {
	var n int64
	if compact {
		n = int64(r.uvarint()) - 1
	} else {
		n = int64(r.int16())
	}
	if r.failed() {
		return
	}
	if n < 0 && !(nullable && n == -1) {
		r.bad = true
		return
	}
	r.skip(int(max(n, 0)))
}

// arrayLen reads an array's length; a null array has none.
func (r *precheckReader) arrayLen() int {
	var n int64
	if r.flexible {
		n = int64(r.uvarint()) - 1
	} else {
		n = int64(r.int32())
	}
	if n > int64(r.size) && !r.failed() {
		n = 0
		r.bad = true // more elements than the frame could hold
	}
	return int(max(n, 0))
}

// bytesLen reads the length of a nullable bytes field, -1 for null.
func (r *precheckReader) bytesLen() int {
	if r.flexible {
		v := r.uvarint()
		if v > 1<<31 {
			r.bad = true
		}
		return int(v) - 1
	}
	return int(r.int32())
}

// skipTags skips a tagged-field section.
func (r *precheckReader) skipTags() {
	n := r.uvarint()
	for i := uint64(0); i < n && !r.failed(); i++ {
		r.uvarint() // tag
		size := r.uvarint()
		if size > 1<<31 {
			r.bad = true
		}
		r.skip(int(size))
	}
}

// prechecked holds, while their request's handler runs, the verdicts of
// the batches of the Produce frames being handled, by the address of each
// batch's first byte: the handler finds a batch's verdict from the batch
// alone (validateProduced), however the request's parse sliced it.
type prechecked struct {
	mu sync.Mutex
	m  map[*byte]*batchVerdict
}

// add makes the verdicts of frame's batches visible to validateProduced,
// until remove.
func (pc *prechecked) add(frame []byte, vs []batchVerdict) {
	if len(vs) == 0 {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.m == nil {
		pc.m = make(map[*byte]*batchVerdict, len(vs))
	}
	for i := range vs {
		pc.m[&frame[vs[i].off]] = &vs[i]
	}
}

// remove withdraws what add made visible.
func (pc *prechecked) remove(frame []byte, vs []batchVerdict) {
	if len(vs) == 0 {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for i := range vs {
		delete(pc.m, &frame[vs[i].off])
	}
}

// lookup is the verdict of exactly the bytes of batch, or nil.
func (pc *prechecked) lookup(batch []byte) *batchVerdict {
	if len(batch) == 0 {
		return nil
	}
	pc.mu.Lock()
	v := pc.m[&batch[0]]
	pc.mu.Unlock()
	if v == nil || v.size != len(batch) {
		return nil
	}
	return v
}

// validateProduced is protocol.ValidateBatch for a batch of a Produce
// request being handled, taking from its precheck what it already found:
// its CRC-32C, and for a valid uncompressed batch the whole verdict.
func (s *Server) validateProduced(batch []byte, maxUncompressed int) (protocol.BatchInfo, error) {
	return s.prechecked.validate(batch, maxUncompressed)
}

// validate is protocol.ValidateBatch taking what pc holds of batch.
func (pc *prechecked) validate(batch []byte, maxUncompressed int) (protocol.BatchInfo, error) {
	v := pc.lookup(batch)
	switch {
	case v == nil:
		return protocol.ValidateBatch(batch, maxUncompressed)
	case v.validated && v.maxUncompressed == maxUncompressed:
		return v.info, nil
	}
	return protocol.ValidateBatchCRC(batch, maxUncompressed, v.crc)
}
