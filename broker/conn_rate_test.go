package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// TestListenerConnectionCreationRate: with the listener's
// max.connection.creation.rate at 5 a second, 15 connections opened one
// after another are all served (the acceptor waits, it does not close),
// and take the time the rate allows instead of a few milliseconds.
func TestListenerConnectionCreationRate(t *testing.T) {
	var listener string
	ts := startServer(t, "", func(c *config.Broker) {
		c.QuotaWindowNum, c.QuotaWindowSizeSeconds = 2, 1
		listener = c.Listeners[0].Name
		c.ListenerMaxConnectionCreationRate = map[string]int32{listener: 5}
	})
	start := time.Now()
	for i := range 15 {
		c := dialRaw(t, ts.addr)
		c.write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
		c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := protocol.ReadFrame(c.nc, 1<<20, nil); err != nil {
			t.Fatalf("connection %d on %s was not served: %v", i+1, listener, err)
		}
		c.nc.Close()
	}
	took := time.Since(start)
	t.Logf("15 connections at 5/s on %s: %v", listener, took)
	// Two 1 s samples: the first 5 or so go at once, the rest at about
	// 5 a second.
	if took < 1200*time.Millisecond {
		t.Fatalf("15 connections took %v; the acceptor did not wait for the rate", took)
	}
}

// TestConnRatesInterBrokerExempt: the broker-wide rate throttles every
// listener but the inter-broker one, which only its own rate limits, as
// Kafka's max.connection.creation.rate.
func TestConnRatesInterBrokerExempt(t *testing.T) {
	cfg := &config.Broker{QuotaWindowNum: 2, QuotaWindowSizeSeconds: 1, MaxConnectionCreationRate: 2,
		ListenerMaxConnectionCreationRate: map[string]int32{"INTERNAL": 3}, InterBrokerListenerName: "INTERNAL"}
	r := newConnRates(cfg)
	now := time.Unix(1000, 0)
	var client, internal time.Duration
	for range 6 {
		client = r.record("CLIENT", now)
	}
	if client <= 0 {
		t.Fatalf("6 client connections at once over a broker rate of 2/s: wait %v, want > 0", client)
	}
	for range 3 {
		internal = r.record("INTERNAL", now)
	}
	if internal != 0 {
		t.Fatalf("3 inter-broker connections within its own rate of 3/s: wait %v, want 0 (the broker rate does not apply)", internal)
	}
	if internal = r.record("INTERNAL", now); internal <= 0 {
		t.Fatalf("a 4th inter-broker connection over its rate of 3/s: wait %v, want > 0", internal)
	}
}
