package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// TestIPConnectionCreationRate: with connection_creation_rate=5 on
// 127.0.0.1 (KIP-612) and 2 windows of 1 s, raw TCP connections opened
// as fast as possible from loopback are served until the address is over
// 5 a second; the ones after are not served and are closed only after a
// delay (Kafka's throttle time, at most one window), and once the rate
// has fallen a new connection is served again.
func TestIPConnectionCreationRate(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.QuotaWindowNum, c.QuotaWindowSizeSeconds = 2, 1 })
	adm := ts.admin(t)
	setQuota(t, adm, "connection_creation_rate", 5, "ip", "127.0.0.1")
	d, err := adm.DescribeClientQuotas(testContext(t), true, []kadm.DescribeClientQuotaComponent{{Type: "ip", MatchName: new("127.0.0.1")}})
	if err != nil || len(d) != 1 || len(d[0].Values) != 1 || d[0].Values[0].Key != "connection_creation_rate" || d[0].Values[0].Value != 5 {
		t.Fatalf("describe 127.0.0.1's quota: %+v %v", d, err)
	}

	// served reports whether a new connection answers ApiVersions, and
	// how long after the dial it was answered or closed.
	served := func() (bool, time.Duration) {
		start := time.Now()
		c := dialRaw(t, ts.addr)
		defer c.nc.Close()
		c.write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
		c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := protocol.ReadFrame(c.nc, 1<<20, nil)
		return err == nil, time.Since(start)
	}
	var ok, refused int
	var longestClose time.Duration
	for range 10 {
		s, took := served()
		if s {
			ok++
			continue
		}
		refused++
		longestClose = max(longestClose, took)
	}
	t.Logf("10 connections at once: %d served, %d closed, the longest after %v", ok, refused, longestClose)
	// The rate is counted over at least one window (1 s): the sixth
	// connection within it is over 5 a second. The closes each wait out
	// a throttle time, which lets a few more in.
	if ok < 5 || refused == 0 || ok > 8 {
		t.Fatalf("%d served, %d closed; want 5 to 8 served", ok, refused)
	}
	if longestClose < 50*time.Millisecond || longestClose > 1500*time.Millisecond {
		t.Fatalf("a throttled connection was closed after %v, want a delay of at most one window", longestClose)
	}
	time.Sleep(2 * time.Second)
	if s, _ := served(); !s {
		t.Fatal("a connection after the rate fell was not served")
	}
}
