package integration

import (
	"fmt"
	"testing"
	"time"
)

// The faults of TestNetFaults. Each injects its fault with the workloads
// running, checks what must hold while it lasts, and returns when the
// fault has lasted nfHold; the caller heals every link.

// nfLeaderIsolated: a partition leader (not the controller) is cut from
// both other nodes, replication and quorum alike, while its clients
// still reach it. The others fence it and elect a new leader; the
// isolated node, still believing it leads, must not acknowledge an
// acks=all produce (its followers are gone, its high watermark cannot
// move).
func nfLeaderIsolated(t *testing.T, r *nfRun) {
	p, leader, epoch, ctrl := r.victim(t)
	t.Logf("isolating node %d, leader of %s-%d in epoch %d (controller: %d)", leader, nfTopic, p, epoch, ctrl)
	began := time.Now()
	r.c.isolate(leader)
	l, e := nfWaitNewLeader(t, r.c, p, epoch, others(leader))
	t.Logf("node %d leads %s-%d in epoch %d %v after the cut", l, nfTopic, p, e, time.Since(began).Round(time.Millisecond))
	errs := r.probe(t, leader, p, 3)
	t.Logf("acks=all probes to the isolated node: %v", errs)
	time.Sleep(time.Until(began.Add(nfHold)))
}

// nfControllerIsolated: the active controller is cut from the other
// nodes, its clients still reaching it. The others elect a controller of
// their own; the partitions the isolated node led move away.
func nfControllerIsolated(t *testing.T, r *nfRun) {
	var ctrl int32
	cuWait(t, 30*time.Second, "the active controller", func() error {
		var err error
		ctrl, err = r.c.activeController()
		return err
	})
	led := int32(-1)
	var epoch int32
	for p := range int32(3) {
		if l, e := r.c.leader(nfTopic, p); l == ctrl {
			led, epoch = p, e
			break
		}
	}
	t.Logf("isolating node %d, the active controller (leader of %s-%d)", ctrl, nfTopic, led)
	began := time.Now()
	r.c.isolate(ctrl)
	rest := others(ctrl)
	cuWait(t, 30*time.Second, "a new controller among "+fmt.Sprint(rest), func() error {
		for _, id := range rest {
			l, err := r.c.controller(id)
			if err != nil {
				return err
			}
			if !containsID(rest, l) {
				return fmt.Errorf("node %d names controller %d", id, l)
			}
		}
		return nil
	})
	t.Logf("a new controller %v after the cut", time.Since(began).Round(time.Millisecond))
	if led >= 0 {
		nfWaitNewLeader(t, r.c, led, epoch, rest)
		t.Logf("acks=all probes to the isolated controller: %v", r.probe(t, ctrl, led, 3))
	}
	time.Sleep(time.Until(began.Add(nfHold)))
}

// nfAsymmetric: a partition leader can reach the other two nodes, but
// they cannot reach it (every link they dial to it is cut; the links it
// dials stay up). The followers cannot fetch, so the leader shrinks the
// ISR to itself through the controller it can still reach, and then
// refuses acks=all: with min.insync.replicas=2 nothing it takes is
// acknowledged, and nothing acknowledged before is lost.
func nfAsymmetric(t *testing.T, r *nfRun) {
	p, leader, epoch, ctrl := r.victim(t)
	t.Logf("cutting the links into node %d (leader of %s-%d in epoch %d, controller %d); its own links stay up", leader, nfTopic, p, epoch, ctrl)
	began := time.Now()
	for _, f := range others(leader) {
		r.c.cutOneWay(f, leader)
	}
	cuWait(t, 30*time.Second, fmt.Sprintf("the ISR of %s-%d down to one replica", nfTopic, p), func() error {
		l, e := r.c.leader(nfTopic, p)
		for _, n := range r.c.nodes {
			view, err := nfPartitions(n, nfTopic)
			if err != nil {
				return err
			}
			if st := view[p]; st.epoch == e && st.leader == l && len(st.isr) == 1 {
				t.Logf("%s-%d: leader %d in epoch %d, ISR %v, %v after the cut", nfTopic, p, l, e, st.isr, time.Since(began).Round(time.Millisecond))
				return nil
			}
		}
		return fmt.Errorf("leader %d in epoch %d, ISR not yet one replica", l, e)
	})
	l, _ := r.c.leader(nfTopic, p)
	t.Logf("acks=all probes to %s-%d's leader %d: %v", nfTopic, p, l, r.probe(t, l, p, 3))
	time.Sleep(time.Until(began.Add(nfHold)))
}

// nfClientCut: the client link of a partition leader fails over and
// over while producers write to it: first its answers stop (the broker
// appends, the producer never hears), then every connection is cut, then
// it heals. Idempotent producers retry what they never heard of: no
// duplicate may result.
func nfClientCut(t *testing.T, r *nfRun) {
	p, leader, _, _ := r.victim(t)
	link := r.c.clientLink[leader-1]
	t.Logf("failing the client link of node %d, leader of %s-%d", leader, nfTopic, p)
	began := time.Now()
	for time.Since(began) < nfHold {
		link.setBlackhole(false, true)
		time.Sleep(time.Second)
		link.setCut(true)
		time.Sleep(time.Second)
		link.heal()
		time.Sleep(time.Second)
	}
	t.Logf("client link of node %d: %d connections accepted, %d refused", leader, link.accepted.Load(), link.refused.Load())
}

// nfPause: a partition leader is frozen with SIGSTOP for longer than the
// broker session timeout, so the others fence it and elect a new leader,
// then thawed. acks=all probes sent to it while it is frozen wait in its
// socket and are the first thing it reads on waking, while it still
// believes it leads: the zombie may append them, but must not
// acknowledge one unless it survives; what it appended is truncated when
// it rejoins as a follower.
func nfPause(t *testing.T, r *nfRun) {
	p, leader, epoch, ctrl := r.victim(t)
	t.Logf("pausing node %d, leader of %s-%d in epoch %d (controller: %d)", leader, nfTopic, p, epoch, ctrl)
	began := time.Now()
	r.c.pause(leader)
	l, e := nfWaitNewLeader(t, r.c, p, epoch, others(leader))
	t.Logf("node %d leads %s-%d in epoch %d %v after SIGSTOP", l, nfTopic, p, e, time.Since(began).Round(time.Millisecond))
	time.Sleep(time.Until(began.Add(nfHold - 2*time.Second)))
	probed := make(chan []error, 1)
	go func() { probed <- r.probe(t, leader, p, 1) }()
	time.Sleep(2 * time.Second) // the probe is in the frozen node's socket
	r.c.resume(leader)
	t.Logf("acks=all probe sent to the frozen node, answered after SIGCONT: %v; then: %v", <-probed, r.probe(t, leader, p, 2))
}

// nfKill: a partition leader is killed with SIGKILL and restarted after
// the hold.
func nfKill(t *testing.T, r *nfRun) {
	p, leader, epoch, _ := r.victim(t)
	t.Logf("killing node %d, leader of %s-%d in epoch %d", leader, nfTopic, p, epoch)
	began := time.Now()
	r.c.kill(leader)
	nfWaitNewLeader(t, r.c, p, epoch, others(leader))
	time.Sleep(time.Until(began.Add(nfHold / 2)))
	r.c.restart(leader)
}
