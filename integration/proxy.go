package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is a loopback TCP proxy in front of one gregor listener. Gregor
// advertises the proxy's address, so every connection a client makes,
// bootstrap and broker alike, goes through it. The proxy can cut
// connections at random points: each connection gets a random byte budget
// in each direction, and when one is spent the proxy forwards exactly
// that prefix and closes both sides, so requests and responses are cut
// mid-frame, before the broker sees a request or after it has acted on
// one but before its answer arrives.
type proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[*proxyConn]struct{}
	rng      *rand.Rand
	meanUp   int64 // mean byte budget client to broker; 0: no cuts
	meanDown int64 // mean byte budget broker to client; 0: no cuts
	closed   bool

	accepted atomic.Int64
	cuts     atomic.Int64
	wg       sync.WaitGroup
}

// proxyConn is one client connection and its upstream connection.
type proxyConn struct {
	client, server net.Conn
	once           sync.Once
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

// newProxy listens on a free loopback port and forwards each accepted
// connection to target. seed makes the cut points repeatable for a given
// order of connections.
func newProxy(target string, seed uint64) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &proxy{
		ln:     ln,
		target: target,
		conns:  make(map[*proxyConn]struct{}),
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// addr is the proxy's host:port, the address gregor should advertise.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// setRandomCuts makes every connection accepted from now on die after a
// random number of bytes in one of the two directions: each direction
// gets a budget uniform in [1, 2*mean] and the first one spent cuts the
// connection. Responses are smaller than requests (a produce answer is
// tens of bytes), hence the separate means. 0 turns a direction's cuts
// off for new connections.
func (p *proxy) setRandomCuts(meanUp, meanDown int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.meanUp, p.meanDown = meanUp, meanDown
}

// cutAll closes every open connection at once and returns how many there
// were.
func (p *proxy) cutAll() int {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return len(conns)
}

// stats returns how many connections were accepted and how many were cut
// at a random point.
func (p *proxy) stats() (accepted, cuts int64) {
	return p.accepted.Load(), p.cuts.Load()
}

// close stops accepting, closes every connection and waits for the
// forwarding goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.cutAll()
	p.wg.Wait()
}

func (p *proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(client)
	}
}

// serve connects one client to the target and forwards both ways until
// either side closes or the connection's budget runs out.
func (p *proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		// The broker is down (killed, restarting): the client sees a
		// connection that closes at once, as it would see a refusal.
		client.Close()
		return
	}
	c := &proxyConn{client: client, server: server}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return
	}
	p.conns[c] = struct{}{}
	budgetUp, budgetDown := int64(-1), int64(-1) // -1: unlimited
	if p.meanUp > 0 {
		budgetUp = 1 + p.rng.Int64N(2*p.meanUp)
	}
	if p.meanDown > 0 {
		budgetDown = 1 + p.rng.Int64N(2*p.meanDown)
	}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		p.pipe(c, server, client, budgetUp)
	}()
	go func() {
		defer wg.Done()
		p.pipe(c, client, server, budgetDown)
	}()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// pipe copies src to dst. With a budget (>= 0) it forwards that many bytes
// and then cuts the whole connection; either way, when the copy ends both
// sides are closed, as a dropped TCP connection would end both.
func (p *proxy) pipe(c *proxyConn, dst, src net.Conn, budget int64) {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			cut := budget >= 0 && int64(n) >= budget
			if cut {
				chunk = buf[:budget]
			}
			if len(chunk) > 0 {
				if _, werr := dst.Write(chunk); werr != nil {
					return
				}
			}
			if cut {
				p.cuts.Add(1)
				return
			}
			if budget >= 0 {
				budget -= int64(n)
			}
		}
		if err != nil {
			return
		}
	}
}

// crashDialer dials for one client and can make that client vanish as a
// crashed process does: its connections close at once and every later
// dial fails, so nothing more it sends reaches the broker (no LeaveGroup,
// no EndTxn). Pass its dial method to kgo.Dialer.
type crashDialer struct {
	mu      sync.Mutex
	crashed bool
	conns   []net.Conn
}

var errCrashed = errors.New("client crashed (test)")

// dial is a kgo.Dialer function.
func (d *crashDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.crashed {
		return nil, errCrashed
	}
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, conn)
	return conn, nil
}

// crash closes every connection and refuses all further dials.
func (d *crashDialer) crash() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.crashed = true
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}
