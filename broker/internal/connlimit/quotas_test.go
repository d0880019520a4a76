package connlimit

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
)

// TestQuotasPerAddress: an address gets max.connections.per.ip slots, or
// its override's; a released slot can be taken again.
func TestQuotasPerAddress(t *testing.T) {
	cfg := &config.Broker{MaxConnections: 100, MaxConnectionsPerIP: 2,
		MaxConnectionsPerIPOverrides: map[string]int32{"10.0.0.9": 1}}
	q, err := New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.9")
	for i := range 2 {
		if err := q.Acquire("PLAINTEXT", a); err != nil {
			t.Fatalf("connection %d from %s: %v", i, a, err)
		}
	}
	if err := q.Acquire("PLAINTEXT", a); !errors.Is(err, ErrTooManyFromIP) {
		t.Fatalf("third connection from %s: %v, want ErrTooManyFromIP", a, err)
	}
	if got := q.LimitFor(b); got != 1 {
		t.Fatalf("limit for %s is %d, want its override 1", b, got)
	}
	if err := q.Acquire("PLAINTEXT", b); err != nil {
		t.Fatal(err)
	}
	if err := q.Acquire("PLAINTEXT", b); !errors.Is(err, ErrTooManyFromIP) {
		t.Fatalf("second connection from %s: %v, want ErrTooManyFromIP", b, err)
	}
	q.Release("PLAINTEXT", a)
	if err := q.Acquire("PLAINTEXT", a); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

// TestQuotasMaxWaitsAndClose: at max.connections Acquire waits for a
// release, except on the inter-broker listener of a broker with several;
// Close ends a wait with net.ErrClosed.
func TestQuotasMaxWaitsAndClose(t *testing.T) {
	cfg := &config.Broker{MaxConnections: 1, MaxConnectionsPerIP: 10, InterBrokerListenerName: "INTERNAL"}
	q, err := New(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr("10.0.0.1")
	if err := q.Acquire("PLAINTEXT", a); err != nil {
		t.Fatal(err)
	}
	if err := q.Acquire("INTERNAL", a); err != nil {
		t.Fatalf("inter-broker listener at max.connections: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- q.Acquire("PLAINTEXT", a) }()
	select {
	case err := <-got:
		t.Fatalf("acquired past max.connections: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	q.Release("PLAINTEXT", a)
	q.Release("PLAINTEXT", a)
	if err := <-got; err != nil {
		t.Fatalf("after a release: %v", err)
	}
	go func() { got <- q.Acquire("PLAINTEXT", a) }()
	time.Sleep(20 * time.Millisecond)
	q.Close()
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v, want net.ErrClosed", err)
	}
}

// TestQuotasListenerMax: a listener with its own max.connections blocks
// its acceptor once it holds them, the inter-broker listener too, while
// other listeners go on; a release on it lets the waiting one in.
func TestQuotasListenerMax(t *testing.T) {
	cfg := &config.Broker{MaxConnections: 100, MaxConnectionsPerIP: 100, InterBrokerListenerName: "INTERNAL",
		ListenerMaxConnections: map[string]int32{"INTERNAL": 2}}
	q, err := New(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr("10.0.0.1")
	for range 2 {
		if err := q.Acquire("INTERNAL", a); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Acquire("CLIENT", a); err != nil {
		t.Fatalf("another listener: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- q.Acquire("INTERNAL", a) }()
	select {
	case err := <-got:
		t.Fatalf("a third connection on INTERNAL (max 2) was taken at once: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	q.Release("CLIENT", a)
	select {
	case err := <-got:
		t.Fatalf("a release on another listener let INTERNAL's third in: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	q.Release("INTERNAL", a)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a release on INTERNAL did not let the waiting connection in")
	}
}
