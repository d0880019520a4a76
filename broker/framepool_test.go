package broker

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// TestFramePoolFits checks that a pooled frame buffer is handed out again
// for a frame it can hold, in the class where readBody's exactly-sized
// buffers land, and never for a frame larger than its capacity.
func TestFramePoolFits(t *testing.T) {
	const n = 4<<20 + 12345 // a 1,000-partition produce request
	for getFrameBuf(n) != nil {
		// Left by another test: the checks below need an empty class.
	}
	b := make([]byte, n)
	putFrameBuf(b)
	if got := getFrameBuf(n + 1); got != nil {
		t.Fatalf("getFrameBuf(%d) returned a buffer of cap %d", n+1, cap(got))
	}
	got := getFrameBuf(n)
	if got == nil || cap(got) != n || &got[:1][0] != &b[0] {
		t.Fatalf("getFrameBuf(%d) did not return the pooled buffer (cap %d)", n, cap(got))
	}
	if len(got) != 0 {
		t.Fatalf("pooled buffer has length %d, want 0", len(got))
	}
	for _, size := range []int{0, 1, 1 << 9, 1<<24 + 1, 1 << 30} {
		if got := getFrameBuf(size); got != nil {
			t.Fatalf("getFrameBuf(%d) returned a buffer outside the pooled sizes", size)
		}
	}
	// The pool keeps no more than maxPooledFrameBytes.
	for range maxPooledFrameBytes/(8<<20) + 2 {
		putFrameBuf(make([]byte, 8<<20))
	}
	framePool.mu.Lock()
	held := framePool.bytes
	framePool.mu.Unlock()
	if held > maxPooledFrameBytes {
		t.Errorf("pool holds %d bytes, bound %d", held, maxPooledFrameBytes)
	}
	for getFrameBuf(8<<20) != nil {
	}
	putFrameBuf(make([]byte, 1<<9))  // too small to pool: dropped
	putFrameBuf(make([]byte, 1<<25)) // too large to pool: dropped
	if got := getFrameBuf(1 << 9); got != nil {
		t.Fatal("a 512-byte buffer was pooled")
	}
}

// TestGrowFrameCap checks that a growing frame never gets more than twice
// the bytes it holds, and that frames of pooled sizes end in a buffer
// their class's later frames fit.
func TestGrowFrameCap(t *testing.T) {
	for _, n := range []int{64<<10 + 1, 100 << 10, 1<<20 - 1, 1 << 20, 3<<20 + 7, 1 << 24, 1<<24 + 1, 100 << 20} {
		c := firstFrameCap
		for c < n {
			next := growFrameCap(c, n)
			if next > 2*c || next <= c {
				t.Fatalf("n=%d: grew %d to %d", n, c, next)
			}
			c = next
		}
		if n <= 1<<maxPooledFrameShift && c&(c-1) != 0 {
			t.Fatalf("n=%d: final capacity %d is not a power of two", n, c)
		}
		if n > 1<<maxPooledFrameShift && c != n {
			t.Fatalf("n=%d: final capacity %d, want exactly n", n, c)
		}
	}
}

// TestPipelinedLargeFrames sends produce frames larger than the smallest
// pooled size back to back in one write, after a first one has left a
// buffer in the pool: each frame must be read to its own end and no
// further, whatever room its buffer has, so that every request is
// answered in order.
func TestPipelinedLargeFrames(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "pipelined", 1, nil)
	batch := benchBatch(t, 100, 1024) // about 100 KiB
	frame := func(corr int32) []byte {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = 1
		req.TimeoutMillis = 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "pipelined"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return encodeRequest(req, corr)
	}
	c := dialRaw(t, ts.addr)
	read := func(corr int32, wantOffset int64) {
		t.Helper()
		resp, err := protocol.ReadFrame(c.nc, 1<<30, nil)
		if err != nil {
			t.Fatalf("response %d: %v", corr, err)
		}
		if got := int32(binary.BigEndian.Uint32(resp)); got != corr {
			t.Fatalf("response for correlation id %d, want %d", got, corr)
		}
		var pr kmsg.ProduceResponse
		pr.Version = 9
		if err := pr.ReadFrom(resp[4+1:]); err != nil {
			t.Fatalf("decode response %d: %v", corr, err)
		}
		p := pr.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != wantOffset {
			t.Fatalf("response %d: error %d, base offset %d, want 0 and %d", corr, p.ErrorCode, p.BaseOffset, wantOffset)
		}
	}
	c.write(frame(1))
	read(1, 0)
	var all []byte
	for corr := int32(2); corr <= 5; corr++ {
		all = append(all, frame(corr)...)
	}
	c.write(all)
	for corr := int32(2); corr <= 5; corr++ {
		read(corr, int64(corr-1)*100)
	}
}

// TestFramePoolEmptiesWhenIdle checks that buffers nobody asked for
// within frameIdle are dropped, so an idle broker keeps no frame memory.
func TestFramePoolEmptiesWhenIdle(t *testing.T) {
	putFrameBuf(make([]byte, 1<<20))
	deadline := time.Now().Add(4*frameIdle + time.Second)
	for {
		framePool.mu.Lock()
		held, armed := framePool.bytes, framePool.sweep != nil
		framePool.mu.Unlock()
		if held == 0 && !armed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool still holds %d bytes %v after the last put", held, 4*frameIdle+time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFramePoolHoldsManyPartitionWorkingSet replays the produce frame
// sizes measured at 1,000 partitions (gregor perf produce --partitions
// 1000, idempotent, acks=all: frames of 3 to 17 MB) through the pool, each buffer grown as readBody grows it and
// given back a few frames later, as the answers are written. Once the
// first round has filled it, the pool must serve every frame: with the
// earlier 32 MiB bound half of these frames missed, and each miss cost
// its zeroing, the copies of doubling and fresh pages (15% of the
// broker's CPU per GiB at 1,000 partitions, docs/performance.md).
func TestFramePoolHoldsManyPartitionWorkingSet(t *testing.T) {
	framePool.mu.Lock()
	for i := range framePool.free {
		framePool.free[i] = nil
	}
	framePool.bytes = 0
	framePool.mu.Unlock()

	sizesKiB := []int{14660, 17330, 3325, 3327, 7468, 6446, 12596, 6768, 5936, 11279}
	const inFlight = 1 // the next frame is read while one is answered
	var held [][]byte
	misses := 0
	for round := range 4 {
		for _, kib := range sizesKiB {
			n := kib << 10
			b := getFrameBuf(n)
			if b == nil {
				if round > 0 {
					misses++
				}
				c := firstFrameCap
				for c < n {
					c = growFrameCap(c, n)
				}
				b = make([]byte, 0, c)
			}
			held = append(held, b[:n])
			if len(held) > inFlight {
				putFrameBuf(held[0])
				held = held[1:]
			}
		}
	}
	for _, b := range held {
		putFrameBuf(b)
	}
	if misses > 0 {
		t.Errorf("%d of %d frames missed the pool after the first round", misses, 3*len(sizesKiB))
	}
}

// TestFramePoolServesSmallProduceFrames replays produce frames of the
// end-to-end benchmark's sizes (gregor perf e2e, linger 0, 16 partitions,
// 1 KiB records: one record at 10,000 msg/s, up to a dozen or more at
// 50,000, some 4,000 frames a second) through the pool, one frame in
// flight and the next being read, each new buffer made as readBody makes
// it. Only the pool's first buffers may be allocated: at most two per size
// class the frames span (1 to 32 KiB). Allocated afresh, these frames were
// most of the broker's allocations and set its garbage collections' pace;
// buffers of exactly their frame's size missed for most frames of random
// sizes.
func TestFramePoolServesSmallProduceFrames(t *testing.T) {
	framePool.mu.Lock()
	for i := range framePool.free {
		framePool.free[i] = nil
	}
	framePool.bytes = 0
	framePool.mu.Unlock()

	rng := rand.New(rand.NewPCG(1, 2))
	const frames, classes = 2000, 6
	var held [][]byte
	misses := 0
	for range frames {
		n := 150 + (1+rng.IntN(16))*1140 + rng.IntN(200) // 1 to 16 records
		b := getFrameBuf(n)
		if b == nil {
			misses++
			b = make([]byte, 0, newFrameCap(n, 0))
		}
		if cap(b) < n || cap(b) > 2*n {
			t.Fatalf("frame of %d bytes in a buffer of %d", n, cap(b))
		}
		held = append(held, b[:n])
		if len(held) > 1 {
			putFrameBuf(held[0])
			held = held[1:]
		}
	}
	if misses > 2*classes {
		t.Errorf("%d of %d frames missed the pool, want at most %d", misses, frames, 2*classes)
	}
}
