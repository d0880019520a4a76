package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/protocol"
)

// What a connection costs while it waits, and what its requests may hold.
//
// An idle connection holds no buffer: the reader waits for the first byte
// of the next request with a one-byte read, and the writer's buffer goes
// back to a pool once everything is sent. Once a request's first byte is
// there, a pooled read-ahead buffer serves the size and small pipelined
// requests, and each frame's own buffer grows as its bytes arrive, so a
// client that declares 100 MB and sends 1 KB holds about 1 KB; the whole
// frame must arrive within frameReadTimeout. Frames read and not yet
// answered are bounded broker-wide by queued.max.request.bytes.

// frameReadTimeout is how long the rest of a request may take to arrive
// once its first byte has. Kafka has no such bound (a partial request
// there counts as activity against connections.max.idle.ms), which lets a
// frame sent but for its last byte hold its buffer for good. A minute
// passes a 100 MB request (socket.request.max.bytes) at under 2 MB/s.
const frameReadTimeout = time.Minute

// readAheadSize is the pooled read-ahead buffer a connection holds while
// requests arrive, and firstFrameCap the most a frame's buffer starts at
// before its bytes arrive.
const (
	readAheadSize = 16 << 10
	firstFrameCap = 64 << 10
	writeBufSize  = 32 << 10
)

var (
	readAheadPool = sync.Pool{New: func() any { b := make([]byte, readAheadSize); return &b }}
	writerPool    = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufSize) }}
)

// netLimits are the broker-wide bounds on requests in flight, made on the
// first connection from the configuration.
type netLimits struct {
	once sync.Once
	// bytes is queued.max.request.bytes; nil when unlimited (-1, Kafka's
	// default).
	bytes *byteBudget
	// queued holds a token for each request being processed: read whole
	// and not yet through the first phase of its handler. Its capacity is
	// queued.max.requests. Kafka bounds the requests the network threads
	// have read and the handler threads not yet taken; a request parked
	// in purgatory (a long poll, a JoinGroup) is not in that queue, and
	// here a request in its wait phase holds no token either. Each
	// connection has at most maxInFlight requests unanswered besides.
	queued chan struct{}
	// frameTimeout and idleTimeout are frameReadTimeout and
	// connections.max.idle.ms, in nanoseconds; tests shorten them.
	frameTimeout atomic.Int64
	idleTimeout  atomic.Int64
	// parkAfter is parkAfter in nanoseconds; tests shorten it.
	parkAfter atomic.Int64
}

// limits returns the server's netLimits, made on first use.
func (s *Server) limits() *netLimits {
	l := &s.netLimits
	l.once.Do(func() {
		if n := s.cfg.QueuedMaxRequestBytes; n > 0 {
			l.bytes = newByteBudget(n)
		}
		l.queued = make(chan struct{}, max(s.cfg.QueuedMaxRequests, 1))
		l.frameTimeout.Store(int64(frameReadTimeout))
		l.parkAfter.Store(int64(parkAfter))
		idle := time.Duration(s.cfg.ConnectionsMaxIdleMs) * time.Millisecond
		if s.cfg.ConnectionsMaxIdleMs < 0 {
			idle = 0 // Kafka: -1 never closes idle connections
		}
		l.idleTimeout.Store(int64(idle))
	})
	return l
}

// byteBudget is queued.max.request.bytes: bytes of requests read and not
// yet answered. Like Kafka's memory pool (SimpleMemoryPool, not strict) a
// frame is admitted whenever some budget is left, even if it is larger,
// so one request larger than the budget still gets through, alone.
type byteBudget struct {
	mu    sync.Mutex
	avail int64
	freed chan struct{} // closed and replaced at each release
}

func newByteBudget(n int64) *byteBudget {
	return &byteBudget{avail: n, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting while none is left.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.avail > 0 {
			b.avail -= n
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *byteBudget) release(n int64) {
	b.mu.Lock()
	b.avail += n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// errIdle is a connection closed for connections.max.idle.ms.
var errIdle = errors.New("idle past connections.max.idle.ms")

// frameReader reads request frames from a connection. Its read-ahead
// buffer is held only while unread bytes are in it.
type frameReader struct {
	c     *conn
	ahead *[]byte
	r, w  int
	first [1]byte
	// pre checks a large Produce frame's batches as its bytes arrive
	// (produce_precheck.go); its verdicts are those of the last frame.
	pre *producePrecheck // made on the first large frame: most connections never send one
	// quietSince is when the wait for the next request started (zero
	// while a request is read), parked whether that wait has been handed
	// to a fresh goroutine (wait).
	quietSince time.Time
	parked     bool
}

// waitFirstByte blocks until the next request's first byte arrives and
// puts it in the read-ahead buffer. While it waits nothing is held; it
// gives up with errIdle once the connection has been idle, with no
// request unanswered, for the idle timeout.
func (fr *frameReader) waitFirstByte() error { return fr.wait(false) }

// parkAfter is how long a connection waits for its next request on the
// goroutine that served the last one before readLoop hands it to a fresh
// goroutine (errPark). Serving a request grows a goroutine's stack to
// 4-8 KiB, and the runtime never shrinks a stack whose frames plus its
// 800-byte guard take a quarter of it, so an idle reader would keep 4 KiB
// for good; a goroutine started to wait has the runtime's starting size,
// the average stack in use, 2 KiB once most goroutines are idle readers:
// 20 MB less over 10,000 idle connections. Ten seconds keeps the hand-over
// off connections in use: a consumer's long polls, a producer's batches
// and client metadata refreshes come sooner.
const parkAfter = 10 * time.Second

// monoBase makes monotonic instants fit an atomic.Int64 (monoSince).
var monoBase = time.Now()

// monoSince is now as nanoseconds since monoBase, on the monotonic clock.
func monoSince() int64 { return int64(time.Since(monoBase)) }

// monoTime is the instant of a monoSince reading.
func monoTime(ns int64) time.Time { return monoBase.Add(time.Duration(ns)) }

// errPark is wait's answer when the connection has been quiet for
// parkAfter on the goroutine that served its last request.
var errPark = errors.New("quiet: hand the connection to a fresh goroutine")

// wait is waitFirstByte; with park it also returns errPark once per quiet
// spell, after parkAfter, so that readLoop moves the wait to a goroutine
// with a small stack. The idle timeout counts from the start of the spell
// across the hand-over.
func (fr *frameReader) wait(park bool) error {
	c := fr.c
	if fr.r < fr.w {
		// The next request is already here, pipelined: its own frame
		// timeout starts now.
		return c.nc.SetReadDeadline(time.Now().Add(time.Duration(c.limits.frameTimeout.Load())))
	}
	if fr.ahead != nil {
		readAheadPool.Put(fr.ahead)
		fr.ahead, fr.r, fr.w = nil, 0, 0
	}
	for {
		if fr.quietSince.IsZero() {
			fr.quietSince = time.Now()
		}
		idle := time.Duration(c.limits.idleTimeout.Load())
		deadline := time.Time{}
		if idle > 0 {
			deadline = fr.quietSince.Add(idle)
		}
		parkAt := fr.quietSince.Add(time.Duration(c.limits.parkAfter.Load()))
		parking := park && !fr.parked && (deadline.IsZero() || parkAt.Before(deadline))
		wait := deadline
		if parking {
			wait = parkAt
		}
		if err := c.nc.SetReadDeadline(wait); err != nil {
			return err
		}
		n, err := c.nc.Read(fr.first[:])
		if n == 1 {
			fr.quietSince, fr.parked = time.Time{}, false
			fr.ahead = readAheadPool.Get().(*[]byte)
			(*fr.ahead)[0] = fr.first[0]
			fr.r, fr.w = 0, 1
			return c.nc.SetReadDeadline(time.Now().Add(time.Duration(c.limits.frameTimeout.Load())))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if parking {
				fr.parked = true
				return errPark
			}
			if c.pending.Load() > 0 {
				// A request still unanswered: the client waits on us, and
				// its idle time starts again.
				fr.quietSince = time.Time{}
				continue
			}
			// A request answered during the spell (a long poll) is the
			// connection's last activity, as the write of a response is
			// in Kafka's idle expiry: a client that has just read its
			// answer must get the whole idle time to send the next.
			if at := monoTime(c.answeredAt.Load()); at.After(fr.quietSince) {
				fr.quietSince = at
				continue
			}
			return errIdle
		}
		if err != nil {
			return err
		}
	}
}

// verdicts are what the last frame's precheck found (nil without one).
func (fr *frameReader) verdicts() []batchVerdict {
	if fr.pre == nil {
		return nil
	}
	return fr.pre.verdicts
}

// release gives the read-ahead buffer back when the connection ends, and
// drops the precheck's state.
func (fr *frameReader) release() {
	if fr.ahead != nil {
		readAheadPool.Put(fr.ahead)
		fr.ahead = nil
	}
	fr.pre = nil
}

// fill reads into the read-ahead buffer until at least need bytes are
// unread.
func (fr *frameReader) fill(need int) error {
	buf := *fr.ahead
	if len(buf)-fr.r < need {
		fr.w = copy(buf, buf[fr.r:fr.w])
		fr.r = 0
	}
	for fr.w-fr.r < need {
		n, err := fr.c.nc.Read(buf[fr.w:])
		fr.w += n
		if err != nil && fr.w-fr.r < need {
			return err
		}
	}
	return nil
}

// readSize reads the size prefix of the next frame, checking it against
// max before anything is allocated for the frame.
func (fr *frameReader) readSize(max int32) (int32, error) {
	if err := fr.fill(4); err != nil {
		return 0, unexpectedEOF(err)
	}
	n := int32(binary.BigEndian.Uint32((*fr.ahead)[fr.r:]))
	fr.r += 4
	switch {
	case n < 0:
		return 0, fmt.Errorf("%w: %d", protocol.ErrFrameSize, n)
	case n > max:
		return 0, fmt.Errorf("%w: %d > %d", protocol.ErrFrameTooLarge, n, max)
	}
	return n, nil
}

// readBody reads a frame of n bytes: first what the read-ahead buffer
// holds, then straight from the socket into the frame's buffer: a pooled
// one that fits n (framepool.go), or one that doubles as bytes arrive
// instead of being allocated at n up front.
//
// A large Produce frame is prechecked as it arrives: each batch's CRC is
// computed right after the read that brought its bytes, while they are
// in the CPU's cache (produce_precheck.go).
func (fr *frameReader) readBody(n int32) ([]byte, error) {
	frame := getFrameBuf(int(n))
	if frame == nil {
		frame = make([]byte, 0, newFrameCap(int(n), fr.w-fr.r))
	}
	k := min(int(n), fr.w-fr.r)
	frame = append(frame, (*fr.ahead)[fr.r:fr.r+k]...)
	fr.r += k
	if fr.pre != nil {
		fr.pre.reset()
	}
	decided := false
	for {
		if !decided && len(frame) >= 4 {
			decided = true
			if n >= precheckMinFrame {
				if fr.pre == nil {
					fr.pre = &producePrecheck{}
				}
				fr.pre.start(frame, int(n), int(fr.c.s.cfg.SocketRequestMaxBytes))
			}
		}
		if fr.pre != nil && fr.pre.active() {
			fr.pre.advance(frame)
		}
		if len(frame) >= int(n) {
			break
		}
		if len(frame) == cap(frame) {
			next := make([]byte, len(frame), growFrameCap(cap(frame), int(n)))
			copy(next, frame)
			frame = next
		}
		// Never past n: what follows is the next frame's, and a pooled
		// or doubled buffer has room for it.
		m, err := fr.c.nc.Read(frame[len(frame):min(cap(frame), int(n))])
		frame = frame[:len(frame)+m]
		if err != nil && len(frame) < int(n) {
			return nil, unexpectedEOF(err)
		}
	}
	return frame, nil
}

// unexpectedEOF turns io.EOF met inside a frame into io.ErrUnexpectedEOF,
// the client leaving mid-request, and names a frame that took too long.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %w", errFrameTimeout, err)
	}
	return err
}

// errFrameTimeout is a request whose frame did not arrive whole within
// frameReadTimeout of its first byte.
var errFrameTimeout = errors.New("request not received whole in time after its first byte")
