package broker

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// precheckFrame encodes a Produce request of the given version (its frame
// without the size prefix) with one topic per entry of batches, one
// partition per batch.
func precheckFrame(version int16, topicIDs [][16]byte, batches [][][]byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	req.TimeoutMillis = 30000
	for i, parts := range batches {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t" + string(rune('a'+i))
		if i < len(topicIDs) {
			rt.TopicID = topicIDs[i]
		}
		for j, b := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(j)
			rp.Records = b
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return encodeRequest(req, 7)[4:]
}

// feedPrecheck runs a precheck over frame as if its bytes arrived in the
// given chunk sizes (the last chunk takes what is left), and returns it.
func feedPrecheck(frame []byte, chunks []int, maxUncompressed int) *producePrecheck {
	var p producePrecheck
	got, started := 0, false
	for i := 0; got < len(frame); i++ {
		step := len(frame) - got
		if i < len(chunks) && chunks[i] > 0 {
			step = min(step, chunks[i])
		}
		got += step
		if !started && got >= 4 {
			started = true
			p.start(frame, len(frame), maxUncompressed)
		}
		if p.active() {
			p.advance(frame[:got])
		}
	}
	return &p
}

// checkPrecheckVerdicts asserts that every verdict of p over frame is
// what VerifyCRC and ValidateBatch say of the same bytes, and, when the
// frame parses as a request, that each partition's batches the handler
// would validate are found and judged as ValidateBatch judges them.
func checkPrecheckVerdicts(t *testing.T, frame []byte, p *producePrecheck, maxUncompressed int) {
	t.Helper()
	for _, v := range p.verdicts {
		if v.off < 0 || v.size < protocol.BatchHeaderSize || v.off+v.size > len(frame) {
			t.Fatalf("verdict outside the frame: %+v of %d bytes", v, len(frame))
		}
		batch := frame[v.off : v.off+v.size]
		if got := protocol.BatchCRC(batch); got != v.crc {
			t.Fatalf("batch at %d: precheck crc %08x, BatchCRC %08x", v.off, v.crc, got)
		}
		crcOK := binary.BigEndian.Uint32(batch[17:]) == v.crc
		if err := protocol.VerifyCRC(batch); (err == nil) != crcOK {
			t.Fatalf("batch at %d: VerifyCRC %v, precheck says crc good %v", v.off, err, crcOK)
		}
		if v.validated {
			info, err := protocol.ValidateBatch(batch, maxUncompressed)
			if err != nil || !reflect.DeepEqual(info, v.info) {
				t.Fatalf("batch at %d: precheck found it valid (%+v), ValidateBatch: %+v, %v", v.off, v.info, info, err)
			}
		}
	}
	var pc prechecked
	pc.add(frame, p.verdicts)
	defer pc.remove(frame, p.verdicts)
	_, req, err := protocol.ParseRequest(frame)
	if err != nil {
		return // the connection is closed; no handler runs
	}
	pr, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		// The mutation made it another request: the precheck, which
		// follows Produce frames only, must have said nothing of it.
		if len(p.verdicts) > 0 {
			t.Fatalf("%d verdicts on a %T", len(p.verdicts), req)
		}
		return
	}
	for _, rt := range pr.Topics {
		for _, rp := range rt.Partitions {
			rest := rp.Records
			for len(rest) > 0 {
				batch, next, _, err := protocol.NextBatch(rest)
				if err != nil {
					break
				}
				if pc.lookup(batch) == nil && p.stage == stageDone {
					t.Fatalf("partition %d: batch at record byte %d has no verdict", rp.Partition, len(rp.Records)-len(rest))
				}
				wantInfo, wantErr := protocol.ValidateBatch(batch, maxUncompressed)
				gotInfo, gotErr := pc.validate(batch, maxUncompressed)
				if !reflect.DeepEqual(wantInfo, gotInfo) || (wantErr == nil) != (gotErr == nil) ||
					(wantErr != nil && wantErr.Error() != gotErr.Error()) {
					t.Fatalf("partition %d: validate with the precheck: %+v, %v; ValidateBatch: %+v, %v", rp.Partition, gotInfo, gotErr, wantInfo, wantErr)
				}
				rest = next
			}
		}
	}
}

// FuzzProducePrecheck builds Produce requests of every version the
// precheck follows, mutates their bytes and feeds them in random chunks:
// the precheck's verdicts must equal VerifyCRC's and ValidateBatch's over
// the same bytes, and when nothing was mutated every batch has one.
func FuzzProducePrecheck(f *testing.F) {
	f.Add(uint64(1), uint8(9), uint8(2), uint8(0))
	f.Add(uint64(2), uint8(3), uint8(1), uint8(3))
	f.Add(uint64(3), uint8(13), uint8(4), uint8(1))
	f.Add(uint64(4), uint8(8), uint8(3), uint8(40))
	f.Fuzz(func(t *testing.T, seed uint64, version, shape, mutations uint8) {
		rng := rand.New(rand.NewPCG(seed, uint64(version)<<8|uint64(shape)))
		v := int16(3 + int(version)%11)
		var batches [][][]byte
		var ids [][16]byte
		for i := range 1 + int(shape)%3 {
			var parts [][]byte
			for range 1 + rng.IntN(4) {
				parts = append(parts, fuzzRecords(t, rng))
			}
			batches = append(batches, parts)
			ids = append(ids, [16]byte{byte(i + 1)})
		}
		frame := precheckFrame(v, ids, batches)
		for range int(mutations) % 8 {
			if len(frame) == 0 {
				break
			}
			switch rng.IntN(3) {
			case 0:
				frame[rng.IntN(len(frame))] ^= byte(1 + rng.IntN(255))
			case 1:
				frame[rng.IntN(len(frame))] = byte(rng.IntN(256))
			default:
				frame = frame[:rng.IntN(len(frame)+1)] // cut short
			}
		}
		if len(frame) < 4 {
			return
		}
		var chunks []int
		for range 1 + rng.IntN(20) {
			chunks = append(chunks, 1+rng.IntN(1+len(frame)/4))
		}
		const maxUncompressed = 1 << 20
		p := feedPrecheck(frame, chunks, maxUncompressed)
		if mutations%8 == 0 && p.stage != stageDone {
			t.Fatalf("v%d: an intact request was not followed to its end (stage %d at %d of %d)", v, p.stage, p.pos, len(frame))
		}
		checkPrecheckVerdicts(t, frame, p, maxUncompressed)
	})
}

// fuzzRecords is one partition's records: mostly one batch, sometimes two,
// none, a compressed one or one corrupted inside or in its header.
func fuzzRecords(t *testing.T, rng *rand.Rand) []byte {
	one := func() []byte {
		recs := make([]protocol.Record, 1+rng.IntN(5))
		for i := range recs {
			recs[i] = protocol.Record{OffsetDelta: int32(i), Key: []byte("k"), Value: make([]byte, rng.IntN(300))}
		}
		codec := protocol.CodecNone
		if rng.IntN(4) == 0 {
			codec = protocol.CodecLZ4
		}
		b, err := protocol.BuildBatch(protocol.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1}, recs, codec)
		if err != nil {
			t.Fatal(err)
		}
		switch rng.IntN(6) {
		case 0:
			b[protocol.BatchHeaderSize+rng.IntN(len(b)-protocol.BatchHeaderSize)] ^= 0x5a // a bad crc
		case 1:
			binary.BigEndian.PutUint32(b[57:], uint32(len(recs)+1)) // a record count that lies
			binary.BigEndian.PutUint32(b[17:], protocol.BatchCRC(b))
		}
		return b
	}
	switch rng.IntN(8) {
	case 0:
		return nil
	case 1:
		return append(one(), one()...)
	case 2:
		b := one()
		return b[:rng.IntN(len(b))] // torn
	}
	return one()
}

// TestProducePrecheckFollowsEveryVersion feeds intact requests of each
// version, byte by byte and in one piece: every batch gets a verdict, the
// bad one a crc that VerifyCRC refuses too.
func TestProducePrecheckFollowsEveryVersion(t *testing.T) {
	good := benchBatch(t, 3, 100)
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	for v := int16(3); v <= 13; v++ {
		frame := precheckFrame(v, [][16]byte{{1}, {2}}, [][][]byte{{good, bad}, {nil, good}})
		for _, chunks := range [][]int{nil, slicesRepeat(1, len(frame))} {
			p := feedPrecheck(frame, chunks, 1<<20)
			if p.stage != stageDone || len(p.verdicts) != 3 {
				t.Fatalf("v%d: stage %d, %d verdicts, want done with 3", v, p.stage, len(p.verdicts))
			}
			if !p.verdicts[0].validated || p.verdicts[1].validated || !p.verdicts[2].validated {
				t.Fatalf("v%d: verdicts %+v: want the second batch (bad crc) alone not validated", v, p.verdicts)
			}
			checkPrecheckVerdicts(t, frame, p, 1<<20)
		}
	}
}

// TestProducePrecheckManyPartitionsInPieces follows a request whose
// partition count exceeds the bytes received when the count is read.
func TestProducePrecheckManyPartitionsInPieces(t *testing.T) {
	small := benchBatch(t, 1, 10)
	parts := make([][]byte, 300)
	for i := range parts {
		parts[i] = small
	}
	for _, v := range []int16{8, 9} {
		frame := precheckFrame(v, nil, [][][]byte{parts})
		p := feedPrecheck(frame, slicesRepeat(16, len(frame)), 1<<20)
		if p.stage != stageDone || len(p.verdicts) != len(parts) {
			t.Fatalf("v%d: stage %d with %d verdicts, want done with %d", v, p.stage, len(p.verdicts), len(parts))
		}
		checkPrecheckVerdicts(t, frame, p, 1<<20)
	}
}

func slicesRepeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// TestProducePrecheckCorruptBatchRefusedAlone sends, over a real socket
// and in pieces, Produce requests of several versions (non-flexible,
// flexible, by topic id) whose frames are large enough to be prechecked,
// with one of four partitions' batches corrupted: that partition alone
// answers CORRUPT_MESSAGE, and a consumer reads back exactly the others'
// records. A request whose structure is malformed still closes the
// connection, as the normal parse decides.
func TestProducePrecheckCorruptBatchRefusedAlone(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "ta", 4, nil)
	id := topicID(t, ts, "ta")
	const records = 30
	rounds := 0
	for _, v := range []int16{7, 8, 9, 12, 13} {
		var parts [][]byte
		for p := range 4 {
			recs := make([]protocol.Record, records)
			for i := range recs {
				val := make([]byte, 1024)
				binary.BigEndian.PutUint32(val, uint32(int(v)*1000+p*100+i))
				recs[i] = protocol.Record{OffsetDelta: int32(i), Value: val}
			}
			b, err := protocol.BuildBatch(protocol.BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: time.Now().UnixMilli()}, recs, protocol.CodecNone)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, b)
		}
		parts[2][len(parts[2])-500] ^= 0x10 // inside a record's value: only the crc catches it
		frame := precheckFrame(v, [][16]byte{id}, [][][]byte{parts})
		if len(frame) < precheckMinFrame {
			t.Fatalf("frame of %d bytes is below the precheck's %d", len(frame), precheckMinFrame)
		}
		c := dialRaw(t, ts.addr)
		sized := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
		sized = append(sized, frame...)
		for len(sized) > 0 { // in pieces, so that the body arrives in several reads
			n := min(len(sized), 7000)
			c.write(sized[:n])
			sized = sized[n:]
			time.Sleep(time.Millisecond)
		}
		resp, err := protocol.ReadFrame(c.nc, 1<<20, nil)
		if err != nil {
			t.Fatalf("v%d: read response: %v", v, err)
		}
		body := resp[4:]
		if v >= 9 {
			body = body[1:] // the flexible response header's tags
		}
		var pr kmsg.ProduceResponse
		pr.Version = v
		if err := pr.ReadFrom(body); err != nil {
			t.Fatalf("v%d: decode response: %v", v, err)
		}
		if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 4 {
			t.Fatalf("v%d: response %+v", v, pr.Topics)
		}
		for _, sp := range pr.Topics[0].Partitions {
			want := int16(0)
			if sp.Partition == 2 {
				want = kerr.CorruptMessage.Code
			}
			if sp.ErrorCode != want {
				t.Fatalf("v%d: partition %d answered %d, want %d", v, sp.Partition, sp.ErrorCode, want)
			}
			if want == 0 && sp.BaseOffset != int64(rounds*records) {
				t.Fatalf("v%d: partition %d at offset %d, want %d", v, sp.Partition, sp.BaseOffset, rounds*records)
			}
		}
		rounds++
	}

	cl := ts.client(t, kgo.ConsumeTopics("ta"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := 3 * records * rounds
	seen := map[int32]int{}
	ctx := testContext(t)
	for n := 0; n < want; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", n, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[r.Partition]++
			n++
			// The value names its version, partition and index.
			if got := binary.BigEndian.Uint32(r.Value); int(got)%1000/100 != int(r.Partition) || int(got)%100 != int(r.Offset)%records {
				t.Fatalf("partition %d offset %d holds record %d", r.Partition, r.Offset, got)
			}
		})
	}
	if seen[2] != 0 || seen[0] != records*rounds || seen[1] != records*rounds || seen[3] != records*rounds {
		t.Fatalf("records read back per partition: %v", seen)
	}

	// A records length past the frame's end: the precheck stops, the
	// request's parse refuses it and the connection closes, as without
	// a precheck.
	big := benchBatch(t, 100, 1024)
	torn := precheckFrame(8, nil, [][][]byte{{big}})
	binary.BigEndian.PutUint32(torn[len(torn)-len(big)-4:], uint32(len(big)+100000)) // v8: an int32 length, then the batch
	c := dialRaw(t, ts.addr)
	c.write(binary.BigEndian.AppendUint32(nil, uint32(len(torn))))
	c.write(torn)
	c.expectClosed()
	goodClientWorks(t, ts)
}

// BenchmarkProducePrecheck measures checking a 6 MiB Produce frame of 16
// batches of 384 x 1 KiB records: "arriving" follows it in 128 KiB
// pieces each right after it is written (as readBody does after each
// socket read), "after" validates each batch once the whole frame is
// there, as the handler did without the precheck.
func BenchmarkProducePrecheck(b *testing.B) {
	var parts [][]byte
	for range 16 {
		parts = append(parts, benchBatch(b, 384, 1024))
	}
	frame := precheckFrame(9, nil, [][][]byte{parts})
	src := append([]byte(nil), frame...)
	const chunk = 128 << 10
	b.Run("arriving", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		var p producePrecheck
		for b.Loop() {
			p.start(src, len(src), 100<<20)
			for got := 0; got < len(frame); {
				n := min(chunk, len(frame)-got)
				copy(frame[got:got+n], src[got:got+n]) // the socket's copy
				got += n
				p.advance(frame[:got])
			}
		}
		if len(p.verdicts) != 16 || !p.verdicts[15].validated {
			b.Fatalf("%d verdicts", len(p.verdicts))
		}
	})
	b.Run("after", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		batches := feedPrecheck(src, nil, 100<<20).verdicts
		for b.Loop() {
			for got := 0; got < len(frame); {
				n := min(chunk, len(frame)-got)
				copy(frame[got:got+n], src[got:got+n])
				got += n
			}
			for _, v := range batches {
				if _, err := protocol.ValidateBatch(frame[v.off:v.off+v.size], 100<<20); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
