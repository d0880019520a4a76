package group

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// TestConsumerRecordBytes pins the consumer group records to the bytes
// Kafka's generated serializers write for the same values.
func TestConsumerRecordBytes(t *testing.T) {
	be16 := func(v int) []byte { return []byte{byte(v >> 8), byte(v)} }
	be32 := func(v int) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	be64 := func(v int64) []byte {
		return append(be32(int(uint64(v)>>32)), be32(int(uint32(v)))...)
	}
	str := func(s string) []byte { return append(be16(len(s)), s...) }
	cstr := func(s string) []byte { return append([]byte{byte(len(s) + 1)}, s...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	id := topicID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	assignor := "range"
	inst := "i1"
	mem := &consumerMember{
		id: "m1", instanceID: &inst, clientID: "c", clientHost: "/h", topicNames: []string{"t"},
		rebalanceTimeoutMs: 30000, serverAssignor: assignor,
		epoch: 3, previousEpoch: 2, state: memberUnrevokedPartitions,
		assigned: tpSet{id: {0, 1}}, revoking: tpSet{},
	}
	tests := []struct {
		name       string
		rec        Record
		key, value []byte
	}{
		{"epoch", cgEpochRecord("g", 5), cat(be16(3), str("g")), cat(be16(0), be32(5), []byte{0})},
		{"target epoch", cgTargetEpochRecord("g", 7, 0), cat(be16(6), str("g")), cat(be16(0), be32(7), []byte{0})},
		{
			"subscription metadata",
			cgSubscriptionMetadataRecord("g", map[string]topicMeta{"t": {id: id, name: "t", partitions: 4}}),
			cat(be16(4), str("g")),
			cat(be16(0), []byte{2}, id[:], cstr("t"), be32(4), []byte{1, 0, 0}),
		},
		{
			"member",
			cgMemberRecord("g", mem),
			cat(be16(5), str("g"), str("m1")),
			cat(be16(0), cstr("i1"), []byte{0}, cstr("c"), cstr("/h"), []byte{2}, cstr("t"), []byte{0}, be32(30000), cstr("range"), []byte{0}),
		},
		{
			"target member",
			cgTargetMemberRecord("g", "m1", tpSet{id: {0, 1}}),
			cat(be16(7), str("g"), str("m1")),
			cat(be16(0), []byte{2}, id[:], []byte{3}, be32(0), be32(1), []byte{0, 0}),
		},
		{
			"current assignment",
			cgCurrentAssignmentRecord("g", mem),
			cat(be16(8), str("g"), str("m1")),
			cat(be16(0), be32(3), be32(2), []byte{1}, []byte{2}, id[:], []byte{3}, be32(0), be32(1), []byte{0}, []byte{1}, []byte{0}),
		},
		{
			"regex",
			cgRegexRecord("g", "a.*", resolvedRegex{topics: []string{"ab"}, version: 9, timestamp: 1000}),
			cat(be16(16), str("g"), str("a.*")),
			cat(be16(0), []byte{2}, cstr("ab"), be64(9), be64(1000), []byte{0}),
		},
		{"member tombstone", tombstone(cgMemberMetadataKeyVersion, "g", "m1"), cat(be16(5), str("g"), str("m1")), nil},

		// AssignmentTimestamp is tagged field 0 (KIP-1263), an int64.
		{"target epoch and time", cgTargetEpochRecord("g", 7, 1234), cat(be16(6), str("g")), cat(be16(0), be32(7), []byte{1, 0, 8}, be64(1234))},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.rec.Key, tt.key) {
			t.Errorf("%s key = %x, want %x", tt.name, tt.rec.Key, tt.key)
		}
		if !bytes.Equal(tt.rec.Value, tt.value) {
			t.Errorf("%s value = %x, want %x", tt.name, tt.rec.Value, tt.value)
		}
	}

	// And they read back.
	sub, err := decodeCGMember(tests[3].value)
	if err != nil || *sub.instanceID != "i1" || sub.rackID != nil || sub.clientHost != "/h" || !slices.Equal(sub.topicNames, []string{"t"}) || sub.regex != nil || sub.rebalanceTimeoutMs != 30000 || *sub.serverAssignor != "range" {
		t.Errorf("member decodes to %+v, %v", sub, err)
	}
	cur, err := decodeCGCurrentAssignment(tests[5].value)
	if err != nil || cur.epoch != 3 || cur.previousEpoch != 2 || cur.state != memberUnrevokedPartitions || !cur.assigned.equal(tpSet{id: {0, 1}}) || len(cur.revoking) != 0 {
		t.Errorf("current assignment decodes to %+v, %v", cur, err)
	}
	meta, err := decodeCGSubscriptionMetadata(tests[2].value)
	if err != nil || meta["t"] != (topicMeta{id: id, name: "t", partitions: 4}) {
		t.Errorf("subscription metadata decodes to %v, %v", meta, err)
	}
	re, err := decodeCGRegex(tests[6].value)
	if err != nil || !slices.Equal(re.topics, []string{"ab"}) || re.version != 9 || re.timestamp != 1000 {
		t.Errorf("regex decodes to %+v, %v", re, err)
	}
	if epoch, ts, err := decodeTargetEpoch(tests[len(tests)-1].value); err != nil || epoch != 7 || ts != 1234 {
		t.Errorf("target epoch decodes to %d at %d, %v; want 7 at 1234", epoch, ts, err)
	}
	// Tagged fields of later Kafka versions (MetadataHash, tag 0) are
	// skipped.
	withTag := cat(be16(0), be32(5), []byte{1, 0, 8}, be64(42))
	if e, err := decodeCGEpoch(withTag); err != nil || e != 5 {
		t.Errorf("epoch with a tagged field = %d, %v", e, err)
	}
}

// TestConsumerRecordsBadInput: truncated, oversized and unknown-version
// values fail without panicking or allocating by claimed lengths.
func TestConsumerRecordsBadInput(t *testing.T) {
	good := cgCurrentAssignmentRecord("g", &consumerMember{id: "m", assigned: tpSet{testTopicID("t"): {1, 2, 3}}, revoking: tpSet{}}).Value
	for n := range len(good) {
		if _, err := decodeCGCurrentAssignment(good[:n]); err == nil {
			t.Errorf("a value cut to %d bytes decoded", n)
		}
	}
	huge := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if _, err := decodeCGCurrentAssignment(huge); err == nil {
		t.Error("a 4-billion-topic array decoded")
	}
	if _, err := decodeCGEpoch([]byte{0, 1, 0, 0, 0, 5, 0}); err == nil {
		t.Error("value version 1 decoded")
	}
	if _, err := decodeCGEpoch(append(cgEpochRecord("g", 1).Value, 9)); err == nil {
		t.Error("trailing bytes decoded")
	}
	if _, err := decodeCGKey(cgMemberMetadataKeyVersion, []byte{0, 5, 0, 1, 'g'}); err == nil {
		t.Error("a member key without member decoded")
	}
}

// TestReplayConsumerRecords: records of a consumer group replay into the
// group that wrote them, and tombstones remove it, leaving its offsets.
func TestReplayConsumerRecords(t *testing.T) {
	id := testTopicID("t")
	m := &consumerMember{id: "m1", clientID: "c", topicNames: []string{"t"}, rebalanceTimeoutMs: 100, epoch: 4, previousEpoch: 3, assigned: tpSet{id: {0}}, revoking: tpSet{id: {1}}, state: memberUnrevokedPartitions}
	recs := []Record{
		offsetCommitRecord("g", tp{"t", 0}, offsetValue{offset: 7, leaderEpoch: -1, expireTimestamp: -1}),
		cgMemberRecord("g", m),
		cgEpochRecord("g", 5),
		cgSubscriptionMetadataRecord("g", map[string]topicMeta{"t": {id: id, name: "t", partitions: 2}}),
		cgTargetMemberRecord("g", "m1", tpSet{id: {0}}),
		cgTargetEpochRecord("g", 5, 0),
		cgCurrentAssignmentRecord("g", m),
		cgRegexRecord("g", "t.*", resolvedRegex{topics: []string{"t"}}),
	}
	lp, err := replay(0, coordtest.SeqOf(recs), 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	g := lp.consumers["g"]
	if g == nil || len(lp.classic) != 0 {
		t.Fatalf("replayed %v classic, %v consumer", lp.classic, lp.consumers)
	}
	got := g.members["m1"]
	if g.epoch != 5 || g.assignmentEpoch != 5 || got == nil || !got.sameAssignment(m) || !got.sameSubscription(m) || g.offsets[tp{"t", 0}].offset != 7 {
		t.Fatalf("group = %+v, member %+v", g, got)
	}
	if !g.partitionOwned(id, 0) || !g.partitionOwned(id, 1) || g.state() != cgReconciling || len(g.regexes) != 1 {
		t.Errorf("owners %v, state %s, regexes %v", g.owners, g.state(), g.regexes)
	}
	tombs := append(memberTombstones("g", "m1"), consumerTombstones(newConsumerGroup("g", 0))...)
	lp, err = replay(0, coordtest.SeqOf(append(recs, tombs...)), 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(lp.consumers) != 0 || lp.classic["g"] == nil || lp.classic["g"].offsets[tp{"t", 0}].offset != 7 {
		t.Errorf("after tombstones: consumers %v, classic %v", lp.consumers, lp.classic)
	}
	// A consumer record for a live classic group fails the load.
	classic := groupMetadataRecord(newClassicGroup("g", 0, 0), nil)
	if _, err := replay(0, coordtest.SeqOf([]Record{classic, cgEpochRecord("g", 1)}), 0, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("an empty classic group's metadata blocked the consumer group: %v", err)
	}
}

// FuzzConsumerRecords: no consumer group record crashes the loader.
func FuzzConsumerRecords(f *testing.F) {
	m := &consumerMember{id: "m", topicNames: []string{"t"}, assigned: tpSet{testTopicID("t"): {0, 1}}, revoking: tpSet{}}
	for _, r := range []Record{
		cgEpochRecord("g", 1), cgMemberRecord("g", m), cgCurrentAssignmentRecord("g", m),
		cgTargetMemberRecord("g", "m", m.assigned), cgRegexRecord("g", "x", resolvedRegex{topics: []string{"t"}}),
		cgSubscriptionMetadataRecord("g", map[string]topicMeta{"t": {name: "t", partitions: 1}}),
	} {
		f.Add(r.Key, r.Value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		recs := []Record{{Key: key, Value: value}, {Key: key}}
		_, _ = replay(0, coordtest.SeqOf(recs), 0, slog.New(slog.DiscardHandler))
	})
}

// checkAssignment verifies that every partition of the subscribed topics
// goes to exactly one member subscribed to its topic.
func checkAssignment(t *testing.T, spec assignSpec, got map[string]tpSet) {
	t.Helper()
	seen := make(map[topicID]map[int32]string)
	for _, m := range spec.members {
		for id, ps := range got[m.id] {
			if !slices.Contains(m.topics, id) {
				t.Fatalf("%s got %s, which it does not subscribe to", m.id, spec.names[id])
			}
			for _, p := range ps {
				if p < 0 || p >= spec.topics[id] {
					t.Fatalf("%s got %s-%d, which does not exist", m.id, spec.names[id], p)
				}
				if seen[id] == nil {
					seen[id] = map[int32]string{}
				}
				if o, ok := seen[id][p]; ok {
					t.Fatalf("%s-%d given to %s and %s", spec.names[id], p, o, m.id)
				}
				seen[id][p] = m.id
			}
		}
	}
	for id, n := range spec.topics {
		subscribed := false
		for _, m := range spec.members {
			subscribed = subscribed || slices.Contains(m.topics, id)
		}
		if subscribed && int32(len(seen[id])) != n {
			t.Fatalf("%s: %d of %d partitions assigned", spec.names[id], len(seen[id]), n)
		}
	}
}

func makeSpec(topics map[string]int32, members map[string][]string, current map[string]tpSet) assignSpec {
	spec := assignSpec{topics: map[topicID]int32{}, names: map[topicID]string{}}
	for n, p := range topics {
		spec.topics[testTopicID(n)] = p
		spec.names[testTopicID(n)] = n
	}
	for _, id := range sortedKeys(members) {
		am := assignMember{id: id, current: current[id]}
		for _, n := range members[id] {
			am.topics = append(am.topics, testTopicID(n))
		}
		slices.SortFunc(am.topics, func(a, b topicID) int { return slices.Compare(a[:], b[:]) })
		spec.members = append(spec.members, am)
	}
	return spec
}

func counts(got map[string]tpSet) (lo, hi int) {
	lo = -1
	for _, s := range got {
		n := s.size()
		if lo == -1 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi
}

func TestUniformAssignor(t *testing.T) {
	tests := []struct {
		name    string
		topics  map[string]int32
		members map[string][]string
		current map[string]tpSet
		spread  int // max - min partitions per member
	}{
		{"one member", map[string]int32{"t1": 5}, map[string][]string{"a": {"t1"}}, nil, 0},
		{"even", map[string]int32{"t1": 6, "t2": 6}, map[string][]string{"a": {"t1", "t2"}, "b": {"t1", "t2"}, "c": {"t1", "t2"}}, nil, 0},
		{"uneven", map[string]int32{"t1": 7}, map[string][]string{"a": {"t1"}, "b": {"t1"}, "c": {"t1"}}, nil, 1},
		{"more members than partitions", map[string]int32{"t1": 2}, map[string][]string{"a": {"t1"}, "b": {"t1"}, "c": {"t1"}}, nil, 1},
		{"new member takes its share", map[string]int32{"t1": 4}, map[string][]string{"a": {"t1"}, "b": {"t1"}},
			map[string]tpSet{"a": {testTopicID("t1"): {0, 1, 2, 3}}}, 0},
		{"heterogeneous", map[string]int32{"t1": 4, "t2": 4}, map[string][]string{"a": {"t1"}, "b": {"t1", "t2"}, "c": {"t2"}}, nil, 1},
		{"stale current ignored", map[string]int32{"t1": 2}, map[string][]string{"a": {"t1"}},
			map[string]tpSet{"a": {testTopicID("t1"): {0, 1, 5}, testTopicID("gone"): {0}}}, 0},
		{"no subscriptions", map[string]int32{"t1": 2}, map[string][]string{"a": {}}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := makeSpec(tt.topics, tt.members, tt.current)
			got := uniformAssignor{}.assign(spec)
			checkAssignment(t, spec, got)
			if lo, hi := counts(got); hi-lo > tt.spread {
				t.Errorf("counts range %d..%d, want a spread of at most %d: %v", lo, hi, tt.spread, got)
			}
		})
	}
}

// TestUniformAssignorSticky: when a member joins or leaves, only the
// partitions needed for balance move.
func TestUniformAssignorSticky(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	topics := map[string]int32{"t1": 12, "t2": 7}
	members := map[string][]string{}
	var current map[string]tpSet
	for step := range 30 {
		id := fmt.Sprintf("m%d", r.IntN(8))
		if _, ok := members[id]; ok && len(members) > 1 {
			delete(members, id)
		} else {
			members[id] = []string{"t1", "t2"}
		}
		spec := makeSpec(topics, members, current)
		got := uniformAssignor{}.assign(spec)
		checkAssignment(t, spec, got)
		if lo, hi := counts(got); hi-lo > 1 {
			t.Fatalf("step %d: counts %d..%d", step, lo, hi)
		}
		// Each remaining member keeps at least min(what it had, its
		// new share) of its partitions.
		for mid, s := range got {
			kept := 0
			for tid, ps := range current[mid] {
				for _, p := range ps {
					if s.has(tid, p) {
						kept++
					}
				}
			}
			if want := min(current[mid].size(), s.size()); kept < want {
				t.Fatalf("step %d: %s kept %d of %d, want %d", step, mid, kept, current[mid].size(), want)
			}
		}
		current = got
	}
}

func TestRangeAssignor(t *testing.T) {
	i1 := "i1"
	spec := makeSpec(map[string]int32{"t1": 5, "t2": 3}, map[string][]string{"a": {"t1", "t2"}, "b": {"t1", "t2"}, "z": {"t1"}}, nil)
	spec.members[2].instanceID = &i1 // z is static: it goes first
	got := rangeAssignor{}.assign(spec)
	checkAssignment(t, spec, got)
	t1, t2 := testTopicID("t1"), testTopicID("t2")
	want := map[string]tpSet{
		"z": {t1: {0, 1}},
		"a": {t1: {2, 3}, t2: {0, 1}},
		"b": {t1: {4}, t2: {2}},
	}
	for id, w := range want {
		if !got[id].equal(w) {
			t.Errorf("%s = %v, want %v", id, got[id], w)
		}
	}
}

// TestUniformAssignorJoinAtScale: issue 17's size, 1,000 members over ten
// topics of 1,000 partitions, the last member joining a balanced group.
// Every partition is assigned once, every member ends with 10, and the
// 999 members only give partitions up (the assignor is sticky).
func TestUniformAssignorJoinAtScale(t *testing.T) {
	topics := map[string]int32{}
	var names []string
	for i := range 10 {
		n := fmt.Sprintf("t%d", i)
		topics[n] = 1000
		names = append(names, n)
	}
	members := map[string][]string{}
	for i := range 999 {
		members[fmt.Sprintf("m%04d", i)] = names
	}
	before := uniformAssignor{}.assign(makeSpec(topics, members, nil))
	members["m9999"] = names
	after := uniformAssignor{}.assign(makeSpec(topics, members, before))
	if lo, hi := counts(after); lo != 10 || hi != 10 {
		t.Fatalf("partition counts from %d to %d, want 10 each", lo, hi)
	}
	seen := map[topicID]map[int32]string{}
	for id, s := range after {
		for tid, ps := range s {
			if seen[tid] == nil {
				seen[tid] = map[int32]string{}
			}
			for _, p := range ps {
				if other, dup := seen[tid][p]; dup {
					t.Fatalf("partition %v/%d assigned to %s and %s", tid, p, other, id)
				}
				seen[tid][p] = id
				if id != "m9999" && !before[id].has(tid, p) {
					t.Errorf("%s was given partition %v/%d it did not have: not sticky", id, tid, p)
				}
			}
		}
	}
	total := 0
	for _, ps := range seen {
		total += len(ps)
	}
	if total != 10000 {
		t.Fatalf("%d partitions assigned, want 10000", total)
	}
}

// BenchmarkUniformAssignor is a rebalance after one member joined: 100
// members over 1,000 partitions (two topics of 500), and issue 17's 1,000
// members over 10,000 (ten topics of 1,000); and the second target of a
// burst of joins (from-one), where the first member holds all 10,000
// partitions and 999 others have joined since.
func BenchmarkUniformAssignor(b *testing.B) {
	b.Run("1000x10000-from-one", func(b *testing.B) {
		topics := map[string]int32{}
		var names []string
		for i := range 10 {
			n := fmt.Sprintf("t%d", i)
			topics[n] = 1000
			names = append(names, n)
		}
		members := map[string][]string{"m0000": names}
		current := uniformAssignor{}.assign(makeSpec(topics, members, nil))
		for i := 1; i < 1000; i++ {
			members[fmt.Sprintf("m%04d", i)] = names
		}
		spec := makeSpec(topics, members, current)
		b.ReportAllocs()
		for b.Loop() {
			uniformAssignor{}.assign(spec)
		}
	})
	for _, size := range []struct{ members, topics, each int }{{100, 2, 500}, {1000, 10, 1000}} {
		b.Run(fmt.Sprintf("%dx%d", size.members, size.topics*size.each), func(b *testing.B) {
			topics := map[string]int32{}
			var names []string
			for i := range size.topics {
				n := fmt.Sprintf("t%d", i)
				topics[n] = int32(size.each)
				names = append(names, n)
			}
			members := map[string][]string{}
			for i := range size.members - 1 {
				members[fmt.Sprintf("m%04d", i)] = names
			}
			current := uniformAssignor{}.assign(makeSpec(topics, members, nil))
			members["m9999"] = names
			spec := makeSpec(topics, members, current)
			b.ReportAllocs()
			for b.Loop() {
				uniformAssignor{}.assign(spec)
			}
		})
	}
}

// TestConsumerLongIDs: ids that fit a record key work; longer ones are
// refused rather than written as corrupt keys.
func TestConsumerLongIDs(t *testing.T) {
	h := newHarness(t, testConfig())
	h.topics.set("t1:1")
	h.c.TopicsChanged()
	for _, tt := range []struct {
		n    int
		want int16
	}{{10000, 0}, {40000, errInvalidRequest}} {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = strings.Repeat("g", tt.n)
		req.MemberID = "m1"
		req.RebalanceTimeoutMillis = 1000
		req.SubscribedTopicNames = []string{"t1"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		r := h.c.ConsumerGroupHeartbeat(context.Background(), ClientInfo{}, req)()
		if r.ErrorCode != tt.want {
			t.Errorf("group id of %d bytes: %s, want %s", tt.n, coordtest.ErrName(r.ErrorCode), coordtest.ErrName(tt.want))
		}
		if tt.want == 0 && (r.MemberEpoch != 1 || r.Assignment == nil || len(r.Assignment.Topics) != 1) {
			t.Errorf("group id of %d bytes: %+v", tt.n, r)
		}
	}
	h.restart()
	d := h.c.ConsumerGroupDescribe(context.Background(), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{strings.Repeat("g", 10000), ""}})()
	if d.Groups[0].ErrorCode != 0 || len(d.Groups[0].Members) != 1 || d.Groups[1].ErrorCode != errInvalidGroupID {
		t.Errorf("describe after restart: %+v", d.Groups)
	}
}

// BenchmarkConsumerHeartbeat is the steady state of a stable group of 100
// members over 1,000 partitions: keep-alive heartbeats through the
// Coordinator.
func BenchmarkConsumerHeartbeat(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	// The reconciling rounds below run within one assignment interval.
	cfg.ConsumerGroupAssignmentIntervalMs = 0
	ft := newFakeTopics()
	ft.set("t1:1000")
	cfg.Topics = ft
	c, err := New(cfg, &nopStore{}, SystemClock{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	for p := range cfg.OffsetsTopicPartitions {
		if err := c.Load(context.Background(), p, coordtest.SeqOf(nil)); err != nil {
			b.Fatal(err)
		}
	}
	hb := func(id string, epoch int32, owned []int32, join bool) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "bench"
		req.MemberID = id
		req.MemberEpoch = epoch
		if join {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{"t1"}
		}
		if owned != nil || join {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: testTopicID("t1"), Partitions: owned}}
			if join {
				req.Topics = req.Topics[:0]
			}
		}
		r := c.ConsumerGroupHeartbeat(context.Background(), ClientInfo{ClientID: "bench"}, req)()
		if r.ErrorCode != 0 {
			b.Fatalf("%s: %d", id, r.ErrorCode)
		}
		return r
	}
	type state struct {
		epoch int32
		owned []int32
	}
	members := make(map[string]*state)
	for i := range 100 {
		id := fmt.Sprintf("m%03d", i)
		r := hb(id, 0, nil, true)
		members[id] = &state{epoch: r.MemberEpoch}
	}
	// Reconcile everyone until the group is stable.
	for range 10 {
		for _, id := range sortedKeys(members) {
			st := members[id]
			r := hb(id, st.epoch, append([]int32{}, st.owned...), false)
			st.epoch = r.MemberEpoch
			if r.Assignment != nil {
				st.owned = nil
				for _, t := range r.Assignment.Topics {
					st.owned = append(st.owned, t.Partitions...)
				}
			}
		}
	}
	ids := sortedKeys(members)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		hb(id, members[id].epoch, nil, false)
		i++
	}
}

// TestConsumerAssignmentInterval: with group.consumer.assignment.interval.ms
// (Kafka 4.4), the joins of a burst bump the group epoch but share one
// target assignment, computed by the first heartbeat after the interval;
// members joining in between take the previous target's epoch and nothing
// that another member still owns. The time of the last target is in the
// log (AssignmentTimestamp), so a coordinator that loads the group keeps
// spacing them; the group's consumer.assignment.interval.ms overrides the
// broker's.
func TestConsumerAssignmentInterval(t *testing.T) {
	cfg := testConfig()
	cfg.ConsumerGroupAssignmentIntervalMs = 1000
	var groupInterval atomic.Int32
	groupInterval.Store(-1)
	cfg.ConsumerGroupConfig = func(string) ConsumerGroupOverrides {
		return ConsumerGroupOverrides{AssignmentIntervalMs: groupInterval.Load()}
	}
	h := newHarness(t, cfg)
	h.topics.set("t1:6")
	h.c.TopicsChanged()
	ctx := context.Background()
	hb := func(id string, epoch int32, owned []int32) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group = "g"
		req.MemberID = id
		req.MemberEpoch = epoch
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"t1"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if len(owned) > 0 {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: testTopicID("t1"), Partitions: owned}}
		}
		r := h.c.ConsumerGroupHeartbeat(ctx, ClientInfo{ClientID: "c"}, req)()
		if r.ErrorCode != 0 {
			t.Fatalf("%s: %s", id, coordtest.ErrName(r.ErrorCode))
		}
		return r
	}
	partitions := func(r *kmsg.ConsumerGroupHeartbeatResponse) []int32 {
		var ps []int32
		if r.Assignment != nil {
			for _, tp := range r.Assignment.Topics {
				ps = append(ps, tp.Partitions...)
			}
		}
		return ps
	}
	epochs := func() (group, assignment int32) {
		t.Helper()
		d := h.c.ConsumerGroupDescribe(ctx, &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}})()
		return d.Groups[0].Epoch, d.Groups[0].AssignmentEpoch
	}

	r1 := hb("m1", 0, nil)
	if r1.MemberEpoch != 1 || len(partitions(r1)) != 6 {
		t.Fatalf("first member: epoch %d, partitions %v; want the whole topic at epoch 1", r1.MemberEpoch, partitions(r1))
	}
	for _, id := range []string{"m2", "m3"} {
		r := hb(id, 0, nil)
		if r.MemberEpoch != 1 || len(partitions(r)) != 0 {
			t.Errorf("%s within the interval: epoch %d, partitions %v; want epoch 1 and nothing", id, r.MemberEpoch, partitions(r))
		}
	}
	if g, a := epochs(); g != 3 || a != 1 {
		t.Fatalf("after the burst: group epoch %d, assignment epoch %d; want 3 and 1", g, a)
	}
	// Still within the interval: a heartbeat keeps the old target.
	h.advance(999 * time.Millisecond)
	if r := hb("m1", 1, partitions(r1)); r.MemberEpoch != 1 {
		t.Errorf("m1 before the interval ended: epoch %d, want 1", r.MemberEpoch)
	}
	if _, a := epochs(); a != 1 {
		t.Fatalf("assignment epoch %d before the interval ended, want 1", a)
	}
	// The first heartbeat after it computes one target for the burst: m1
	// keeps two partitions and revokes the rest before anyone gets them.
	h.advance(time.Millisecond)
	r := hb("m1", 1, partitions(r1))
	if kept := partitions(r); len(kept) != 2 || r.MemberEpoch != 1 {
		t.Fatalf("m1 after the interval: epoch %d, partitions %v; want 2 partitions, still epoch 1 while revoking", r.MemberEpoch, kept)
	}
	if g, a := epochs(); g != 3 || a != 3 {
		t.Fatalf("after the interval: group epoch %d, assignment epoch %d; want 3 and 3", g, a)
	}
	r2 := hb("m2", 1, nil)
	if len(partitions(r2)) != 0 {
		t.Errorf("m2 got %v before m1 revoked them", partitions(r2))
	}
	kept := partitions(r)
	if r := hb("m1", 1, kept); r.MemberEpoch != 3 {
		t.Errorf("m1 after revoking: epoch %d, want 3", r.MemberEpoch)
	}
	for _, m := range []struct {
		id    string
		epoch int32
	}{{"m2", r2.MemberEpoch}, {"m3", 1}} {
		if r := hb(m.id, m.epoch, nil); r.MemberEpoch != 3 || len(partitions(r)) != 2 {
			t.Errorf("%s after m1 revoked: epoch %d, partitions %v; want 2 partitions at epoch 3", m.id, r.MemberEpoch, partitions(r))
		}
	}

	// The target's time survives a reload: a join right after the restart
	// waits for the rest of the interval, as on the coordinator that
	// computed it.
	h.restart()
	h.advance(500 * time.Millisecond)
	if r := hb("m4", 0, nil); r.MemberEpoch != 3 || len(partitions(r)) != 0 {
		t.Errorf("m4 joining after a reload, within the interval: epoch %d, partitions %v; want epoch 3 and nothing", r.MemberEpoch, partitions(r))
	}
	if g, a := epochs(); g != 4 || a != 3 {
		t.Fatalf("after m4 joined: group epoch %d, assignment epoch %d; want 4 and 3", g, a)
	}
	// The group's own interval (consumer.assignment.interval.ms) rules: 0
	// computes at once.
	groupInterval.Store(0)
	if r := hb("m4", 3, nil); r.MemberEpoch != 4 {
		t.Errorf("m4 with the group's interval at 0: epoch %d, want 4", r.MemberEpoch)
	}
	if _, a := epochs(); a != 4 {
		t.Fatalf("assignment epoch %d with the group's interval at 0, want 4", a)
	}
}

// TestUniformAssignorAllocs holds the assignor to its allocation budget
// for issue 17's 1,000 members over 10,000 partitions, a member having
// joined: allocations per member and per topic (the result's maps and
// the index slices), none per partition. 10,129 when written.
func TestUniformAssignorAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("assigns 10,000 partitions")
	}
	topics := map[string]int32{}
	var names []string
	for i := range 10 {
		n := fmt.Sprintf("t%d", i)
		topics[n] = 1000
		names = append(names, n)
	}
	members := map[string][]string{}
	for i := range 999 {
		members[fmt.Sprintf("m%04d", i)] = names
	}
	current := uniformAssignor{}.assign(makeSpec(topics, members, nil))
	members["m9999"] = names
	spec := makeSpec(topics, members, current)
	const budget = 12 * 1000 // 12 per member
	if allocs := testing.AllocsPerRun(3, func() { uniformAssignor{}.assign(spec) }); allocs > budget {
		t.Errorf("%.0f allocations per assignment, budget %d", allocs, budget)
	}
}

// TestConsumerJoinCost holds a join to a large group to a cost that does
// not grow with the group (issue 17): with 1,000 members over 10,000
// partitions, the member holding them all, a join's heartbeat (which
// bumps the epoch, snapshots the group for undo and answers once its
// records are in) allocates a few KiB. Copying the group's maps and
// partition owners for the snapshot, and counting every member's
// subscription, cost 250 KiB and O(members + partitions) of CPU per
// join, which made a burst of 1,000 joins take 21 s at a load of 27.
func TestConsumerJoinCost(t *testing.T) {
	if testing.Short() {
		t.Skip("joins 1,000 members")
	}
	cfg := testConfig()
	cfg.ConsumerGroupAssignmentIntervalMs = 1000 // the clock stands: one target
	h := newHarness(t, cfg)
	var topics []string
	var spec []string
	for i := range 10 {
		topics = append(topics, fmt.Sprintf("t%d", i))
		spec = append(spec, fmt.Sprintf("t%d:1000", i))
	}
	h.topics.set(strings.Join(spec, ","))
	h.c.TopicsChanged()
	ctx := context.Background()
	n := 0
	join := func() {
		n++
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID = "g", fmt.Sprintf("m%05d", n)
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = topics
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if r := h.c.ConsumerGroupHeartbeat(ctx, ClientInfo{ClientID: "c"}, req)(); r.ErrorCode != 0 {
			t.Fatalf("join %s: %s", req.MemberID, coordtest.ErrName(r.ErrorCode))
		}
	}
	for range 1000 {
		join()
	}
	var before, after runtime.MemStats
	const joins = 50
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range joins {
		join()
	}
	runtime.ReadMemStats(&after)
	const budget = 32 << 10 // 5.9 KiB when written
	if per := (after.TotalAlloc - before.TotalAlloc) / joins; per > budget {
		t.Errorf("%d bytes allocated per join to a group of 1,000 members over 10,000 partitions, budget %d", per, budget)
	}
}
