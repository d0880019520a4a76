package broker

import (
	"math/bits"
	"sync"
)

// Produce frames are the broker's largest and most frequent allocations:
// a client with many partitions sends requests of a megabyte or more, and
// a fresh buffer for each costs its zeroing, the copies of readBody's
// doubling and the garbage collector's time. Their buffers are pooled by
// power-of-two size class instead.
//
// Only Produce frames go back to the pool, and only once their slot is
// finished (the response written or abandoned, so every phase of the
// handler has returned): the records of a produce are written to the log
// by their handler and nothing keeps a slice of them after it, whereas
// other requests' []byte fields (a JoinGroup's protocol metadata, a
// SyncGroup's assignments) are kept by the coordinators past the answer.
const (
	minPooledFrameShift = 16 // 64 KiB: smaller frames cost little to allocate
	maxPooledFrameShift = 24 // 16 MiB: larger ones are rare enough to leave to the GC
)

// framePools[i] holds buffers whose capacity is at least 1<<(i+minPooledFrameShift).
var framePools [maxPooledFrameShift - minPooledFrameShift + 1]sync.Pool

// getFrameBuf returns an empty pooled buffer that can hold n bytes, or nil
// when n is outside the pooled sizes or no buffer that fits is free. It
// looks first in n's own class, where a client's frames of the same size
// land (a buffer grown by readBody to exactly n is pooled there), then in
// the next, whose buffers all fit.
func getFrameBuf(n int) []byte {
	if n <= 0 {
		return nil
	}
	class := max(bits.Len(uint(n))-1, minPooledFrameShift)
	for ; class <= min(bits.Len(uint(n-1)), maxPooledFrameShift); class++ {
		pool := &framePools[class-minPooledFrameShift]
		v, _ := pool.Get().(*[]byte)
		if v == nil {
			continue
		}
		if cap(*v) >= n {
			return (*v)[:0]
		}
		pool.Put(v)
	}
	return nil
}

// putFrameBuf pools b for a later frame no larger than its capacity's
// class. The caller must hold no slice of b afterwards.
func putFrameBuf(b []byte) {
	class := bits.Len(uint(cap(b))) - 1 // the largest k with 1<<k <= cap(b)
	if class < minPooledFrameShift || class > maxPooledFrameShift {
		return
	}
	b = b[:0]
	framePools[class-minPooledFrameShift].Put(&b)
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
