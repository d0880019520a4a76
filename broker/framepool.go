package broker

import (
	"math/bits"
	"sync"
	"time"
)

// Produce frames are the broker's largest and most frequent allocations:
// a client with many partitions sends requests of a megabyte or more, and
// a fresh buffer for each costs its zeroing, the copies of readBody's
// doubling and the garbage collector's time. Their buffers are kept for
// the next frame instead, by power-of-two size class, up to
// maxPooledFrameBytes in all: a sync.Pool would not do, since every
// garbage collection empties it, and one large buffer allocated on a miss
// is enough to start one. A buffer unused for frameIdle is dropped, so
// that an idle broker holds none.
//
// Only Produce frames go back to the pool, and only once their slot is
// finished (the response written or abandoned, so every phase of the
// handler has returned): the records of a produce are written to the log
// by their handler and nothing keeps a slice of them after it, whereas
// other requests' []byte fields (a JoinGroup's protocol metadata, a
// SyncGroup's assignments) are kept by the coordinators past the answer.
const (
	// minPooledFrameShift is 1 KiB, a produce of one record: with
	// linger 0 a producer at 50,000 msg/s over 16 partitions sends some
	// 4,000 frames a second of about 12 KiB, and allocating each afresh
	// made their bytes most of the broker's allocations, a garbage
	// collection every 0.1 s or less (each a stop of the world that a
	// request in flight waits out).
	minPooledFrameShift = 10
	maxPooledFrameShift = 24 // 16 MiB: larger ones are rare enough to leave to the GC
	// maxPooledFrameBytes bounds the memory kept for frames to come. At
	// 1,000 partitions an idempotent producer's frames are 3-17 MB and a
	// 32 MiB bound dropped half of them on their way back, each miss
	// costing zeroing, doubling copies and fresh pages (15% of the CPU
	// per GiB; TestFramePoolHoldsManyPartitionWorkingSet). An idle broker
	// still holds none after 2*frameIdle.
	maxPooledFrameBytes = 64 << 20
	// frameIdle is how long a buffer is kept unused: a broker whose
	// producers stopped gives the memory back (to the GC, and so to the
	// OS) within twice this.
	frameIdle = 2 * time.Second
	// maxFrameScan bounds the buffers getFrameBuf looks at in a class.
	maxFrameScan = 8
)

// pooledFrame is a free buffer and when it was freed.
type pooledFrame struct {
	buf   []byte
	freed time.Time
}

// framePool is the process's pool of frame buffers.
var framePool struct {
	mu sync.Mutex
	// free[i] holds buffers whose capacity is at least
	// 1<<(i+minPooledFrameShift), the most recently freed last.
	free  [maxPooledFrameShift - minPooledFrameShift + 1][]pooledFrame
	bytes int         // the capacity of every buffer in free
	sweep *time.Timer // armed while free holds a buffer
}

// getFrameBuf returns an empty pooled buffer that can hold n bytes, or nil
// when n is outside the pooled sizes or no buffer that fits is free. It
// looks first in n's own class, where a client's frames of the same size
// land (a buffer grown by readBody to exactly n is pooled there), then in
// the next, whose buffers all fit.
func getFrameBuf(n int) []byte {
	if n <= 0 {
		return nil
	}
	lo := max(bits.Len(uint(n))-1, minPooledFrameShift)
	hi := min(bits.Len(uint(n-1)), maxPooledFrameShift)
	framePool.mu.Lock()
	defer framePool.mu.Unlock()
	for class := lo; class <= hi; class++ {
		list := framePool.free[class-minPooledFrameShift]
		// The most recently freed few: a class of small buffers may
		// hold thousands, and in n's own class those before them are
		// no likelier to fit.
		for i := len(list) - 1; i >= max(0, len(list)-maxFrameScan); i-- {
			if b := list[i].buf; cap(b) >= n {
				copy(list[i:], list[i+1:])
				list[len(list)-1] = pooledFrame{}
				framePool.free[class-minPooledFrameShift] = list[:len(list)-1]
				framePool.bytes -= cap(b)
				return b[:0]
			}
		}
	}
	return nil
}

// putFrameBuf keeps b for a later frame no larger than its capacity's
// class, unless the pool is full. The caller must hold no slice of b
// afterwards.
func putFrameBuf(b []byte) {
	class := bits.Len(uint(cap(b))) - 1 // the largest k with 1<<k <= cap(b)
	if class < minPooledFrameShift || class > maxPooledFrameShift {
		return
	}
	framePool.mu.Lock()
	defer framePool.mu.Unlock()
	if framePool.bytes+cap(b) > maxPooledFrameBytes {
		return
	}
	framePool.bytes += cap(b)
	i := class - minPooledFrameShift
	framePool.free[i] = append(framePool.free[i], pooledFrame{buf: b[:0], freed: time.Now()})
	if framePool.sweep == nil {
		framePool.sweep = time.AfterFunc(frameIdle, sweepFrames)
	}
}

// sweepFrames drops the buffers unused for frameIdle, and runs again
// while any is left.
func sweepFrames() {
	framePool.mu.Lock()
	defer framePool.mu.Unlock()
	cutoff := time.Now().Add(-frameIdle)
	for i, list := range framePool.free {
		keep := list[:0]
		for _, f := range list {
			if f.freed.After(cutoff) {
				keep = append(keep, f)
			} else {
				framePool.bytes -= cap(f.buf)
			}
		}
		clear(list[len(keep):])
		framePool.free[i] = keep
	}
	if framePool.bytes > 0 {
		framePool.sweep.Reset(frameIdle)
		return
	}
	framePool.sweep = nil
}

// newFrameCap is the capacity of a fresh buffer for a frame of n bytes
// when the pool has none that fits, ahead being the bytes already read
// ahead. A frame of a pooled size up to firstFrameCap gets the whole of
// its size class, a power of two, so that once pooled the buffer fits
// every later frame of that class: a producer's frames differ by a record
// or two, and a buffer of exactly n would fit only those no larger. A
// larger frame starts at firstFrameCap and grows as its bytes arrive
// (growFrameCap).
func newFrameCap(n, ahead int) int {
	if n >= 1<<minPooledFrameShift && n <= firstFrameCap {
		return 1 << bits.Len(uint(n-1))
	}
	return min(n, max(firstFrameCap, ahead))
}

// growFrameCap is the capacity readBody grows a frame's buffer to once the
// bytes received fill it: double, so that no more is allocated than twice
// what the client sent. A frame of a pooled size may end in a buffer up to
// twice its size, which then fits every frame of its class; a larger one
// stops at n.
func growFrameCap(cur, n int) int {
	if n <= 1<<maxPooledFrameShift {
		return 2 * cur
	}
	return min(2*cur, n)
}
