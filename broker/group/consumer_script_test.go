package group

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// fakeTopics is a TopicsView a test changes by hand. Topic ids are derived
// from names, so scripts can name topics only.
type fakeTopics struct {
	mu     sync.Mutex
	topics map[string]TopicInfo
}

func newFakeTopics() *fakeTopics { return &fakeTopics{topics: map[string]TopicInfo{}} }

func (f *fakeTopics) Topics() map[string]TopicInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.topics)
}

func testTopicID(name string) topicID {
	sum := sha256.Sum256([]byte(name))
	var id topicID
	copy(id[:], sum[:16])
	return id
}

// set replaces the topics with "name:partitions" entries.
func (f *fakeTopics) set(spec string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topics = map[string]TopicInfo{}
	if spec == "" {
		return
	}
	for _, e := range strings.Split(spec, ",") {
		name, n, _ := strings.Cut(e, ":")
		parts, _ := strconv.Atoi(n)
		f.topics[name] = TopicInfo{ID: testTopicID(name), Partitions: int32(parts)}
	}
}

func (f *fakeTopics) name(id topicID) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, t := range f.topics {
		if t.ID == id {
			return n
		}
	}
	return fmt.Sprintf("%x", id[:4])
}

// showSet prints a set as "t1:0,1 t2:3", topics by name.
func (h *harness) showSet(s tpSet) string {
	if len(s) == 0 {
		return "-"
	}
	var parts []string
	for id, ps := range s {
		var nums []string
		for _, p := range ps {
			nums = append(nums, strconv.Itoa(int(p)))
		}
		parts = append(parts, h.topics.name(id)+":"+strings.Join(nums, ","))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// parseOwned reads "t1/0,t1/1" into a set; "" is the empty set.
func parseOwned(spec string) tpSet {
	out := tpSet{}
	if spec == "" {
		return out
	}
	for _, t := range parseTPs(spec) {
		out.add(testTopicID(t.topic), t.partitions...)
	}
	return out
}

// execConsumer runs the consumer group commands of the scripts:
//
//	topics t1:4,t2:2           set the topics and tell the coordinator
//	hb member=m1 epoch=0 ...   a ConsumerGroupHeartbeat (g, v, topics,
//	                           regex, instance, rebalance, assignor, rack,
//	                           owned="t1/0,t1/1"; owned is empty when
//	                           joining and absent otherwise unless given)
//	cgdescribe g1 g2           ConsumerGroupDescribe
//	cgstate g=g1               the group's internal state
//	cgconfig max-size=N        restart on a fresh store with consumer
//	                           group settings, keeping the topics
func (s *script) execConsumer(a args, out *strings.Builder) bool {
	switch a.Name {
	case "topics":
		spec := ""
		if len(a.Pos) > 0 {
			spec = a.Pos[0]
		}
		s.h.topics.set(spec)
		s.h.c.TopicsChanged()
	case "hb":
		s.heartbeat(a)
	case "cgdescribe":
		out.WriteString(s.cgDescribe(a))
	case "cgstate":
		out.WriteString(s.cgState(a.Str("g", "g1")))
	case "cgconfig":
		cfg := testConfig()
		cfg.ConsumerGroupMaxSize = int32(a.Int("max-size", int64(cfg.ConsumerGroupMaxSize)))
		cfg.ConsumerGroupSessionTimeoutMs = int32(a.Int("session", int64(cfg.ConsumerGroupSessionTimeoutMs)))
		if v := a.Str("assignors", ""); v != "" {
			cfg.ConsumerGroupAssignors = strings.Split(v, ",")
		}
		topics := s.h.topics
		s.h.c.Close()
		cfg.Topics = topics
		s.h = newHarness(s.t, cfg)
		s.h.topics = topics
	default:
		return false
	}
	return true
}

func (s *script) heartbeat(a args) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = int16(a.Int("v", 1))
	req.Group = a.Str("g", "g1")
	req.MemberID = a.Str("member", "")
	req.MemberEpoch = int32(a.Int("epoch", 0))
	req.InstanceID = a.OptStr("instance")
	req.RackID = a.OptStr("rack")
	req.ServerAssignor = a.OptStr("assignor")
	req.SubscribedTopicRegex = a.OptStr("regex")
	if req.MemberEpoch == 0 {
		req.RebalanceTimeoutMillis = int32(a.Int("rebalance", 30000))
	} else {
		req.RebalanceTimeoutMillis = int32(a.Int("rebalance", -1))
	}
	if v, ok := a.KV["topics"]; ok {
		req.SubscribedTopicNames = []string{}
		if v != "" {
			req.SubscribedTopicNames = strings.Split(v, ",")
		}
	}
	owned, hasOwned := a.KV["owned"]
	if hasOwned || req.MemberEpoch == 0 {
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		set := parseOwned(owned)
		for _, id := range set.topics() {
			t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			t.TopicID = id
			t.Partitions = set[id]
			req.Topics = append(req.Topics, t)
		}
	}
	if a.Str("nojoinfields", "") == "true" {
		req.SubscribedTopicNames = nil
	}
	ci := ClientInfo{ClientID: a.Str("client", "c"), ClientHost: "/10.0.0.1"}
	label := a.Str("as", "hb "+req.MemberID)
	s.submit(label, req.Group, func(m *machine, done func(string)) {
		m.consumerGroupHeartbeat(ci, req, func(r *kmsg.ConsumerGroupHeartbeatResponse) { done(s.fmtHeartbeat(r)) })
	})
}

func (s *script) fmtHeartbeat(r *kmsg.ConsumerGroupHeartbeatResponse) string {
	if r.ErrorCode != 0 {
		msg := ""
		if r.ErrorMessage != nil {
			msg = " msg=" + strconv.Quote(*r.ErrorMessage)
		}
		return coordtest.ErrName(r.ErrorCode) + msg
	}
	var b strings.Builder
	id := "<nil>"
	if r.MemberID != nil {
		id = *r.MemberID
	}
	fmt.Fprintf(&b, "member=%s epoch=%d interval=%d", id, r.MemberEpoch, r.HeartbeatIntervalMillis)
	if r.Assignment != nil {
		set := tpSet{}
		for _, t := range r.Assignment.Topics {
			set.add(t.TopicID, t.Partitions...)
		}
		fmt.Fprintf(&b, " assignment=[%s]", s.h.showSet(set))
	}
	return b.String()
}

func (s *script) cgDescribe(a args) string {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Version = int16(a.Int("v", 1))
	req.Groups = a.Pos
	req.IncludeAuthorizedOperations = a.Str("ops", "") == "true"
	resp := s.h.c.ConsumerGroupDescribe(context.Background(), req)()
	var b strings.Builder
	for _, g := range resp.Groups {
		fmt.Fprintf(&b, "%s: err=%s", g.Group, coordtest.ErrName(g.ErrorCode))
		if g.ErrorMessage != nil {
			fmt.Fprintf(&b, " msg=%q", *g.ErrorMessage)
		}
		if g.ErrorCode == 0 {
			fmt.Fprintf(&b, " state=%s epoch=%d assignment-epoch=%d assignor=%s", g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName)
		}
		if g.AuthorizedOperations != -2147483648 {
			fmt.Fprintf(&b, " ops=%d", g.AuthorizedOperations)
		}
		b.WriteString("\n")
		show := func(as kmsg.Assignment) string {
			var parts []string
			for _, t := range as.TopicPartitions {
				var nums []string
				for _, p := range t.Partitions {
					nums = append(nums, strconv.Itoa(int(p)))
				}
				parts = append(parts, t.Topic+":"+strings.Join(nums, ","))
			}
			if len(parts) == 0 {
				return "-"
			}
			return strings.Join(parts, " ")
		}
		for _, m := range g.Members {
			inst, re := "", ""
			if m.InstanceID != nil {
				inst = " instance=" + *m.InstanceID
			}
			if m.SubscribedTopicRegex != nil {
				re = " regex=" + *m.SubscribedTopicRegex
			}
			fmt.Fprintf(&b, "  %s%s epoch=%d client=%s host=%s topics=%s%s type=%d assigned=[%s] target=[%s]\n",
				m.MemberID, inst, m.MemberEpoch, m.ClientID, m.ClientHost, strings.Join(m.SubscribedTopics, ","), re, m.MemberType, show(m.Assignment), show(m.TargetAssignment))
		}
	}
	return b.String()
}

func (s *script) cgState(id string) string {
	sh := s.h.c.rt.ShardFor(id)
	ch := make(chan string, 1)
	sh.Post(context.Background(), func() {
		p := sh.Machine.partitions[PartitionFor(id, s.h.cfg.OffsetsTopicPartitions)]
		if p == nil {
			ch <- "partition not loaded\n"
			return
		}
		g := p.consumers[id]
		if g == nil {
			ch <- "no consumer group\n"
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "state=%s epoch=%d assignment-epoch=%d offsets=%d", g.state(), g.epoch, g.assignmentEpoch, len(g.offsets))
		if len(g.subscription) > 0 {
			var ts []string
			for _, n := range sortedKeys(g.subscription) {
				ts = append(ts, fmt.Sprintf("%s:%d", n, g.subscription[n].partitions))
			}
			fmt.Fprintf(&b, " subscribed=%s", strings.Join(ts, ","))
		}
		for _, re := range sortedKeys(g.regexes) {
			fmt.Fprintf(&b, " regex[%s]=%s", re, strings.Join(g.regexes[re].topics, ","))
		}
		b.WriteString("\n")
		for _, mid := range g.sortedMemberIDs() {
			mem := g.members[mid]
			inst := ""
			if mem.instanceID != nil {
				inst = " instance=" + *mem.instanceID
			}
			if mem.classic != nil {
				inst += " " + showClassic(mem.classic)
			}
			fmt.Fprintf(&b, "  %s%s %s epoch=%d prev=%d assigned=[%s] revoking=[%s] target=[%s]\n",
				mid, inst, mem.state, mem.epoch, mem.previousEpoch, s.h.showSet(mem.assigned), s.h.showSet(mem.revoking), s.h.showSet(g.target[mid]))
		}
		ch <- b.String()
	})
	return <-ch
}

// describeConsumerRecord prints a consumer group record for the records
// command.
func describeConsumerRecord(r Record) string {
	v, _ := coord.KeyVersion(r.Key)
	k, err := decodeCGKey(v, r.Key)
	if err != nil {
		return fmt.Sprintf("unknown key version %d", v)
	}
	head := func(kind string) string {
		switch {
		case k.member != "":
			return fmt.Sprintf("%s %s/%s", kind, k.group, k.member)
		case k.regex != "":
			return fmt.Sprintf("%s %s/%s", kind, k.group, k.regex)
		}
		return fmt.Sprintf("%s %s", kind, k.group)
	}
	names := map[topicID]string{}
	for _, n := range []string{"t1", "t2", "t3", "orders-a", "orders-b", "orders-c", "other"} {
		names[testTopicID(n)] = n
	}
	show := func(s tpSet) string {
		var parts []string
		for _, id := range s.topics() {
			var nums []string
			for _, p := range s[id] {
				nums = append(nums, strconv.Itoa(int(p)))
			}
			name, ok := names[id]
			if !ok {
				name = fmt.Sprintf("%x", id[:4])
			}
			parts = append(parts, name+":"+strings.Join(nums, ","))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	var kind string
	switch v {
	case cgMetadataKeyVersion:
		kind = "cg-epoch"
	case cgPartitionMetadataKeyVersion:
		kind = "cg-topics"
	case cgMemberMetadataKeyVersion:
		kind = "cg-member"
	case cgTargetMetadataKeyVersion:
		kind = "cg-target-epoch"
	case cgTargetMemberKeyVersion:
		kind = "cg-target"
	case cgCurrentAssignmentKeyVersion:
		kind = "cg-current"
	case cgRegexKeyVersion:
		kind = "cg-regex"
	default:
		return fmt.Sprintf("unknown key version %d", v)
	}
	if r.Value == nil {
		return head(kind) + " tombstone"
	}
	var body string
	switch v {
	case cgMetadataKeyVersion, cgTargetMetadataKeyVersion:
		e, err := decodeCGEpoch(r.Value)
		body, _ = fmt.Sprintf("epoch=%d", e), err
	case cgPartitionMetadataKeyVersion:
		meta, _ := decodeCGSubscriptionMetadata(r.Value)
		var ts []string
		for _, n := range sortedKeys(meta) {
			ts = append(ts, fmt.Sprintf("%s:%d", n, meta[n].partitions))
		}
		body = strings.Join(ts, ",")
	case cgMemberMetadataKeyVersion:
		sub, _ := decodeCGMember(r.Value)
		body = fmt.Sprintf("topics=%s regex=%q assignor=%q", strings.Join(sub.topicNames, ","), deref(sub.regex), deref(sub.serverAssignor))
		if sub.instanceID != nil {
			body += " instance=" + *sub.instanceID
		}
		if c := sub.classic; c != nil {
			body += " " + showClassic(c)
		}
	case cgTargetMemberKeyVersion:
		t, _ := decodeCGTargetMember(r.Value)
		body = show(t)
	case cgCurrentAssignmentKeyVersion:
		c, _ := decodeCGCurrentAssignment(r.Value)
		body = fmt.Sprintf("epoch=%d prev=%d %s assigned=%s revoking=%s", c.epoch, c.previousEpoch, c.state, show(c.assigned), show(c.revoking))
	case cgRegexKeyVersion:
		res, _ := decodeCGRegex(r.Value)
		body = "topics=" + strings.Join(res.topics, ",")
	}
	return head(kind) + " " + body
}

// showClassic prints a classic member's metadata.
func showClassic(c *classicMeta) string {
	var names []string
	for _, p := range c.protocols {
		names = append(names, p.name)
	}
	return fmt.Sprintf("classic(session=%d protocols=%s)", c.sessionTimeoutMs, strings.Join(names, ","))
}
