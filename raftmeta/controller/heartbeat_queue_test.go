package controller

import (
	"context"
	"testing"
	"time"
)

// TestQueuedHeartbeatKeepsSession: a controller goroutine held up longer
// than a session (a slow commit under load) does not fence the brokers
// whose heartbeats arrived meanwhile and wait behind it; a broker with
// no heartbeat, or only one from longer than a session ago, is fenced.
func TestQueuedHeartbeatKeepsSession(t *testing.T) {
	n, c, clk, epochs := livenessController(t, 3)
	clk.Advance(testSession / 2)
	// Broker 3's heartbeat arrived but its caller gave up before it ran:
	// it shows broker 3 alive for one session from its arrival only.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, _ = c.BrokerHeartbeat(gone, BrokerHeartbeat{BrokerID: 3, BrokerEpoch: epochs[3]})

	advanced, release := make(chan struct{}), make(chan struct{})
	stalled := make(chan error, 1)
	fenced := make(chan map[int32]bool, 1)
	go func() {
		stalled <- c.do(context.Background(), func() {
			// Beyond every session, then broker 1's heartbeat
			// arrives and waits behind this request.
			clk.Advance(testSession + time.Second)
			close(advanced)
			<-release
			c.fenceStale(clk.Now())
			got := map[int32]bool{}
			for _, b := range n.Image().Brokers() {
				got[b.ID] = b.Fenced
			}
			fenced <- got
		})
	}()
	hb := make(chan error, 1)
	<-advanced
	go func() {
		_, err := c.BrokerHeartbeat(ctxT(t), BrokerHeartbeat{BrokerID: 1, BrokerEpoch: epochs[1], CurrentMetadataOffset: int64(n.Image().Offset())})
		hb <- err
	}()
	waitFor(t, "broker 1's heartbeat to arrive", func() bool {
		c.arrivedMu.Lock()
		defer c.arrivedMu.Unlock()
		return c.arrived[1].at.Equal(clk.Now())
	})
	close(release)
	if err := <-stalled; err != nil {
		t.Fatal(err)
	}
	got := <-fenced
	if err := <-hb; err != nil {
		t.Fatalf("queued heartbeat: %v", err)
	}
	if got[1] {
		t.Error("broker 1 fenced while its heartbeat waited for the controller")
	}
	if !got[2] {
		t.Error("broker 2, silent for a session, not fenced")
	}
	if !got[3] {
		t.Error("broker 3, whose only heartbeat since was dropped over a session ago, not fenced")
	}
	if b, _ := n.Image().Broker(1); b.Fenced {
		t.Error("broker 1 fenced after its queued heartbeat ran")
	}
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
