package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// TestConsumerGroupCommitAndResume: two franz-go members share a topic's
// partitions, commit, leave; a new member resumes from the committed
// offsets, also after a broker restart.
func TestConsumerGroupCommitAndResume(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, dir, func(c *config.Broker) { c.GroupInitialRebalanceDelayMs = 0 })
	createTopic(t, ts.admin(t), "grp", 4, nil)
	prod := ts.client(t, kgo.DefaultProduceTopic("grp"))
	produceAll(t, prod, keyedRecords("grp", 400, "g"))

	var mu sync.Mutex
	seen := make(map[string]int)
	consume := func(n int) {
		var wg sync.WaitGroup
		total := 0
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for m := 0; m < 2; m++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("grp"),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
				if err != nil {
					t.Error(err)
					return
				}
				defer cl.Close()
				for {
					mu.Lock()
					done := total >= n
					mu.Unlock()
					if done || ctx.Err() != nil {
						break
					}
					fs := cl.PollRecords(ctx, 50)
					fs.EachRecord(func(r *kgo.Record) {
						mu.Lock()
						seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]++
						total++
						mu.Unlock()
					})
					// Commit with a context of its own: the poll's ends
					// when the group has read everything.
					cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
					if err := cl.CommitUncommittedOffsets(cctx); err != nil {
						t.Errorf("commit: %v", err)
					}
					ccancel()
					mu.Lock()
					if total >= n {
						cancel() // wakes the other member's poll
					}
					mu.Unlock()
				}
				cl.LeaveGroup()
			}()
		}
		wg.Wait()
	}
	consume(400)
	if len(seen) != 400 {
		t.Fatalf("group read %d distinct records, want 400", len(seen))
	}
	adm := ts.admin(t)
	offs, err := adm.FetchOffsets(testContext(t), "g1")
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 400 {
		t.Fatalf("committed offsets sum to %d, want 400", committed)
	}

	// Restart: the commits are replayed from __consumer_offsets.
	ts.Close()
	ts = startServer(t, dir)
	offs, err = ts.admin(t).FetchOffsets(testContext(t), "g1")
	if err != nil {
		t.Fatal(err)
	}
	committed = 0
	offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
	if committed != 400 {
		t.Fatalf("after restart, committed offsets sum to %d, want 400", committed)
	}
	groups, err := ts.admin(t).ListGroups(testContext(t))
	if err != nil || len(groups) != 1 || groups.Groups()[0] != "g1" {
		t.Fatalf("list groups: %v %v", groups, err)
	}
}

// waitCoordinator polls DescribeGroups until the coordinator of group has
// loaded its __consumer_offsets partition (the first FindCoordinator
// creates the topic).
func waitCoordinator(t *testing.T, broker *kgo.Broker, group string) {
	t.Helper()
	ctx := testContext(t)
	for {
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorKey = group
		find.CoordinatorKeys = []string{group}
		if _, err := find.RequestWith(ctx, broker); err != nil {
			t.Fatalf("FindCoordinator %s: %v", group, err)
		}
		d := kmsg.NewPtrDescribeGroupsRequest()
		d.Groups = []string{group}
		resp, err := d.RequestWith(ctx, broker)
		if err != nil {
			t.Fatalf("DescribeGroups %s: %v", group, err)
		}
		// An unknown group is Dead, or GROUP_ID_NOT_FOUND from v6: either
		// way its coordinator answered.
		if len(resp.Groups) == 1 && (resp.Groups[0].ErrorCode == 0 || resp.Groups[0].ErrorCode == kerr.GroupIDNotFound.Code) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("coordinator of %s not ready", group)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// classicMember is one JoinGroup/SyncGroup/Heartbeat speaker of a test.
type classicMember struct {
	t            *testing.T
	broker       *kgo.Broker
	group        string
	id           string
	protocolType string // "consumer" when empty
}

// join sends JoinGroup (KIP-394: the first one only fetches a member id)
// and returns the answer; it blocks while the join phase lasts.
func (m *classicMember) join(ctx context.Context, rebalanceTimeoutMs int32) (*kmsg.JoinGroupResponse, error) {
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = m.group, m.id, m.protocolType
		if req.ProtocolType == "" {
			req.ProtocolType = "consumer"
		}
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, rebalanceTimeoutMs
		// A ConsumerProtocolSubscription v0 naming no topics.
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
		resp, err := req.RequestWith(ctx, m.broker)
		if err != nil {
			return nil, err
		}
		if resp.ErrorCode == kerr.MemberIDRequired.Code && m.id == "" {
			m.id = resp.MemberID
			continue
		}
		return resp, nil
	}
}

func (m *classicMember) sync(generation int32, assignments []kmsg.SyncGroupRequestGroupAssignment) int16 {
	m.t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.id, generation
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	req.GroupAssignment = assignments
	resp, err := req.RequestWith(testContext(m.t), m.broker)
	if err != nil {
		m.t.Fatalf("SyncGroup %s: %v", m.id, err)
	}
	return resp.ErrorCode
}

func (m *classicMember) heartbeat(generation int32) error {
	m.t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.id, generation
	resp, err := req.RequestWith(testContext(m.t), m.broker)
	if err != nil {
		m.t.Fatalf("Heartbeat %s: %v", m.id, err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// TestClassicGroupSecondMemberJoins is the rebalance kafka-go's
// consumer_group_rebalance test drives: a stable member hears of a second
// member's join through REBALANCE_IN_PROGRESS on its heartbeat; if it
// rejoins within the rebalance timeout both are in the next generation and
// the leader gets both; if it does not, the join phase ends without it at
// the rebalance timeout, the newcomer leads alone, and the dropped member's
// old id is unknown (it must join afresh), as Kafka's completeJoin.
func TestClassicGroupSecondMemberJoins(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.GroupInitialRebalanceDelayMs = 0 })
	for _, rejoins := range []bool{true, false} {
		t.Run(fmt.Sprintf("rejoins=%v", rejoins), func(t *testing.T) {
			group := fmt.Sprintf("second-joins-%v", rejoins)
			// A connection of its own for each member: a connection's
			// group requests are served one at a time, as Kafka's are,
			// so b's parked JoinGroup would hold back a's requests.
			broker := ts.client(t).SeedBrokers()[0]
			waitCoordinator(t, broker, group)
			a := &classicMember{t: t, broker: broker, group: group}
			b := &classicMember{t: t, broker: ts.client(t).SeedBrokers()[0], group: group}
			const rebalanceTimeoutMs = 1500

			ja, err := a.join(testContext(t), rebalanceTimeoutMs)
			if err != nil || ja.ErrorCode != 0 || ja.Generation != 1 || ja.LeaderID != a.id || len(ja.Members) != 1 {
				t.Fatalf("first join: %+v %v, want generation 1 led by %s alone", ja, err, a.id)
			}
			if code := a.sync(1, []kmsg.SyncGroupRequestGroupAssignment{{MemberID: a.id, MemberAssignment: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}); code != 0 {
				t.Fatalf("first sync: %v", kerr.ErrorForCode(code))
			}
			if err := a.heartbeat(1); err != nil {
				t.Fatalf("stable heartbeat: %v", err)
			}

			type joined struct {
				resp *kmsg.JoinGroupResponse
				err  error
			}
			bDone := make(chan joined, 1)
			go func() {
				r, err := b.join(testContext(t), rebalanceTimeoutMs)
				bDone <- joined{r, err}
			}()
			// The stable member learns of the rebalance on its heartbeat.
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := a.heartbeat(1)
				if err == kerr.RebalanceInProgress {
					break
				}
				if err != nil || time.Now().After(deadline) {
					t.Fatalf("heartbeat during the second join: %v, want REBALANCE_IN_PROGRESS", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			start := time.Now()
			if rejoins {
				ja, err = a.join(testContext(t), rebalanceTimeoutMs)
				jb := <-bDone
				if err != nil || jb.err != nil || ja.ErrorCode != 0 || jb.resp.ErrorCode != 0 {
					t.Fatalf("rejoin: %+v %v / %+v %v", ja, err, jb.resp, jb.err)
				}
				if ja.Generation != 2 || jb.resp.Generation != 2 {
					t.Fatalf("generations %d and %d, want 2", ja.Generation, jb.resp.Generation)
				}
				leader := ja
				if jb.resp.LeaderID == b.id {
					leader = jb.resp
				}
				if len(leader.Members) != 2 {
					t.Fatalf("the leader got %d members, want 2", len(leader.Members))
				}
				if time.Since(start) > rebalanceTimeoutMs*time.Millisecond {
					t.Fatalf("the join phase waited %v although everyone rejoined", time.Since(start))
				}
				return
			}
			jb := <-bDone
			if jb.err != nil || jb.resp.ErrorCode != 0 || jb.resp.Generation != 2 || jb.resp.LeaderID != b.id || len(jb.resp.Members) != 1 {
				t.Fatalf("join without the stable member: %+v %v, want generation 2 led by %s alone", jb.resp, jb.err, b.id)
			}
			if waited := time.Since(start); waited < rebalanceTimeoutMs*time.Millisecond/2 {
				t.Fatalf("the join phase ended after %v, before the rebalance timeout", waited)
			}
			if err := a.heartbeat(1); err != kerr.UnknownMemberID {
				t.Fatalf("dropped member's heartbeat: %v, want UNKNOWN_MEMBER_ID", err)
			}
			late, err := a.join(testContext(t), rebalanceTimeoutMs)
			if err != nil || late.ErrorCode != kerr.UnknownMemberID.Code {
				t.Fatalf("dropped member's rejoin: %+v %v, want UNKNOWN_MEMBER_ID", late, err)
			}
		})
	}
}
