package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/fetch"
	"github.com/gregorbroker/gregor/broker/internal/metrics"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/security"
)

// maxInFlight bounds how many requests of one connection may be read ahead
// of their responses; past it the reader stops reading, which pushes back
// on the client instead of buffering without limit.
// Kafka reads one request of a connection at a time; 16 is more than a
// client pipelines (Java's max.in.flight.requests.per.connection is 5)
// and keeps an idle connection's queue at 224 bytes (640 at 64).
const maxInFlight = 16

// conn is one client connection: a reader goroutine that parses requests
// and runs the first phase of each handler in connection order, and a
// writer goroutine that sends responses in that same order as each one
// completes.
type conn struct {
	s        *Server
	nc       net.Conn
	listener string // the name of the listener it came through
	log      *slog.Logger
	slots    chan *slot
	ctx      context.Context
	cancel   context.CancelFunc
	// raw is the socket's RawConn, through which the writer sends fetched
	// records with sendfile; nil when it cannot (broker/internal/fetch).
	raw syscall.RawConn
	// lastInOrder is closed when the connection's latest coordinator
	// request has been answered (serial.go); touched only by the reader.
	lastInOrder chan struct{}
	// pending counts requests read and not yet answered (or abandoned),
	// so the idle timeout never closes a connection that waits on us.
	pending atomic.Int32
	// writing is true while a goroutine runs the writer (kickWriter,
	// answer, resume); writers counts the writer's runs and its parked
	// slot, and serveConn waits for it at the connection's end. (writing
	// sits beside pending, in what would be padding: an idle conn is
	// then 320 bytes, a size class below 352.)
	writing atomic.Bool
	// answeredAt is when the last request stopped being pending
	// (monoSince), from which the idle timeout counts if it is later
	// than the start of the reader's quiet spell.
	answeredAt atomic.Int64
	limits     *netLimits
	writers    sync.WaitGroup
	// parkMu guards parked: the slot at the head of the response order
	// whose response was not ready when the writer reached it. The
	// writer leaves it there and stops instead of waiting for it, and the
	// goroutine that completes the response writes it (resume), one
	// thread wake-up less for a long poll's answer. Only a goroutine
	// that holds writing sets it; parking and taking it back happen
	// under parkMu with the change of writing, so exactly one goroutine
	// resumes the writer. The parked slot carries one count of writers.
	parkMu sync.Mutex
	parked *slot
	// inlineWriter is true while the reader itself runs the writer
	// (answer); only the reader's goroutine sets or reads it.
	inlineWriter bool
	// principal is who the connection authenticated as (security.go):
	// User:ANONYMOUS on PLAINTEXT.
	principal security.Principal
	// sasl is the connection's SASL session, nil on a listener without
	// SASL; only the reader touches it (re-authentication, sasl_reauth.go).
	sasl *saslSession
	// throttledUntil is when a client over its quota may send again, in
	// Unix nanoseconds (quota.go); the reader waits for it.
	throttledUntil atomic.Int64
	// id numbers the connection among the server's; shareSessions is set
	// once a ShareFetch opened a share session on it, which the
	// connection's end closes (shares.go).
	id            uint64
	shareSessions atomic.Bool
	// fetchSendBuffer is set once a fetch has sized the socket's send
	// buffer for its responses (sizeFetchConn); only the reader touches
	// it.
	fetchSendBuffer bool
	// follower is set once a replica fetch came on the connection (a
	// follower's own, with one request in flight at a time): its large
	// zero-copy answers are written by the reader too (answer); only the
	// reader touches it.
	follower bool
	// fr reads the request frames; only the reader touches it.
	fr frameReader
	// done releases what the accept loop holds for the connection once
	// it has ended (serveConn).
	done func()
}

// slot is the place of one request in the connection's response order.
type slot struct {
	done          chan struct{}
	correlationID int32
	resp          kmsg.Response // nil: no response is written (acks=0)
	closeConn     bool          // set when the handler failed in a way that ends the connection
	frameBytes    int64         // taken from queued.max.request.bytes until answered
	key           int16         // the request's API key, for its metrics
	read          time.Time     // when the request's frame was read; zero: not counted
	// The ends of the request's phases (metrics.RequestTimes), after
	// read: its handler started, its first phase done, its response
	// ready, the writer taking it. Each is written before what hands the
	// slot on to the goroutine reading it (the slots channel, done's
	// close), so they need no lock.
	started, localDone, ready, taken time.Duration
	// throttle is the response's throttle_time_ms, read when the writer
	// takes it (a fetch response is pooled again once written).
	throttle time.Duration
	// quota is who the request's time counts against under
	// request_percentage (quota.go); nil without such quotas.
	quota *requestQuota
	// frame is a Produce request's frame, pooled again once the slot is
	// finished (framepool.go); nil for every other request.
	frame []byte
}

// serveConn serves one accepted connection until it ends. It sets the
// connection up in newConn, which returns before the first request is
// awaited: the idle connection's goroutine keeps only small frames on its
// stack (readLoop).
// done, if not nil, is called once the connection has ended, from the
// goroutine that served it last.
func (s *Server) serveConn(nc net.Conn, listener string, done func()) {
	c := s.newConn(nc, listener)
	if c == nil {
		if done != nil {
			done()
		}
		return
	}
	c.done = done
	c.serve()
}

// newConn authenticates an accepted connection (TLS, SASL) and makes its
// conn; nil when authentication failed and the connection was closed.
func (s *Server) newConn(nc net.Conn, listener string) *conn {
	nc, principal, sess, err := s.secureConn(nc, listener)
	if err != nil {
		s.logFailedAuth(nc, listener, err)
		s.closeFailedAuth(nc, err)
		return nil
	}
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{
		s:         s,
		nc:        nc,
		listener:  listener,
		principal: principal,
		sasl:      sess,
		log:       attrLogger(s.log, "remote", nc.RemoteAddr().String()),
		slots:     make(chan *slot, maxInFlight),
		ctx:       ctx,
		cancel:    cancel,
		limits:    s.limits(),
		id:        s.connIDs.Add(1),
	}
	c.fr.c = c
	if sc, ok := nc.(syscall.Conn); ok && fetch.HaveSendfile {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	return c
}

// serve reads the connection's requests until it ends, then answers or
// abandons what is queued and closes it. A connection quiet for
// parkAfter is handed to a fresh goroutine, which calls serve again, and
// this one ends (see parkAfter).
func (c *conn) serve() {
	if c.readLoop() {
		c.s.goTracked(c.serve)
		return
	}
	c.fr.release()
	// The client is gone or misbehaved: stop what its requests wait for
	// (a parked JoinGroup, a long poll) instead of letting them run out.
	c.cancel()
	c.closeShareSessions()
	close(c.slots)
	c.kickWriter() // to answer or abandon what is queued, and see the close
	c.writers.Wait()
	c.nc.Close()
	if c.done != nil {
		c.done()
	}
}

// kickWriter starts the writer goroutine unless it runs. The writer runs
// only while responses are ready to send, so an idle connection, or one
// waiting on a long poll, costs one goroutine, its reader's.
func (c *conn) kickWriter() {
	if c.writing.CompareAndSwap(false, true) {
		c.writers.Add(1)
		go c.runWriter(nil)
	}
}

// resume runs the writer on the calling goroutine, which has just
// completed sl's response, when sl is the parked head of the response
// order and no writer runs: the answer of a long poll is written by the
// goroutine that made it rather than handed to another one. It returns
// at once otherwise (a writer running will take sl itself).
func (c *conn) resume(sl *slot) {
	c.parkMu.Lock()
	ok := c.parked == sl && c.writing.CompareAndSwap(false, true)
	if ok {
		c.parked = nil
	}
	c.parkMu.Unlock()
	if ok {
		// The parked slot's count of writers is this run's.
		c.runWriter(sl)
	}
}

// park leaves sl, whose response is not ready, at the head of the
// response order and stops the writer, which must hold writing. It
// reports false when the writer must go on with sl after all: its
// response came, or the connection ended, between the check and the
// park, and no other goroutine took the writer meanwhile.
func (c *conn) park(sl *slot) bool {
	c.parkMu.Lock()
	c.parked = sl
	c.writing.Store(false)
	c.parkMu.Unlock()
	select {
	case <-sl.done:
	default:
		if c.ctx.Err() == nil {
			return true
		}
	}
	// The completer (or the connection's end) may have looked before
	// the slot was parked: take it back unless someone else did.
	c.parkMu.Lock()
	defer c.parkMu.Unlock()
	if c.parked != sl || !c.writing.CompareAndSwap(false, true) {
		return true
	}
	c.parked = nil
	return false
}

// takeParked returns the parked slot, if any, for a writer that has just
// started: it is the first in the response order. Its count of writers
// is dropped, the writer having its own.
func (c *conn) takeParked() *slot {
	c.parkMu.Lock()
	sl := c.parked
	c.parked = nil
	c.parkMu.Unlock()
	if sl != nil {
		c.writers.Done()
	}
	return sl
}

// answer sends the response of sl, just queued, from the reader's own
// goroutine when it is the only one queued, already complete and small
// (not many records sent from files, which can take long to write): a
// Produce, metadata or small fetch answer then reaches the socket without waking a writer
// goroutine, a hop that costs a thread wake-up on a busy machine. A
// response not ready yet (a long poll) is parked by the same inline run,
// which never waits for it, and written later by the goroutine that
// completes it (resume). Any other response goes to the writer
// goroutine. The reader reads no further request meanwhile, which a
// client with one request in flight does not notice: a follower, whose
// megabyte of records the reader sends too (a replica fetch that finds
// records at once, as most do at full speed, is then answered without
// waking a writer goroutine on the path an acks=all produce waits for).
func (c *conn) answer(sl *slot) {
	if len(c.slots) == 1 && inlineAnswer(sl, c.follower) && c.writing.CompareAndSwap(false, true) {
		c.writers.Add(1)
		c.inlineWriter = true
		ended := c.runWriter(nil)
		c.inlineWriter = false
		if ended {
			// The write failed and the writer ended holding the flag: hand
			// it back so that the kick at the reader's end starts a writer
			// that abandons whatever is queued until the queue closes.
			c.writing.Store(false)
		}
		return
	}
	c.kickWriter()
}

// inlineAnswer reports whether a queued slot's response is ready and
// small enough for the reader to write it, or not ready, so that the
// reader only parks it (see answer). Any ready answer is small enough
// for a follower's connection (anyRecords).
func inlineAnswer(sl *slot, anyRecords bool) bool {
	select {
	case <-sl.done:
	default:
		return true
	}
	if z, ok := sl.resp.(*fetch.ZeroCopyResponse); ok && !anyRecords && z.RecordBytes() > maxInlineRecordBytes {
		return false
	}
	return !sl.closeConn
}

// maxInlineRecordBytes bounds the records of a zero-copy fetch response
// the reader writes itself (answer): a few the socket's send buffer takes
// at once, as a latency-sensitive consumer's fetch brings, go without a
// hop to the writer goroutine; a large one, which may wait on the client
// to read it, goes to the writer so the reader goes on reading.
const maxInlineRecordBytes = 64 << 10

// runWriter runs writeLoop, beginning with first when the caller took
// that slot already (resume), until the connection ends, a response not
// ready stops it (the slot parked), or nothing is queued and no reader
// has queued more since it looked. The caller holds writing and one
// count of writers, which this run gives back, or hands on to the
// parked slot. It reports whether the connection ended, which leaves
// writing set.
func (c *conn) runWriter(first *slot) (ended bool) {
	for {
		switch c.writeLoop(first) {
		case writerEnded:
			c.writers.Done()
			return true
		case writerParked:
			return false
		}
		first = nil
		c.writing.Store(false)
		// A slot queued after writeLoop looked, whose kick saw the writer
		// still running, is picked up here.
		if len(c.slots) == 0 || !c.writing.CompareAndSwap(false, true) {
			c.writers.Done()
			return false
		}
	}
}

// How a writeLoop run ended.
const (
	writerIdle   = iota // nothing queued
	writerParked        // the next response not ready: parked
	writerEnded         // the connection ended
)

// readLoop reads and handles the connection's requests until it ends, or
// until it has been quiet for parkAfter (true: serve moves it to a fresh
// goroutine). It
// waits for each request's first byte in its own small frame, with
// nothing of the last request's handling on the stack: an idle
// connection's goroutine then uses under 1 KiB of stack, which the
// runtime shrinks its stack to fit (2 KiB instead of 4 KiB, 20 MB over
// 10,000 idle connections), and new goroutines start that small too (the
// runtime starts them at the average stack in use).
func (c *conn) readLoop() (parked bool) {
	for {
		if err := c.waitThrottle(); err != nil {
			return false
		}
		if err := c.fr.wait(true); err != nil {
			if err == errPark {
				return true
			}
			c.logReadError(err)
			return false
		}
		if !c.readRequest(&c.fr) {
			return false
		}
	}
}

// logReadError says why reading a request failed, at the level the cause
// deserves.
func (c *conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
	case errors.Is(err, errIdle):
		c.log.Debug("closing idle connection", "idle", time.Duration(c.limits.idleTimeout.Load()))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		// The client went away mid-frame: its business, not bad input.
		c.log.Debug("connection closed by the client", "err", err)
	default:
		c.log.Warn("closing connection: bad frame", "err", err)
	}
}

// readRequest reads the request whose first byte has arrived, starts its
// handler and queues its slot; false when the connection must end.
func (c *conn) readRequest(fr *frameReader) bool {
	frame, n, err := c.readFrame(fr, c.s.cfg.SocketRequestMaxBytes)
	read := time.Now()
	if err != nil {
		c.logReadError(err)
		return false
	}
	if c.sasl != nil && !c.sasl.expiry.IsZero() {
		// KIP-368: a re-authentication, or a request after the
		// session ended, which closes the connection.
		reauth, ok := c.checkSession(fr, frame)
		if reauth || !ok {
			c.releaseBytes(n)
		}
		if !ok || reauth {
			return ok
		}
	}
	// The first phase of a handler runs holding one of the broker's
	// queued.max.requests places.
	select {
	case c.limits.queued <- struct{}{}:
	case <-c.ctx.Done():
		c.releaseBytes(n)
		return false
	}
	sl, ok := c.handleFrame(frame, read, fr.verdicts())
	<-c.limits.queued
	if sl == nil {
		c.releaseBytes(n)
	} else {
		sl.frameBytes = n
		c.pending.Add(1)
		select {
		case c.slots <- sl:
			c.answer(sl)
		case <-c.ctx.Done():
			c.abandon(sl)
			return false
		}
	}
	return ok
}

// readFrame reads the rest of the request frame whose first byte
// waitFirstByte read, each into a buffer of its own
// (handlers keep slices of it, the records of a produce, past this
// iteration), having taken its size from queued.max.request.bytes.
func (c *conn) readFrame(fr *frameReader, maxSize int32) ([]byte, int64, error) {
	size, err := fr.readSize(maxSize)
	if err != nil {
		return nil, 0, err
	}
	n := int64(size)
	if b := c.limits.bytes; b != nil {
		if err := b.acquire(c.ctx, n); err != nil {
			return nil, 0, err
		}
		// The time spent waiting for the budget is the broker's, not the
		// client's.
		if err := c.nc.SetReadDeadline(time.Now().Add(time.Duration(c.limits.frameTimeout.Load()))); err != nil {
			c.releaseBytes(n)
			return nil, 0, err
		}
	}
	frame, err := fr.readBody(size)
	if err != nil {
		c.releaseBytes(n)
		return nil, 0, err
	}
	return frame, n, nil
}

// releaseBytes gives a frame's bytes back to queued.max.request.bytes.
func (c *conn) releaseBytes(n int64) {
	if b := c.limits.bytes; b != nil && n > 0 {
		b.release(n)
	}
}

// finished is called once for each slot queued, when it was answered or
// abandoned: its frame no longer counts against the budgets.
func (c *conn) finished(sl *slot) {
	c.releaseBytes(sl.frameBytes)
	sl.frameBytes = 0
	if sl.frame != nil {
		putFrameBuf(sl.frame)
		sl.frame = nil
	}
	c.answeredAt.Store(monoSince())
	c.pending.Add(-1)
}

// countRequest counts an answered request whose response's last byte
// was written at sent (taken, for a request not answered on the wire).
func (c *conn) countRequest(sl *slot, sent time.Time) {
	if sl.read.IsZero() {
		return
	}
	c.s.ops.metrics.RequestDone(sl.key, metrics.RequestTimes{
		RequestQueue:  sl.started,
		Local:         sl.localDone - sl.started,
		Remote:        sl.ready - sl.localDone,
		ResponseQueue: sl.taken - sl.ready,
		ResponseSend:  max(sent.Sub(sl.read)-sl.taken, 0),
		Throttle:      sl.throttle,
	})
	c.recordResponseTime(sl.quota, max(sent.Sub(sl.read)-sl.taken, 0))
}

// handleFrame parses one request, read off the socket at read, and starts
// its handler. verdicts are what a Produce frame's precheck found of its
// batches as they arrived (produce_precheck.go), visible to the
// handler's first phase, where the batches are validated and appended,
// and withdrawn when it returns. It returns the request's slot (nil when
// nothing is to be answered) and false when the connection must close
// after the slots already queued are answered.
func (c *conn) handleFrame(frame []byte, read time.Time, verdicts []batchVerdict) (*slot, bool) {
	started := time.Since(read)
	key, version, corr, err := protocol.PeekKey(frame)
	if err != nil {
		c.log.Warn("closing connection: bad request header", "err", err)
		return nil, false
	}
	if !c.s.versions.Supports(key, version) {
		if key == apiKeyApiVersions {
			// Kafka answers an ApiVersions of a version it does not know in
			// the v0 form, so that newer clients retry (18_api_versions.go).
			return doneSlot(corr, c.s.unsupportedApiVersionsResponse()), true
		}
		c.log.Warn("closing connection: unsupported request", "api", kmsg.NameForKey(key), "key", key, "version", version)
		return nil, false
	}
	hdr, req, err := protocol.ParseRequest(frame)
	if err != nil {
		c.log.Warn("closing connection: malformed request", "api", kmsg.NameForKey(key), "version", version, "err", err)
		return nil, false
	}
	r := &request{hdr: hdr, req: req, conn: c}
	sl := &slot{done: make(chan struct{}), correlationID: corr, key: key, read: read, started: started}
	if key == apiKeyProduce {
		sl.frame = frame
		c.s.prechecked.add(frame, verdicts)
		defer c.s.prechecked.remove(frame, verdicts)
	}
	res, ok := c.runHandler(r)
	if !ok {
		sl.closeConn = true
		close(sl.done)
		return sl, false
	}
	if key == apiKeyProduce {
		res = c.produceQuota(r, len(frame), res)
	}
	sl.localDone = time.Since(read)
	res, sl.quota = c.recordRequestTime(r, sl.localDone-started, res)
	switch {
	case res.wait != nil:
		c.s.goTracked(func() {
			resp, ok := c.runWait(r, res.wait)
			if hook := c.s.hookAnswered.Load(); hook != nil {
				(*hook)()
			}
			sl.resp = resp
			sl.closeConn = !ok
			sl.ready = time.Since(sl.read)
			close(sl.done)
			c.resume(sl)
		})
	default:
		sl.resp = res.resp
		sl.ready = sl.localDone
		close(sl.done)
	}
	return sl, true
}

// runHandler runs the first phase of a request's handler, turning a panic
// into a closed connection and a log line.
func (c *conn) runHandler(r *request) (res result, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("handler panic; closing connection", "api", kmsg.NameForKey(r.hdr.Key), "version", r.hdr.Version, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			ok = false
		}
	}()
	h := handlers[r.hdr.Key]
	res, err := h(c.s, r)
	if err != nil {
		c.log.Warn("closing connection: request refused", "api", kmsg.NameForKey(r.hdr.Key), "version", r.hdr.Version, "err", err)
		return result{}, false
	}
	return res, true
}

func (c *conn) runWait(r *request, wait func() kmsg.Response) (resp kmsg.Response, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("handler panic; closing connection", "api", kmsg.NameForKey(r.hdr.Key), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			resp, ok = nil, false
		}
	}()
	return wait(), true
}

func doneSlot(corr int32, resp kmsg.Response) *slot {
	sl := &slot{done: make(chan struct{}), correlationID: corr, resp: resp}
	close(sl.done)
	return sl
}

// writeLoop sends the responses in request order, first (when not nil)
// or the parked slot before those queued, until none is queued
// (writerIdle), the next is not ready (writerParked: its completer
// resumes the writer) or the connection ends (writerEnded). Its write
// buffer and encoding buffer are pooled and held only while responses
// are ready to send: a connection waiting on a long poll or on its client
// holds none.
func (c *conn) writeLoop(first *slot) int {
	var (
		w   *bufio.Writer
		buf *[]byte
		// unsent are the requests whose responses are in w, not yet
		// flushed: they are counted once their last byte is written.
		unsent  [maxUnsent]*slot
		nUnsent int
	)
	// sent counts the unsent requests once their flush ended; a failed
	// flush answered none of them.
	sent := func(err error) {
		if nUnsent == 0 {
			return
		}
		now := time.Now()
		for i := range nUnsent {
			if err == nil {
				c.countRequest(unsent[i], now)
			}
			unsent[i] = nil
		}
		nUnsent = 0
	}
	// idle sends what is buffered and gives the buffers back.
	idle := func() error {
		var err error
		if w != nil {
			err = w.Flush()
			sent(err)
			w.Reset(nil)
			writerPool.Put(w)
			w = nil
		}
		if buf != nil {
			putEncodeBuf(buf)
			buf = nil
		}
		return err
	}
	defer idle()
	zw := fetch.NewWriter(c.raw)
	fail := func(sl *slot) {
		c.nc.Close()
		if sl != nil {
			c.abandon(sl)
		}
		c.drain()
	}
	if first == nil {
		first = c.takeParked()
	}
	for {
		sl := first
		first = nil
		if sl == nil {
			select {
			case next, ok := <-c.slots:
				if !ok {
					return writerEnded
				}
				sl = next
			default:
				return writerIdle
			}
		}
		select {
		case <-sl.done:
		default:
			// The next response is not ready: send what is buffered first,
			// so a long poll does not hold back the answers before it.
			if err := idle(); err != nil {
				fail(sl)
				return writerEnded
			}
			if c.ctx.Err() == nil && c.park(sl) {
				return writerParked
			}
			select {
			case <-sl.done:
			case <-c.ctx.Done():
				if !c.awaitOnClose(sl) {
					c.abandon(sl)
					c.drain()
					return writerEnded
				}
			}
		}
		taken := time.Now()
		sl.taken = taken.Sub(sl.read)
		if tr, ok := sl.resp.(kmsg.ThrottleResponse); ok {
			ms, _ := tr.Throttle()
			sl.throttle = time.Duration(ms) * time.Millisecond
		}
		if sl.closeConn {
			fetch.ReleaseResponse(sl.resp)
			c.finished(sl)
			fail(nil)
			return writerEnded
		}
		if sl.resp == nil {
			// acks=0: nothing to send, counted as Kafka counts its
			// NoOpResponse.
			c.countRequest(sl, taken)
			c.finished(sl)
			continue
		}
		if w == nil {
			w = writerPool.Get().(*bufio.Writer)
			w.Reset(c.nc)
		}
		if nUnsent == maxUnsent {
			err := w.Flush()
			sent(err)
			if err != nil {
				c.finished(sl)
				fail(nil)
				return writerEnded
			}
		}
		unsent[nUnsent] = sl
		nUnsent++
		if z, ok := sl.resp.(*fetch.ZeroCopyResponse); ok {
			err := zw.Write(w, sl.correlationID, z)
			z.Release()
			c.finished(sl)
			if err != nil {
				if errors.Is(err, fetch.ErrRecordsChanged) {
					c.log.Info("closing connection: fetch interrupted", "err", err)
				} else {
					c.log.Debug("closing connection: fetch write failed", "err", err)
				}
				fail(nil)
				return writerEnded
			}
		} else {
			if buf == nil {
				buf = getEncodeBuf()
			}
			if need := responseSizeHint(sl.resp); cap(*buf) < need {
				*buf = make([]byte, 0, need)
			}
			*buf = protocol.AppendResponse((*buf)[:0], sl.correlationID, sl.resp)
			c.finished(sl)
			if _, err := w.Write(*buf); err != nil {
				fail(nil)
				return writerEnded
			}
		}
		// Flush only when no further response is ready, so that pipelined
		// responses share a write.
		if len(c.slots) == 0 {
			if err := idle(); err != nil {
				fail(nil)
				return writerEnded
			}
		}
	}
}

// awaitOnClose decides what the writer does with a response not ready
// when the connection's context ends. Normally that is the client gone or
// the connection failed, and the response is abandoned (false). When the
// server is closing, it ended because Server.Close shut the connection's
// read side: every request read before that is still answered, written and
// flushed before the socket closes, so an answer made in the last moment
// (a waiting produce that Close itself released) is not lost. This waits
// for the response until closeConns' deadline, and says whether it came.
func (c *conn) awaitOnClose(sl *slot) bool {
	select {
	case <-c.s.closing:
	default:
		return false
	}
	select {
	case <-sl.done:
		return true
	case <-c.s.connsExpired:
		return false
	}
}

// maxUnsent bounds the responses a writer keeps in its buffer before
// flushing, so that it can count each once its bytes are on the socket.
const maxUnsent = 16

// Response encoding buffers are pooled; one that grew past
// maxPooledEncodeBuf (a large fetch) is dropped, not kept.
const maxPooledEncodeBuf = 1 << 20

var encodeBufPool = sync.Pool{New: func() any { return new([]byte) }}

func getEncodeBuf() *[]byte { return encodeBufPool.Get().(*[]byte) }

func putEncodeBuf(b *[]byte) {
	if cap(*b) > maxPooledEncodeBuf {
		*b = nil
	}
	*b = (*b)[:0]
	encodeBufPool.Put(b)
}

// drain empties the slot queue after the connection failed so the reader
// is never blocked on a full queue, releasing what unsent responses hold.
//
// A writer running on the reader's goroutine (answer) must not wait for
// the queue to close, which only the reader does: it abandons what is
// queued now and returns, and the reader, seeing the cancel, ends and
// kicks a writer that waits for the close.
func (c *conn) drain() {
	c.cancel()
	if c.inlineWriter {
		for {
			select {
			case sl, ok := <-c.slots:
				if !ok {
					return
				}
				c.abandon(sl)
			default:
				return
			}
		}
	}
	for sl := range c.slots {
		c.abandon(sl)
	}
}

// abandon releases what the response of a slot that will not be written
// holds, once the response is there: a handler still waiting (a long poll,
// which the connection's end stops) finishes on its own goroutine.
func (c *conn) abandon(sl *slot) {
	select {
	case <-sl.done:
		fetch.ReleaseResponse(sl.resp)
		c.finished(sl)
	default:
		c.s.goTracked(func() {
			<-sl.done
			fetch.ReleaseResponse(sl.resp)
			c.finished(sl)
		})
	}
}

// responseSizeHint estimates the encoded size of responses that carry
// record data, so the frame is allocated once instead of grown (and
// copied) batch by batch.
func responseSizeHint(resp kmsg.Response) int {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return 0
	}
	n := 64
	for i := range fr.Topics {
		n += 64
		for j := range fr.Topics[i].Partitions {
			n += 96 + len(fr.Topics[i].Partitions[j].RecordBatches)
		}
	}
	return n
}
