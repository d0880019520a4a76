package controller

import (
	"testing"
	"time"
)

const (
	testGrace    = 300 * time.Millisecond
	testInterval = 2 * time.Second
)

// graceController is livenessController with a disconnect grace and a
// heartbeat interval, and topic "t" led by broker 2 with every broker in
// its ISR.
func graceController(t *testing.T) (*testNode, *Controller, *fakeClock, map[int32]int64) {
	t.Helper()
	n, c, clk, epochs := livenessController(t, 3, func(cfg *Config) {
		cfg.BrokerDisconnectGrace = testGrace
		cfg.BrokerHeartbeatInterval = testInterval
	})
	createAssigned(t, c, "t", map[int32][]int32{0: {2, 1, 3}}, nil)
	if p := part(t, n, "t", 0); p.Leader != 2 || len(p.ISR) != 3 {
		t.Fatalf("t-0 at start: leader %d, ISR %v", p.Leader, p.ISR)
	}
	return n, c, clk, epochs
}

// peerGone reports broker id's connection closed, as the transport does,
// and waits until the controller goroutine has taken the notice.
func peerGone(t *testing.T, c *Controller, id int32) {
	t.Helper()
	c.PeerGone(uint64(id))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var noted bool
		if err := c.do(ctxT(t), func() { _, noted = c.graceEnds[id] }); err != nil {
			t.Fatal(err)
		}
		if noted {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the controller never took broker %d's closed connection", id)
}

func fenced(n *testNode, id int32) bool {
	b, _ := n.Image().Broker(id)
	return b.Fenced
}

// A broker whose connection closed and that sends nothing more is fenced
// once the grace has passed, far inside its session, and its leadership
// moves to another ISR member.
func TestDisconnectFencedAfterGrace(t *testing.T) {
	n, c, clk, _ := graceController(t)
	peerGone(t, c, 2)
	clk.Advance(testGrace / 2)
	runPeriodic(t, c)
	if fenced(n, 2) {
		t.Fatal("broker 2 fenced before its grace ended")
	}
	clk.Advance(testGrace)
	runPeriodic(t, c)
	if !fenced(n, 2) {
		t.Fatal("broker 2 not fenced after its grace")
	}
	p := part(t, n, "t", 0)
	if p.Leader == 2 || p.Leader < 0 || len(p.ISR) != 2 {
		t.Fatalf("t-0 after fencing broker 2: leader %d, ISR %v", p.Leader, p.ISR)
	}
	if fenced(n, 1) || fenced(n, 3) {
		t.Fatal("a broker that kept its connection was fenced")
	}
}

// A live broker reconnects and heartbeats within the grace: it keeps its
// leadership, and the full session applies again.
func TestDisconnectReconnectWithinGrace(t *testing.T) {
	n, c, clk, epochs := graceController(t)
	peerGone(t, c, 2)
	clk.Advance(testGrace / 2)
	heartbeat(t, n, 2, epochs[2])
	clk.Advance(10 * testGrace)
	runPeriodic(t, c)
	if fenced(n, 2) {
		t.Fatal("broker 2 fenced although it heartbeat within its grace")
	}
	if p := part(t, n, "t", 0); p.Leader != 2 {
		t.Fatalf("t-0 leader %d, want 2", p.Leader)
	}
	// Its session still ends as a session does.
	clk.Advance(testSession)
	heartbeat(t, n, 1, epochs[1])
	heartbeat(t, n, 3, epochs[3])
	runPeriodic(t, c)
	if !fenced(n, 2) {
		t.Fatal("broker 2 not fenced after a silent session")
	}
}

// A broker that stays connected but silent (a network partition, a
// stalled process) keeps the whole session.
func TestSilentConnectedSessionTimeout(t *testing.T) {
	n, c, clk, epochs := graceController(t)
	for elapsed := time.Duration(0); elapsed < testSession-time.Second; elapsed += time.Second {
		clk.Advance(time.Second)
		heartbeat(t, n, 1, epochs[1])
		heartbeat(t, n, 3, epochs[3])
		runPeriodic(t, c)
		if fenced(n, 2) {
			t.Fatalf("silent broker 2 fenced after %v, inside its session", elapsed+time.Second)
		}
	}
	clk.Advance(2 * time.Second)
	heartbeat(t, n, 1, epochs[1])
	heartbeat(t, n, 3, epochs[3])
	runPeriodic(t, c)
	if !fenced(n, 2) {
		t.Fatal("silent broker 2 not fenced after its session")
	}
}

// Without a grace a closed connection changes nothing: only the session
// fences.
func TestDisconnectGraceOff(t *testing.T) {
	n, c, clk, _ := livenessController(t, 3)
	c.PeerGone(2)
	clk.Advance(testSession / 2)
	runPeriodic(t, c)
	if fenced(n, 2) {
		t.Fatal("broker 2 fenced inside its session with the grace off")
	}
}

// A newly active controller waits one heartbeat interval and the grace
// for each broker's first heartbeat: brokers that send one keep their
// session, the one that does not (the old controller's node, dead) is
// fenced long before a session has passed.
func TestActivationGrace(t *testing.T) {
	n, c, clk, epochs := graceController(t)
	// A new term, as after an election: the next periodic run activates.
	if err := c.do(ctxT(t), func() { c.term = 0 }); err != nil {
		t.Fatal(err)
	}
	runPeriodic(t, c)
	clk.Advance(testInterval / 2)
	heartbeat(t, n, 1, epochs[1])
	heartbeat(t, n, 3, epochs[3])
	runPeriodic(t, c)
	if fenced(n, 2) {
		t.Fatal("broker 2 fenced inside its first heartbeat interval")
	}
	clk.Advance(testInterval/2 + testGrace + time.Millisecond)
	runPeriodic(t, c)
	if !fenced(n, 2) {
		t.Fatal("broker 2, silent since the new controller took over, not fenced after an interval and the grace")
	}
	if fenced(n, 1) || fenced(n, 3) {
		t.Fatal("a broker that heartbeat to the new controller was fenced")
	}
	if p := part(t, n, "t", 0); p.Leader == 2 {
		t.Fatal("t-0 still led by fenced broker 2")
	}
}
