package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

func TestRecordBytes(t *testing.T) {
	be16 := func(v int) []byte { return []byte{byte(v >> 8), byte(v)} }
	be32 := func(v int) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	be64 := func(v int64) []byte {
		return append(be32(int(uint64(v)>>32)), be32(int(uint32(v)))...)
	}
	str := func(s string) []byte { return append(be16(len(s)), s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	rec := offsetCommitRecord("g1", tp{"t", 3}, offsetValue{offset: 42, leaderEpoch: 7, metadata: "m", commitTimestamp: 1000, expireTimestamp: -1})
	if want := cat(be16(1), str("g1"), str("t"), be32(3)); !bytes.Equal(rec.Key, want) {
		t.Errorf("offset key = %x, want %x", rec.Key, want)
	}
	if want := cat(be16(3), be64(42), be32(7), str("m"), be64(1000)); !bytes.Equal(rec.Value, want) {
		t.Errorf("offset value v3 = %x, want %x", rec.Value, want)
	}
	rec = offsetCommitRecord("g1", tp{"t", 3}, offsetValue{offset: 42, leaderEpoch: 7, metadata: "", commitTimestamp: 1000, expireTimestamp: 5000})
	if want := cat(be16(1), be64(42), str(""), be64(1000), be64(5000)); !bytes.Equal(rec.Value, want) {
		t.Errorf("offset value v1 = %x, want %x", rec.Value, want)
	}
	if tomb := offsetTombstone("g1", tp{"t", 3}); tomb.Value != nil || !bytes.Equal(tomb.Key, cat(be16(1), str("g1"), str("t"), be32(3))) {
		t.Errorf("offset tombstone = %x/%x", tomb.Key, tomb.Value)
	}

	g := newClassicGroup("g1", 0, 0)
	inst := "i1"
	g.add(&member{id: "m-1", instanceID: &inst, clientID: "c", clientHost: "/h", rebalanceTimeoutMs: 300, sessionTimeoutMs: 100,
		protocolType: "consumer", protocols: []protocol{{"range", []byte("sub")}}}, nil, 0)
	name := "range"
	g.protocolName = &name
	g.generation = 5
	g.stateTimestamp = 77
	rec = groupMetadataRecord(g, map[string][]byte{"m-1": []byte("as")})
	if want := cat(be16(2), str("g1")); !bytes.Equal(rec.Key, want) {
		t.Errorf("group key = %x, want %x", rec.Key, want)
	}
	want := cat(be16(3), str("consumer"), be32(5), str("range"), str("m-1"), be64(77), be32(1),
		str("m-1"), str("i1"), str("c"), str("/h"), be32(300), be32(100), be32(3), []byte("sub"), be32(2), []byte("as"))
	if !bytes.Equal(rec.Value, want) {
		t.Errorf("group value = %x\nwant          %x", rec.Value, want)
	}
}

// FuzzReplay feeds arbitrary records to the loader: it may fail, never
// panic.
func FuzzReplay(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 0}, []byte{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 2, 0, 1, 'g'}, []byte{0, 3, 0, 1, 'c', 0, 0, 0, 1, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 2, 0, 1, 'g'}, []byte(nil))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		recs := []Record{{Key: key, Value: value}, {Key: key}}
		groups, err := replay(0, coordtest.SeqOf(recs), 0, slog.New(slog.DiscardHandler))
		if err == nil && groups == nil {
			t.Fatal("nil groups without error")
		}
	})
}

func TestLoadError(t *testing.T) {
	h := newHarness(t, testConfig())
	failing := iter.Seq2[Record, error](func(yield func(Record, error) bool) {
		yield(Record{}, errors.New("disk read failed"))
	})
	err := h.c.Load(context.Background(), 1, failing)
	if err == nil || !strings.Contains(err.Error(), "disk read failed") {
		t.Fatalf("Load = %v, want the read error", err)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "a" // partition 1 of 4
	if got := h.c.Heartbeat(context.Background(), hb)().ErrorCode; got != errNotCoordinator {
		t.Fatalf("heartbeat after failed load = %d, want NOT_COORDINATOR", got)
	}
	if err := h.c.Load(context.Background(), 4, coordtest.SeqOf(nil)); err == nil {
		t.Fatal("Load of partition 4 of 4 succeeded")
	}
}

// TestReloadOffsets commits many offsets through the public API, restarts on
// the same store and checks every group fetches the same offsets.
func TestReloadOffsets(t *testing.T) {
	h := newHarness(t, testConfig())
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	groups := []string{"g1", "g2", "g3", "g4", "g5", "orders", "é"}
	for range 300 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group = groups[rng.IntN(len(groups))]
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = fmt.Sprintf("t%d", rng.IntN(3))
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = int32(rng.IntN(4))
		rp.Offset = rng.Int64N(1 << 40)
		rp.LeaderEpoch = int32(rng.IntN(10))
		md := fmt.Sprint(rng.IntN(100))
		rp.Metadata = &md
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		if resp := h.c.OffsetCommit(ctx, req)(); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("commit: %v", resp.Topics[0].Partitions[0].ErrorCode)
		}
	}
	fetchAll := func() string {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		for _, g := range groups {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = g
			req.Groups = append(req.Groups, rg)
		}
		var b strings.Builder
		for _, g := range h.c.OffsetFetch(ctx, req)().Groups {
			fmt.Fprintf(&b, "%s err=%d:", g.Group, g.ErrorCode)
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					fmt.Fprintf(&b, " %s/%d=%d@%d:%s", t.Topic, p.Partition, p.Offset, p.LeaderEpoch, *p.Metadata)
				}
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	before := fetchAll()
	if strings.Count(before, "=") < 50 {
		t.Fatalf("nothing committed: %s", before)
	}
	h.restart()
	if after := fetchAll(); after != before {
		t.Fatalf("offsets changed across restart:\nbefore %s\nafter  %s", before, after)
	}
}

func TestLongIDs(t *testing.T) {
	cfg := testConfig()
	cfg.GroupInitialRebalanceDelayMs = 0
	h := newHarness(t, cfg)
	ctx := context.Background()
	group := strings.Repeat("g", 10000)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 9
	join.Group = group
	join.SessionTimeoutMillis = 10000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	client := ClientInfo{ClientID: strings.Repeat("c", 10000), ClientHost: "/h"}
	resp := h.c.JoinGroup(ctx, client, join)()
	if resp.ErrorCode != errMemberIDRequired || resp.MemberID != client.ClientID+"-1" {
		t.Fatalf("first join = %d with member id of %d bytes", resp.ErrorCode, len(resp.MemberID))
	}
	join.MemberID = resp.MemberID
	if resp = h.c.JoinGroup(ctx, client, join)(); resp.ErrorCode != 0 || resp.Generation != 1 {
		t.Fatalf("second join = %d, generation %d", resp.ErrorCode, resp.Generation)
	}
	unknown := *join
	unknown.MemberID = strings.Repeat("m", 10000)
	if resp = h.c.JoinGroup(ctx, client, &unknown)(); resp.ErrorCode != errUnknownMemberID {
		t.Fatalf("unknown long member id = %d", resp.ErrorCode)
	}
}

func TestRandomUUID(t *testing.T) {
	a, b := randomUUID(), randomUUID()
	if len(a) != 36 || a == b || a[14] != '4' || strings.Count(a, "-") != 4 {
		t.Fatalf("uuids %q %q", a, b)
	}
}

// TestCallerGivesUp: a caller whose context ends gets an answer and leaves
// the coordinator working.
func TestCallerGivesUp(t *testing.T) {
	h := newHarness(t, testConfig())
	ctx, cancel := context.WithCancel(context.Background())
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3 // joins at once, parks for the initial delay
	join.Group = "g1"
	join.SessionTimeoutMillis = 10000
	join.RebalanceTimeoutMillis = 10000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	done := make(chan *kmsg.JoinGroupResponse)
	go func() { done <- h.c.JoinGroup(ctx, ClientInfo{ClientID: "c"}, join)() }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if r := <-done; r.ErrorCode != errCoordinatorNotAvailable || r.Version != 3 {
		t.Fatalf("abandoned join = %+v", r)
	}
	h.advance(3 * time.Second) // the parked join is answered into the void
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g1", "c-1", 1
	if got := h.c.Heartbeat(context.Background(), hb)().ErrorCode; got != 0 {
		t.Fatalf("heartbeat after abandoned join = %d", got)
	}
}

// TestCloseStopsEverything: Close answers parked requests, stops every
// goroutine of the package and leaves later calls answering NOT_COORDINATOR.
func TestCloseStopsEverything(t *testing.T) {
	// The shard goroutines run the coordinator runtime's code.
	pkgs := []string{"gregor/broker/group.", "gregor/broker/coord."}
	if gs := coordtest.GoroutinesIn(pkgs...); len(gs) > 0 {
		t.Logf("goroutines before the test (from earlier tests): %d", len(gs))
	}
	cfg := testConfig()
	store := newMemStore()
	c, err := newCoordinator(cfg, store, SystemClock{}, randomUUID)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for p := range cfg.OffsetsTopicPartitions {
		if err := c.Load(ctx, p, coordtest.SeqOf(nil)); err != nil {
			t.Fatal(err)
		}
	}
	store.Set(true) // a commit stuck in the store must be aborted
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g2"
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group = "g1"
	join.SessionTimeoutMillis = 10000
	join.RebalanceTimeoutMillis = 60000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	var wg sync.WaitGroup
	var joinCode, commitCode int16
	wg.Add(2)
	go func() { defer wg.Done(); joinCode = c.JoinGroup(ctx, ClientInfo{ClientID: "c"}, join)().ErrorCode }()
	go func() { defer wg.Done(); commitCode = c.OffsetCommit(ctx, commit)().Topics[0].Partitions[0].ErrorCode }()
	for store.Held() == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Close()
	wg.Wait()
	if joinCode != errNotCoordinator || commitCode != errNotCoordinator {
		t.Fatalf("parked requests at Close: join %d, commit %d, want NOT_COORDINATOR", joinCode, commitCode)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g1"
	if got := c.Heartbeat(ctx, hb)().ErrorCode; got != errNotCoordinator {
		t.Fatalf("heartbeat after Close = %d", got)
	}
	c.Close() // idempotent
	coordtest.NoGoroutinesLeft(t, 2*time.Second, pkgs...)
}

// TestMembersOnRealClock runs consumers as real clients do, each on its own
// goroutine with the wall clock: join, sync, heartbeat, rejoin when told.
// They must settle on one generation where each has its own assignment, and
// settle again after one leaves.
func TestMembersOnRealClock(t *testing.T) {
	cfg := testConfig()
	cfg.GroupInitialRebalanceDelayMs = 100
	c, err := New(cfg, newMemStore(), SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for p := range cfg.OffsetsTopicPartitions {
		if err := c.Load(context.Background(), p, coordtest.SeqOf(nil)); err != nil {
			t.Fatal(err)
		}
	}
	type view struct {
		member     string
		generation int32
		assignment string
	}
	views := make(chan view, 1000)
	const n = 5
	ctxs := make([]context.CancelFunc, n)
	var wg sync.WaitGroup
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			runConsumer(ctx, c, fmt.Sprintf("client%d", i), func(member string, gen int32, assignment string) {
				views <- view{member, gen, assignment}
			})
		}()
	}
	settle := func(members int) {
		t.Helper()
		latest := map[string]view{}
		timeout := time.After(10 * time.Second)
		for {
			select {
			case v := <-views:
				latest[v.member] = v
			case <-timeout:
				t.Fatalf("group did not settle on %d members: %+v", members, latest)
			}
			var top int32
			for _, v := range latest {
				top = max(top, v.generation)
			}
			count := 0
			for _, v := range latest {
				if v.generation == top {
					if v.assignment != v.member {
						t.Fatalf("member %s got assignment %q", v.member, v.assignment)
					}
					count++
				}
			}
			if count == members {
				desc := kmsg.NewPtrDescribeGroupsRequest()
				desc.Groups = []string{"g1"}
				d := c.DescribeGroups(context.Background(), desc)().Groups[0]
				if d.State == "Stable" && len(d.Members) == members {
					return
				}
			}
		}
	}
	settle(n)
	ctxs[0]()
	settle(n - 1)
	for _, cancel := range ctxs[1:] {
		cancel()
	}
	wg.Wait()
}

// runConsumer is a classic consumer's group loop, reporting every assignment
// it receives. The leader assigns each member its own id.
func runConsumer(ctx context.Context, c *Coordinator, client string, report func(member string, gen int32, assignment string)) {
	memberID := ""
	defer func() {
		if memberID == "" {
			return
		}
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version = 5
		leave.Group = "g1"
		leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: memberID}}
		c.LeaveGroup(context.Background(), leave)()
	}()
	for ctx.Err() == nil {
		join := kmsg.NewPtrJoinGroupRequest()
		join.Version = 9
		join.Group = "g1"
		join.MemberID = memberID
		join.SessionTimeoutMillis = 6000
		join.RebalanceTimeoutMillis = 3000
		join.ProtocolType = "consumer"
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: consumerMetadata([]string{"t"})}}
		jr := c.JoinGroup(ctx, ClientInfo{ClientID: client, ClientHost: "/127.0.0.1"}, join)()
		switch jr.ErrorCode {
		case 0:
		case errMemberIDRequired:
			memberID = jr.MemberID
			continue
		case errUnknownMemberID:
			memberID = ""
			continue
		default:
			continue
		}
		memberID = jr.MemberID
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Version = 5
		sync.Group = "g1"
		sync.MemberID = memberID
		sync.Generation = jr.Generation
		sync.ProtocolType = jr.ProtocolType
		sync.Protocol = jr.Protocol
		if jr.LeaderID == memberID {
			for _, m := range jr.Members {
				sync.GroupAssignment = append(sync.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.MemberID, MemberAssignment: []byte(m.MemberID)})
			}
		}
		sr := c.SyncGroup(ctx, sync)()
		if sr.ErrorCode != 0 {
			continue
		}
		report(memberID, jr.Generation, string(sr.MemberAssignment))
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.MemberID, hb.Generation = "g1", memberID, jr.Generation
			if c.Heartbeat(ctx, hb)().ErrorCode != 0 {
				break
			}
		}
	}
}

// TestCallSurvivesPanic: an operation that panics answers
// UNKNOWN_SERVER_ERROR and leaves its shard serving.
func TestCallSurvivesPanic(t *testing.T) {
	h := newHarness(t, testConfig())
	s := h.c.rt.ShardFor("g1")
	got := coord.Call(h.c.rt, context.Background(), s, func(*machine, func(int16)) { panic("boom") }, func(code int16) int16 { return code })
	if got != errUnknownServerError {
		t.Fatalf("panicking call = %d, want UNKNOWN_SERVER_ERROR", got)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g1"
	if code := h.c.Heartbeat(context.Background(), hb)().ErrorCode; code != errUnknownMemberID {
		t.Fatalf("heartbeat after panic = %d, want UNKNOWN_MEMBER_ID", code)
	}
}

// TestLoadInProgress: while a partition replays, its groups answer
// COORDINATOR_LOAD_IN_PROGRESS (heartbeats blindly succeed), and an Unload
// meanwhile makes the Load fail.
func TestLoadInProgress(t *testing.T) {
	cfg := testConfig()
	c, err := New(cfg, newMemStore(), coordtest.NewFakeClock())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const p = 2 // the partition of "g1"
	started, release := make(chan struct{}), make(chan struct{})
	slow := func(yield func(Record, error) bool) {
		close(started)
		<-release
		yield(offsetCommitRecord("g1", tp{"t", 0}, offsetValue{offset: 9, leaderEpoch: -1, expireTimestamp: -1}), nil)
	}
	loaded := make(chan error)
	go func() { loaded <- c.Load(ctx, p, slow) }()
	<-started

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.ProtocolType = "g1", 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if code := c.JoinGroup(ctx, ClientInfo{ClientID: "c"}, join)().ErrorCode; code != errCoordinatorLoadInProgress {
		t.Errorf("join while loading = %d", code)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group = "g1"
	if code := c.Heartbeat(ctx, hb)().ErrorCode; code != 0 {
		t.Errorf("heartbeat while loading = %d, want NONE", code)
	}
	if code := c.ListGroups(ctx, kmsg.NewPtrListGroupsRequest())().ErrorCode; code != errCoordinatorLoadInProgress {
		t.Errorf("list while loading = %d", code)
	}
	close(release)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 7
	fetch.Group = "g1"
	if r := c.OffsetFetch(ctx, fetch)(); r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].Offset != 9 {
		t.Fatalf("fetch after load = %+v", r)
	}

	started, release = make(chan struct{}), make(chan struct{})
	slow2 := func(yield func(Record, error) bool) {
		close(started)
		<-release
	}
	go func() { loaded <- c.Load(ctx, p, slow2) }()
	<-started
	c.Unload(p)
	close(release)
	if err := <-loaded; err == nil || !strings.Contains(err.Error(), "unloaded while loading") {
		t.Fatalf("load across unload = %v", err)
	}
	if code := c.Heartbeat(ctx, hb)().ErrorCode; code != errNotCoordinator {
		t.Fatalf("heartbeat after aborted load = %d", code)
	}
}
