package broker

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/gregorbroker/gregor/config"
)

// errTooManyFromIP refuses a connection over max.connections.per.ip (or
// its override for the address).
var errTooManyFromIP = errors.New("too many connections from this address")

// connQuotas enforces max.connections and max.connections.per.ip as
// Kafka's ConnectionQuotas does: the acceptor blocks, accepting nothing
// more, while the broker holds max.connections (except on the
// inter-broker listener when there are several, which stays open so the
// cluster keeps working); a new connection from an address that already
// holds its limit is closed at once.
type connQuotas struct {
	mu        sync.Mutex
	cond      *sync.Cond
	max       int
	perIP     int
	overrides map[netip.Addr]int
	protected string // the inter-broker listener, when exempt from max
	total     int
	byAddr    map[netip.Addr]int
	closed    bool
}

// newConnQuotas reads the limits from cfg, resolving the hosts of
// max.connections.per.ip.overrides as Kafka does at start.
func newConnQuotas(cfg *config.Broker, clientListeners int) (*connQuotas, error) {
	q := &connQuotas{
		max:       int(cfg.MaxConnections),
		perIP:     int(cfg.MaxConnectionsPerIP),
		overrides: map[netip.Addr]int{},
		byAddr:    map[netip.Addr]int{},
	}
	q.cond = sync.NewCond(&q.mu)
	if clientListeners > 1 {
		q.protected = cfg.InterBrokerListenerName
	}
	for host, n := range cfg.MaxConnectionsPerIPOverrides {
		addrs, err := resolveHost(host)
		if err != nil {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %w", err)
		}
		for _, a := range addrs {
			q.overrides[a] = int(n)
		}
	}
	return q, nil
}

// resolveHost is host's addresses: itself if it is one, else what the
// resolver says.
func resolveHost(host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// acquire counts a new connection from addr on listener. It waits while
// the broker is at max.connections, and refuses with errTooManyFromIP a
// connection over the address's limit. It returns net.ErrClosed once the
// quotas are closed.
func (q *connQuotas) acquire(listener string, addr netip.Addr) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.closed && listener != q.protected && q.total >= q.max {
		q.cond.Wait()
	}
	if q.closed {
		return net.ErrClosed
	}
	if q.byAddr[addr] >= q.limitFor(addr) {
		return errTooManyFromIP
	}
	q.byAddr[addr]++
	q.total++
	return nil
}

// release uncounts a connection that acquire counted.
func (q *connQuotas) release(addr netip.Addr) {
	q.mu.Lock()
	if q.byAddr[addr]--; q.byAddr[addr] <= 0 {
		delete(q.byAddr, addr)
	}
	q.total--
	q.mu.Unlock()
	q.cond.Broadcast()
}

// limitFor is the per-address limit that applies to addr.
func (q *connQuotas) limitFor(addr netip.Addr) int {
	if n, ok := q.overrides[addr]; ok {
		return n
	}
	return q.perIP
}

// close wakes an acceptor waiting for a slot, for shutdown.
func (q *connQuotas) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// remoteAddr is the IP address of a connection's peer.
func remoteAddr(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}
