package interbroker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/gregorbroker/gregor/raftmeta/image"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Clients holds one kgo client per remote broker, connected to its
// inter-broker listener, for one kind of request this node sends as a
// broker. Each sender keeps its own set, so a slow request of one kind
// (a marker waiting for replication) never holds up the answers of
// another on the same connection (responses come back in order).
type Clients struct {
	image    func() *image.Image // this node's metadata image
	listener string              // inter.broker.listener.name
	opts     []kgo.Opt           // the client id and the versions the requests need

	mu      sync.Mutex // a leaf: nothing else is taken while it is held
	closed  bool
	clients map[int32]*brokerClient
}

// brokerClient is a connection to a remote broker at addr.
type brokerClient struct {
	addr string
	cl   *kgo.Client
}

// NewClients connects to the brokers of image's current metadata on their
// listener named listener, with opts.
func NewClients(image func() *image.Image, listener string, opts ...kgo.Opt) *Clients {
	return &Clients{image: image, listener: listener, opts: opts, clients: make(map[int32]*brokerClient)}
}

// Broker returns node's broker on a client connected to its inter-broker
// listener, made anew when that address changed.
func (c *Clients) Broker(node int32) (*kgo.Broker, error) {
	b, ok := c.image().Broker(node)
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", node)
	}
	l, ok := b.Listener(c.listener)
	if !ok {
		return nil, fmt.Errorf("broker %d has no %s listener", node, c.listener)
	}
	addr := net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("broker %d: %w", node, context.Canceled)
	}
	if bc := c.clients[node]; bc != nil {
		if bc.addr == addr {
			return bc.cl.Broker(int(node)), nil
		}
		bc.cl.Close()
		delete(c.clients, node)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, c.opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to broker %d at %s: %w", node, addr, err)
	}
	c.clients[node] = &brokerClient{addr: addr, cl: cl}
	return cl.Broker(int(node)), nil
}

// Count is the number of remote brokers connected to.
func (c *Clients) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.clients)
}

// Close closes every connection; later requests fail.
func (c *Clients) Close() {
	c.mu.Lock()
	c.closed = true
	clients := c.clients
	c.clients = make(map[int32]*brokerClient)
	c.mu.Unlock()
	for _, bc := range clients {
		bc.cl.Close()
	}
}
