package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// leaderClient sends a fetcher's requests to its leader, one at a time.
type leaderClient interface {
	// request sends req and returns its response. The record batches of
	// a fetch response may live in a buffer the next request reuses: the
	// caller is done with one response before it sends the next request.
	request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	close()
}

// kgoLeader sends through a franz-go client: the inter-broker listeners
// with TLS or SASL, which franz-go negotiates.
type kgoLeader struct {
	cl     *kgo.Client
	leader int32
}

func (k kgoLeader) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return k.cl.Broker(int(k.leader)).Request(ctx, req)
}

func (k kgoLeader) close() { k.cl.Close() }

// leaderConn is a follower's own connection to its leader on a PLAINTEXT
// inter-broker listener. The fetcher writes each request and reads its
// response on its own goroutine, into one read buffer it keeps: through
// franz-go every fetch response was read into a new, zeroed buffer (a
// megabyte and more at full speed, then garbage) and passed between
// franz-go's writer and reader goroutines and the fetcher's, each hop a
// wake-up that waits for a core on a busy machine, on the path that an
// acks=all produce waits for (docs/performance.md, "Cluster targets").
// A failed exchange closes the connection; the next request dials again,
// at the address the metadata image then gives.
type leaderConn struct {
	addr     func() (string, error) // the leader's inter-broker address
	clientID string
	timeout  time.Duration // replica.socket.timeout.ms, added to a fetch's own wait

	nc       net.Conn
	versions map[int16]int16 // the leader's highest version of each API, from ApiVersions
	corr     int32
	wbuf     []byte
	rbuf     []byte // the last response's body, reused
}

// maxResponseBytes bounds a response's size field, so that a corrupt one
// does not make the follower allocate gigabytes.
const maxResponseBytes = 1 << 30

func (c *leaderConn) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc, c.versions = nil, nil
	}
}

// request implements leaderClient: dialling and asking for the leader's
// versions first if the connection is not open.
func (c *leaderConn) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if c.nc == nil {
		if err := c.dial(ctx); err != nil {
			return nil, err
		}
	}
	top, ok := c.versions[req.Key()]
	if !ok {
		return nil, fmt.Errorf("%s: %w: the leader does not support it", kmsg.NameForKey(req.Key()), kerr.UnsupportedVersion)
	}
	req.SetVersion(min(top, req.MaxVersion()))
	wait := time.Duration(0)
	if f, ok := req.(*kmsg.FetchRequest); ok {
		wait = time.Duration(f.MaxWaitMillis) * time.Millisecond
	}
	resp, err := c.roundTrip(ctx, req, wait)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("%s to leader: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// dial opens the connection and learns the leader's versions.
func (c *leaderConn) dial(ctx context.Context) error {
	addr, err := c.addr()
	if err != nil {
		return err
	}
	d := net.Dialer{Timeout: c.timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial leader %s: %w", addr, err)
	}
	c.nc = nc
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "gregor-replica", "1"
	resp, err := c.roundTrip(ctx, av, 0)
	if err != nil {
		c.close()
		return fmt.Errorf("api versions of leader %s: %w", addr, err)
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != 0 {
		c.close()
		return fmt.Errorf("api versions of leader %s: %w", addr, kerr.ErrorForCode(r.ErrorCode))
	}
	c.versions = make(map[int16]int16, len(r.ApiKeys))
	for _, k := range r.ApiKeys {
		c.versions[k.ApiKey] = k.MaxVersion
	}
	return nil
}

// roundTrip writes req and reads its response, within wait plus the
// socket timeout; ctx ending breaks off the exchange.
func (c *leaderConn) roundTrip(ctx context.Context, req kmsg.Request, wait time.Duration) (kmsg.Response, error) {
	c.corr++
	c.wbuf = protocol.AppendRequest(c.wbuf[:0], c.corr, c.clientID, req)

	// The deadline ends a read the leader never answers; ctx ending moves
	// it to now, which breaks off a read or write in progress.
	if err := c.nc.SetDeadline(time.Now().Add(wait + c.timeout)); err != nil {
		return nil, err
	}
	nc := c.nc
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	if _, err := nc.Write(c.wbuf); err != nil {
		return nil, ctxOr(ctx, err)
	}
	frame, err := c.readResponse(nc)
	if err != nil {
		return nil, ctxOr(ctx, err)
	}
	resp, err := protocol.DecodeResponse(frame, c.corr, req)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// minReadBuf is the least read buffer a response is read into: the
// size, an empty fetch answer or most of a small one in one read.
const minReadBuf = 64 << 10

// lowatMin is the least part of a response still to come that is waited
// for with SO_RCVLOWAT (readResponse).
const lowatMin = 64 << 10

// readResponse reads one response, its size and body, into the buffer
// it keeps (c.rbuf) and returns the body. The size and whatever of the
// body has arrived come in one read. A large rest (a replica fetch's
// megabyte) arrives over loopback in many segments, and a reader woken
// for each reads a piece, parks and waits for a core again, a dozen
// wake-ups per fetch on the path an acks=all produce waits for: with
// SO_RCVLOWAT at what is still to come, the kernel wakes the fetcher
// once it is all there (or its receive buffer is full), so the rest
// takes a read or two. The low mark goes back to one byte before the
// next response, whose size may be all there is of it.
func (c *leaderConn) readResponse(nc net.Conn) ([]byte, error) {
	if cap(c.rbuf) < minReadBuf {
		c.rbuf = make([]byte, minReadBuf)
	}
	buf := c.rbuf[:cap(c.rbuf)]
	got, err := io.ReadAtLeast(nc, buf, 4)
	if err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(buf)))
	if n < 4 || n > maxResponseBytes {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	total := 4 + n
	if got > total {
		// One request is in flight: nothing may follow its response.
		return nil, fmt.Errorf("%d bytes after a response of %d", got-total, n)
	}
	if len(buf) < total {
		grown := make([]byte, total)
		copy(grown, buf[:got])
		buf, c.rbuf = grown, grown
	}
	buf = buf[:total]
	lowat := false
	for got < total {
		if rest := total - got; rest >= lowatMin {
			lowat = setRecvLowat(nc, rest) == nil
		} else if lowat {
			lowat = setRecvLowat(nc, 1) != nil
		}
		m, err := nc.Read(buf[got:])
		got += m
		if err != nil && got < total {
			return nil, err
		}
	}
	if lowat {
		if err := setRecvLowat(nc, 1); err != nil {
			return nil, fmt.Errorf("reset SO_RCVLOWAT: %w", err)
		}
	}
	return buf[4:], nil
}

// ctxOr is ctx's error when ctx ended (the deadline set to break off the
// exchange caused err), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
