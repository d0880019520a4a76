// Package connlimit enforces max.connections (and its
// listener.name.<listener>. form), max.connections.per.ip and
// max.connections.per.ip.overrides on the broker's listeners.
package connlimit

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/gregorbroker/gregor/config"
)

// ErrTooManyFromIP refuses a connection over max.connections.per.ip (or
// its override for the address).
var ErrTooManyFromIP = errors.New("too many connections from this address")

// Quotas enforces max.connections and max.connections.per.ip as
// Kafka's ConnectionQuotas does: the acceptor blocks, accepting nothing
// more, while the broker holds max.connections (except on the
// inter-broker listener when there are several, which stays open so the
// cluster keeps working); a new connection from an address that already
// holds its limit is closed at once.
type Quotas struct {
	mu        sync.Mutex
	cond      *sync.Cond
	max       int
	perIP     int
	overrides map[netip.Addr]int
	protected string // the inter-broker listener, when exempt from max
	total     int
	byAddr    map[netip.Addr]int
	// listenerMax and byListener are the listeners with their own
	// max.connections, by upper-cased name, and what each holds.
	listenerMax map[string]int
	byListener  map[string]int
	closed      bool
}

// New reads the limits from cfg, resolving the hosts of
// max.connections.per.ip.overrides as Kafka does at start, for a broker
// with clientListeners listeners.
func New(cfg *config.Broker, clientListeners int) (*Quotas, error) {
	q := &Quotas{
		max:         int(cfg.MaxConnections),
		perIP:       int(cfg.MaxConnectionsPerIP),
		overrides:   map[netip.Addr]int{},
		byAddr:      map[netip.Addr]int{},
		listenerMax: map[string]int{},
		byListener:  map[string]int{},
	}
	for l, n := range cfg.ListenerMaxConnections {
		q.listenerMax[l] = int(n)
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

// Acquire counts a new connection from addr on listener. It waits while
// the broker is at max.connections, and refuses with ErrTooManyFromIP a
// connection over the address's limit. It returns net.ErrClosed once the
// quotas are closed.
func (q *Quotas) Acquire(listener string, addr netip.Addr) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.closed && (listener != q.protected && q.total >= q.max || q.listenerFull(listener)) {
		q.cond.Wait()
	}
	if q.closed {
		return net.ErrClosed
	}
	if q.byAddr[addr] >= q.LimitFor(addr) {
		return ErrTooManyFromIP
	}
	q.byAddr[addr]++
	q.byListener[listener]++
	q.total++
	return nil
}

// listenerFull reports whether listener holds its own max.connections
// (the inter-broker listener too, as Kafka's listener limits).
func (q *Quotas) listenerFull(listener string) bool {
	n, ok := q.listenerMax[listener]
	return ok && q.byListener[listener] >= n
}

// Release uncounts a connection that Acquire counted on listener.
func (q *Quotas) Release(listener string, addr netip.Addr) {
	q.mu.Lock()
	if q.byAddr[addr]--; q.byAddr[addr] <= 0 {
		delete(q.byAddr, addr)
	}
	if q.byListener[listener]--; q.byListener[listener] <= 0 {
		delete(q.byListener, listener)
	}
	q.total--
	q.mu.Unlock()
	q.cond.Broadcast()
}

// LimitFor is the per-address limit that applies to addr.
func (q *Quotas) LimitFor(addr netip.Addr) int {
	if n, ok := q.overrides[addr]; ok {
		return n
	}
	return q.perIP
}

// Close wakes an acceptor waiting for a slot, for shutdown.
func (q *Quotas) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// RemoteAddr is the IP address of a connection's peer.
func RemoteAddr(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}
