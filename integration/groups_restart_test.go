package integration

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupsSigkillMidFlight kills gregor with SIGKILL while groups of
// two franz-go members (one classic cooperative-sticky group, one KIP-848
// group) are consuming and committing, and restarts it on the same data;
// member b of each group dies with the broker. Every acknowledged commit
// survives, each group is reloaded with both members, b's session runs
// out, and a takes over b's partitions from b's commits. No record below
// an offset whose commit was acknowledged before the kill is read again
// after the restart; the only records processed twice are those no
// acknowledged commit covered.
func TestGroupsSigkillMidFlight(t *testing.T) {
	t.Parallel()
	dir, port := t.TempDir(), freePort(t)
	p := grpStartGregor(t, dir, port)
	const topic, records = "resume", 12_000
	createTopic(t, p.addr, topic, 6)
	ends := grpProduce(t, p.addr, topic, records)

	type run struct {
		group   string
		opts    []kgo.Opt
		ledger  *grpLedger
		members []*grpMember
	}
	runs := []*run{
		{group: "resume-classic", opts: []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{group: "resume-848", opts: []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}},
	}
	for _, r := range runs {
		r.ledger = newGrpLedger()
		for _, name := range []string{"a", "b"} {
			m := grpNewMember(t, p.addr, name, r.group, topic, r.ledger, r.opts...)
			// Slow enough that the kill finds them mid-way, and held
			// below a third of the records each until the restart: a
			// group whose other member was slow to get its partitions
			// must not finish before the kill.
			m.maxPoll, m.pause = 50, 10*time.Millisecond
			m.quota.Store(records / 6)
			r.members = append(r.members, m.start())
		}
	}
	grpWaitFor(t, 60*time.Second, "both groups to process 3,000 records", func() bool {
		for _, r := range runs {
			n := int64(0)
			for _, m := range r.members {
				if m.processed.Load() == 0 {
					return false // both members must be at work
				}
				n += m.processed.Load()
			}
			if n < 3000 {
				return false
			}
		}
		return true
	})

	p.kill()
	for _, r := range runs {
		// b dies with the broker: after the restart its session must
		// run out on the reloaded group, and a take over its partitions
		// from b's commits.
		r.members[1].ks.kill()
		r.ledger.setPhase(1) // the broker is down
		n := int64(0)
		for _, m := range r.members {
			n += m.processed.Load()
		}
		if n >= records {
			t.Fatalf("%s finished before the kill", r.group)
		}
	}
	time.Sleep(300 * time.Millisecond) // acknowledgements already sent are read
	ackedAtKill := make(map[string]map[int32]int64)
	for _, r := range runs {
		ackedAtKill[r.group] = r.ledger.ackedCopy()
		r.ledger.setPhase(2) // after the restart
	}

	p = grpStartGregor(t, dir, port)
	for _, r := range runs {
		r.members[0].quota.Store(math.MaxInt64)
	}
	adm := kadm.NewClient(newClient(t, p.addr))
	for _, r := range runs {
		// Commits only move forward, so what is read back now is at
		// least what was acknowledged before the kill.
		got := grpCommitted(t, p.addr, r.group, topic)
		for part, want := range ackedAtKill[r.group] {
			if got[part] < want {
				t.Fatalf("%s: partition %d committed at %d after the restart, %d was acknowledged before the kill", r.group, part, got[part], want)
			}
		}
	}
	for _, r := range runs {
		if !grpWaitUntil(60*time.Second, func() bool { return r.ledger.committedTo(ends) }) {
			t.Fatalf("%s did not commit everything within 60 s after the restart: acknowledged %v, end offsets %v", r.group, r.ledger.ackedCopy(), ends)
		}
	}

	// Both groups re-formed around a alone.
	desc := grpDescribe(t, adm, "resume-classic")
	if desc.State != "Stable" || len(desc.Members) != 1 || desc.Members[0].ClientID != "a" {
		t.Fatalf("resume-classic after the restart: state %s, members %+v", desc.State, desc.Members)
	}
	dcg, err := adm.DescribeConsumerGroups(testContext(t, 30*time.Second), "resume-848")
	if g := dcg["resume-848"]; err != nil || g.Err != nil || len(g.Members) != 1 || len(g.AssignedPartitions()[topic]) != 6 {
		t.Fatalf("resume-848 after the restart: %v %+v", err, g)
	}
	for _, r := range runs {
		r.members[0].leave(t)
	}

	for _, r := range runs {
		s := r.ledger.verify(t, ends)
		if s.distinct != records {
			t.Fatalf("%s: %d distinct records processed, want %d", r.group, s.distinct, records)
		}
		if s.perMember["b"] == 0 {
			t.Fatalf("%s: b processed nothing before the kill", r.group)
		}
		if s.dups != s.uncovered["a"]+s.uncovered["b"] {
			t.Fatalf("%s: %d duplicates but %v processings uncovered by commits", r.group, s.dups, s.uncovered)
		}
		// Resume from the commits: nothing below an offset acknowledged
		// before the kill is read after the restart.
		reread, after := 0, 0
		r.ledger.mu.Lock()
		for k, evs := range r.ledger.events {
			for _, e := range evs {
				if e.phase != 2 {
					continue
				}
				after++
				if k.o < ackedAtKill[r.group][k.p] {
					reread++
				}
			}
		}
		r.ledger.mu.Unlock()
		if reread > 0 {
			t.Fatalf("%s: %d records below the commits acknowledged before the kill were read again after the restart", r.group, reread)
		}
		if after == 0 {
			t.Fatalf("%s: nothing was processed after the restart", r.group)
		}
		if got := grpCommitted(t, p.addr, r.group, topic); fmt.Sprint(got) != fmt.Sprint(ends) {
			t.Fatalf("%s: committed %v, end offsets %v", r.group, got, ends)
		}
		t.Logf("%s: %d processed after the restart; duplicates %d (uncovered %v, failed commits %d)",
			r.group, after, s.dups, s.uncovered, s.failed)
	}
}
