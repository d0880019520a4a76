package integration

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faultLink is one directed network link of a test cluster: a loopback
// TCP proxy that one party dials to reach one listener of another (node 1
// fetching from node 2, node 1's quorum traffic to node 2, a client to
// node 3). Gregor is configured to dial the link's address instead of the
// listener's, so the test can break that one link while every other
// keeps working, the way a firewall rule between two hosts would:
//
//   - cut: every open connection is reset and new ones are accepted
//     and reset at once (a refused connection);
//   - blackhole: bytes in one direction (up: dialer to listener, down:
//     listener to dialer) stop flowing, without an error, as when
//     packets are dropped; connections are still accepted. Held bytes are
//     delivered when the direction heals, as TCP retransmits them once a
//     partition ends, so a stream is never corrupted;
//   - delay: each chunk waits before it is forwarded.
//
// A cut of the link from A to B is one direction of a partition: B can
// still dial A through the link from B to A. Healing restores forwarding.
type faultLink struct {
	name   string
	ln     net.Listener
	target string

	cut       atomic.Bool
	stopped   atomic.Bool // close was called
	holdUp    atomic.Bool // blackhole dialer → listener
	holdDown  atomic.Bool // blackhole listener → dialer
	delayNano atomic.Int64

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup

	accepted, refused atomic.Int64
}

// newFaultLink listens on a free loopback port and forwards to target.
func newFaultLink(name, target string) (*faultLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("link %s: listen: %w", name, err)
	}
	l := &faultLink{name: name, ln: ln, target: target, conns: make(map[*proxyConn]struct{})}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// addr is the address the dialing side is configured with.
func (l *faultLink) addr() string { return l.ln.Addr().String() }

// setCut cuts the link (closing every open connection) or heals a cut.
func (l *faultLink) setCut(on bool) {
	l.cut.Store(on)
	if on {
		l.closeConns()
	}
}

// setBlackhole stops (or restarts) forwarding in each direction.
func (l *faultLink) setBlackhole(up, down bool) {
	l.holdUp.Store(up)
	l.holdDown.Store(down)
}

// setDelay delays every chunk forwarded from now on by d.
func (l *faultLink) setDelay(d time.Duration) { l.delayNano.Store(int64(d)) }

// heal undoes every fault of the link.
func (l *faultLink) heal() {
	l.setCut(false)
	l.setBlackhole(false, false)
	l.setDelay(0)
}

// faulty reports whether any fault is on.
func (l *faultLink) faulty() bool {
	return l.cut.Load() || l.holdUp.Load() || l.holdDown.Load() || l.delayNano.Load() > 0
}

func (l *faultLink) closeConns() int {
	l.mu.Lock()
	conns := make([]*proxyConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		resetConn(c.client)
		resetConn(c.server)
		c.close()
	}
	return len(conns)
}

// resetConn closes c with a TCP reset rather than a FIN, as a firewall
// that rejects a connection does: clients take a reset for a network
// failure and retry, while a clean close before any answer looks to them
// like a protocol mismatch (TLS expected) and is not retried.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// close stops the link for good and waits for its goroutines.
func (l *faultLink) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stopped.Store(true)
	l.ln.Close()
	l.closeConns()
	l.wg.Wait()
}

func (l *faultLink) acceptLoop() {
	defer l.wg.Done()
	for {
		client, err := l.ln.Accept()
		if err != nil {
			return
		}
		if l.cut.Load() {
			l.refused.Add(1)
			resetConn(client)
			continue
		}
		l.accepted.Add(1)
		l.wg.Add(1)
		go l.serve(client)
	}
}

func (l *faultLink) serve(client net.Conn) {
	defer l.wg.Done()
	server, err := net.DialTimeout("tcp", l.target, 5*time.Second)
	if err != nil {
		resetConn(client) // the target is down: the dialer sees a refusal
		return
	}
	c := &proxyConn{client: client, server: server}
	l.mu.Lock()
	if l.closed || l.cut.Load() {
		l.mu.Unlock()
		c.close()
		return
	}
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		l.pipe(c, server, client, &l.holdUp)
	}()
	go func() {
		defer wg.Done()
		l.pipe(c, client, server, &l.holdDown)
	}()
	wg.Wait()
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// pipe copies src to dst. While hold is set a chunk read is kept back
// (and nothing more is read, so the sender's buffers fill as they would
// with no acknowledgements coming); a cut ends the connection.
func (l *faultLink) pipe(c *proxyConn, dst, src net.Conn, hold *atomic.Bool) {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for hold.Load() && !l.cut.Load() && !l.stopped.Load() {
				time.Sleep(10 * time.Millisecond)
			}
			if l.cut.Load() || l.stopped.Load() {
				return
			}
			if d := time.Duration(l.delayNano.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
