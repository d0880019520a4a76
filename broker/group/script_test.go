package group

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// TestScripts runs the datadriven scripts of testdata/*.txt (see
// coordtest.RunScripts; -rewrite regenerates their expected output).
func TestScripts(t *testing.T) {
	coordtest.RunScripts(t, func(t *testing.T) func(string) string { return newScript(t).run })
}

// script runs commands against a harness. Requests that may park (join,
// sync, commit, leave, delete) are posted to their shard directly and
// print their answer once it arrives; everything else goes through the
// Coordinator's blocking API.
type script struct {
	t    *testing.T
	h    *harness
	reqs coordtest.Requests
}

func newScript(t *testing.T) *script {
	return &script{t: t, h: newHarness(t, testConfig())}
}

type args = coordtest.Args

func (s *script) run(line string) string {
	a := coordtest.ParseArgs(s.t, line)
	var out strings.Builder
	s.exec(a, &out)
	s.h.quiesce()
	s.reqs.Report(&out)
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

// submit posts an operation to the shard of a group; its answer prints when
// it arrives, or "waiting" if it has not by the end of the command.
func (s *script) submit(label, groupID string, op func(m *machine, done func(string))) {
	answer := s.reqs.Add(label)
	sh := s.h.c.rt.ShardFor(groupID)
	sh.Post(context.Background(), func() { op(sh.Machine, answer) })
}

func (s *script) exec(a args, out *strings.Builder) {
	ctx := context.Background()
	h := s.h
	switch a.Name {
	case "config":
		// Restart on a fresh store with changed settings.
		cfg := testConfig()
		cfg.GroupMaxSize = int32(a.Int("max-size", int64(cfg.GroupMaxSize)))
		cfg.GroupInitialRebalanceDelayMs = int32(a.Int("initial-delay", int64(cfg.GroupInitialRebalanceDelayMs)))
		cfg.GroupMinSessionTimeoutMs = int32(a.Int("min-session", int64(cfg.GroupMinSessionTimeoutMs)))
		cfg.GroupMaxSessionTimeoutMs = int32(a.Int("max-session", int64(cfg.GroupMaxSessionTimeoutMs)))
		cfg.OffsetsRetentionMs = a.Int("retention", cfg.OffsetsRetentionMs)
		cfg.OffsetMetadataMaxBytes = int32(a.Int("metadata-max", int64(cfg.OffsetMetadataMaxBytes)))
		cfg.ConsumerGroupMigrationPolicy = a.Str("migration", cfg.ConsumerGroupMigrationPolicy)
		s.h.c.Close()
		s.h = newHarness(s.t, cfg)
	case "join":
		s.join(a)
	case "sync":
		s.sync(a)
	case "heartbeat":
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version = int16(a.Int("v", 4))
		req.Group = a.Str("g", "g1")
		req.MemberID = a.Str("member", "")
		req.Generation = int32(a.Int("gen", 1))
		req.InstanceID = a.OptStr("instance")
		fmt.Fprintf(out, "%s\n", coordtest.ErrName(h.c.Heartbeat(ctx, req)().ErrorCode))
	case "leave":
		s.leave(a)
	case "commit":
		s.commit(a)
	case "fetch":
		out.WriteString(s.fetch(a))
	case "offset-delete":
		s.offsetDelete(a)
	case "list":
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = int16(a.Int("v", 5))
		if v := a.Str("states", ""); v != "" {
			req.StatesFilter = strings.Split(v, ",")
		}
		if v := a.Str("types", ""); v != "" {
			req.TypesFilter = strings.Split(v, ",")
		}
		resp := h.c.ListGroups(ctx, req)()
		if resp.ErrorCode != 0 {
			fmt.Fprintf(out, "%s\n", coordtest.ErrName(resp.ErrorCode))
		}
		for _, g := range resp.Groups {
			fmt.Fprintf(out, "%s type=%q state=%s kind=%s\n", g.Group, g.ProtocolType, g.GroupState, g.GroupType)
		}
		if len(resp.Groups) == 0 && resp.ErrorCode == 0 {
			out.WriteString("no groups\n")
		}
	case "describe":
		out.WriteString(s.describe(a))
	case "delete":
		s.deleteGroups(a)
	case "advance":
		h.advance(a.Duration(0))
	case "store":
		coordtest.StoreCommand(a, h.store.MemStore, func(name string) error { return errByName(s.t, name) })
	case "records":
		out.WriteString(s.records(a))
	case "restart":
		h.restart()
	case "unload":
		h.c.Unload(int32(a.Int("p", 0)))
	case "load":
		p := int32(a.Int("p", 0))
		if err := h.c.Load(ctx, p, coordtest.SeqOf(h.store.Records(p))); err != nil {
			fmt.Fprintf(out, "error: %v\n", err)
		}
	case "corrupt":
		// A record whose key claims an offset commit but is cut short.
		p := int32(a.Int("p", 0))
		h.store.Inject(p, Record{Key: []byte{0, 1, 0, 5, 'g'}, Value: []byte{0, 3}})
	case "state":
		out.WriteString(s.state(a.Str("g", "g1")))
	default:
		if !s.execConsumer(a, out) && !s.execTxn(a, out) {
			s.t.Fatalf("unknown command %q", a.Name)
		}
	}
}

func errByName(t *testing.T, name string) error {
	if e := coordtest.KafkaError(name); e != nil {
		return fmt.Errorf("append failed: %w", e)
	}
	if name == "plain" {
		return fmt.Errorf("disk on fire")
	}
	t.Fatalf("unknown error %q", name)
	return nil
}

// showMeta quotes commit metadata, abbreviating long values.
func showMeta(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("<%d bytes>", len(s))
	}
	return strconv.Quote(s)
}

// consumerMetadata encodes a subscription as Kafka consumers do.
func consumerMetadata(topics []string) []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 3
	md.Topics = topics
	return md.AppendTo(nil)
}

// showMetadata prints member metadata: consumer subscriptions as their
// topics, anything else as a string.
func showMetadata(b []byte) string {
	if ts, ok := consumerTopics(b); ok && len(b) > 6 {
		return "topics(" + strings.Join(ts, "+") + ")"
	}
	return string(b)
}

func (s *script) join(a args) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = int16(a.Int("v", 9))
	req.Group = a.Str("g", "g1")
	req.MemberID = a.Str("member", "")
	req.InstanceID = a.OptStr("instance")
	req.SessionTimeoutMillis = int32(a.Int("session", 10000))
	req.RebalanceTimeoutMillis = int32(a.Int("rebalance", 30000))
	req.ProtocolType = a.Str("type", "consumer")
	var topics []string
	if v := a.Str("topics", ""); v != "" {
		topics = strings.Split(v, ",")
	}
	for _, p := range strings.Split(a.Str("protocols", "range"), ",") {
		name, md, _ := strings.Cut(p, ":")
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name = name
		jp.Metadata = []byte(md)
		if topics != nil {
			jp.Metadata = consumerMetadata(topics)
		}
		req.Protocols = append(req.Protocols, jp)
	}
	ci := ClientInfo{ClientID: a.Str("client", "c"), ClientHost: "/10.0.0.1"}
	label := a.Str("as", "join "+req.MemberID)
	if req.MemberID == "" {
		label = a.Str("as", "join "+ci.ClientID)
	}
	s.submit(label, req.Group, func(m *machine, done func(string)) {
		m.joinGroup(ci, req, func(r *kmsg.JoinGroupResponse) { done(fmtJoin(r)) })
	})
}

func fmtJoin(r *kmsg.JoinGroupResponse) string {
	if r.ErrorCode != 0 {
		return fmt.Sprintf("%s member=%q", coordtest.ErrName(r.ErrorCode), r.MemberID)
	}
	var b strings.Builder
	proto := "<nil>"
	if r.Protocol != nil {
		proto = *r.Protocol
	}
	fmt.Fprintf(&b, "gen=%d member=%s leader=%s protocol=%s", r.Generation, r.MemberID, r.LeaderID, proto)
	if r.SkipAssignment {
		b.WriteString(" skip-assignment")
	}
	if len(r.Members) > 0 {
		b.WriteString(" members=[")
		for i, m := range r.Members {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(m.MemberID)
			if m.InstanceID != nil {
				b.WriteString("@" + *m.InstanceID)
			}
			b.WriteString(":" + showMetadata(m.ProtocolMetadata))
		}
		b.WriteString("]")
	}
	return b.String()
}

func (s *script) sync(a args) {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = int16(a.Int("v", 5))
	req.Group = a.Str("g", "g1")
	req.MemberID = a.Str("member", "")
	req.Generation = int32(a.Int("gen", 1))
	req.InstanceID = a.OptStr("instance")
	req.ProtocolType = a.OptStr("ptype")
	req.Protocol = a.OptStr("pname")
	if v := a.Str("assign", ""); v != "" {
		for _, kv := range strings.Split(v, ",") {
			id, as, _ := strings.Cut(kv, ":")
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID = id
			ga.MemberAssignment = []byte(as)
			req.GroupAssignment = append(req.GroupAssignment, ga)
		}
	}
	// cassign=member:t1.0.1|t2.0,member2:... gives ConsumerProtocol
	// assignments: topic t1 partitions 0 and 1, topic t2 partition 0.
	if v := a.Str("cassign", ""); v != "" {
		for _, kv := range strings.Split(v, ",") {
			id, as, _ := strings.Cut(kv, ":")
			ca := kmsg.NewConsumerMemberAssignment()
			ca.Version = 3
			for _, t := range strings.Split(as, "|") {
				if t == "" {
					continue
				}
				parts := strings.Split(t, ".")
				at := kmsg.NewConsumerMemberAssignmentTopic()
				at.Topic = parts[0]
				for _, ps := range parts[1:] {
					n, _ := strconv.Atoi(ps)
					at.Partitions = append(at.Partitions, int32(n))
				}
				ca.Topics = append(ca.Topics, at)
			}
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID = id
			ga.MemberAssignment = ca.AppendTo(nil)
			req.GroupAssignment = append(req.GroupAssignment, ga)
		}
	}
	label := a.Str("as", "sync "+req.MemberID)
	s.submit(label, req.Group, func(m *machine, done func(string)) {
		m.syncGroup(req, func(r *kmsg.SyncGroupResponse) {
			if r.ErrorCode != 0 {
				done(coordtest.ErrName(r.ErrorCode))
				return
			}
			proto := "<nil>"
			if r.Protocol != nil {
				proto = *r.Protocol
			}
			done(fmt.Sprintf("assignment=%s protocol=%s", showAssignment(r.MemberAssignment), proto))
		})
	})
}

// leave takes members as positional args: "id", "id@instance" or
// "@instance"; v<3 sends the single member id.
func (s *script) leave(a args) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version = int16(a.Int("v", 5))
	req.Group = a.Str("g", "g1")
	for _, p := range a.Pos {
		id, inst, hasInst := strings.Cut(p, "@")
		if req.Version < 3 {
			req.MemberID = id
			continue
		}
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		if hasInst {
			m.InstanceID = &inst
		}
		req.Members = append(req.Members, m)
	}
	s.submit(a.Str("as", "leave"), req.Group, func(m *machine, done func(string)) {
		m.leaveGroup(req, func(r *kmsg.LeaveGroupResponse) {
			finishLeave(req, r)
			var b strings.Builder
			b.WriteString(coordtest.ErrName(r.ErrorCode))
			for _, mr := range r.Members {
				inst := ""
				if mr.InstanceID != nil {
					inst = "@" + *mr.InstanceID
				}
				fmt.Fprintf(&b, " %s%s=%s", mr.MemberID, inst, coordtest.ErrName(mr.ErrorCode))
			}
			done(b.String())
		})
	})
}

// parseTPs reads "t1/0,t1/1,t2/0" into topics in first-seen order.
func parseTPs(s string) []fetchTopic {
	var out []fetchTopic
	for _, e := range strings.Split(s, ",") {
		topic, p, _ := strings.Cut(e, "/")
		n, _ := strconv.Atoi(p)
		i := slices.IndexFunc(out, func(f fetchTopic) bool { return f.topic == topic })
		if i < 0 {
			out = append(out, fetchTopic{topic: topic})
			i = len(out) - 1
		}
		out[i].partitions = append(out[i].partitions, int32(n))
	}
	return out
}

// commit takes offsets as positional args "topic/partition=offset".
func (s *script) commit(a args) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = int16(a.Int("v", 9))
	req.Group = a.Str("g", "g1")
	req.MemberID = a.Str("member", "")
	req.Generation = int32(a.Int("gen", -1))
	req.InstanceID = a.OptStr("instance")
	req.RetentionTimeMillis = a.Int("retention", -1)
	md := a.OptStr("meta")
	if n := a.Int("metasize", -1); n >= 0 {
		big := strings.Repeat("x", int(n))
		md = &big
	}
	for _, pos := range a.Pos {
		tpStr, off, _ := strings.Cut(pos, "=")
		topic, p, _ := strings.Cut(tpStr, "/")
		pn, _ := strconv.Atoi(p)
		o, _ := strconv.ParseInt(off, 10, 64)
		i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == topic })
		if i < 0 {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = int32(pn)
		rp.Offset = o
		rp.LeaderEpoch = int32(a.Int("epoch", -1))
		rp.Metadata = md
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	s.submit(a.Str("as", "commit"), req.Group, func(m *machine, done func(string)) {
		m.offsetCommit(req, func(r *kmsg.OffsetCommitResponse) {
			var parts []string
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					parts = append(parts, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, coordtest.ErrName(p.ErrorCode)))
				}
			}
			done(strings.Join(parts, " "))
		})
	})
}

// fetch: v<8 takes g= and topics= ("t1/0,t1/1", omitted for all); v8+
// takes positional "group:t1/0,t1/1" or "group:*" per group.
func (s *script) fetch(a args) string {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = int16(a.Int("v", 7))
	req.RequireStable = a.Str("stable", "") == "true"
	var b strings.Builder
	writeParts := func(indent string, topic string, p kmsg.OffsetFetchResponseGroupTopicPartition) {
		md := "<nil>"
		if p.Metadata != nil {
			md = showMeta(*p.Metadata)
		}
		fmt.Fprintf(&b, "%s%s/%d offset=%d epoch=%d meta=%s err=%s\n", indent, topic, p.Partition, p.Offset, p.LeaderEpoch, md, coordtest.ErrName(p.ErrorCode))
	}
	if req.Version < 8 {
		req.Group = a.Str("g", "g1")
		if v := a.Str("topics", ""); v != "" {
			for _, t := range parseTPs(v) {
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic, rt.Partitions = t.topic, t.partitions
				req.Topics = append(req.Topics, rt)
			}
		} else if req.Version < 2 {
			req.Topics = []kmsg.OffsetFetchRequestTopic{}
		}
		resp := s.h.c.OffsetFetch(context.Background(), req)()
		fmt.Fprintf(&b, "err=%s\n", coordtest.ErrName(resp.ErrorCode))
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				writeParts("", t.Topic, kmsg.OffsetFetchResponseGroupTopicPartition{
					Partition: p.Partition, Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode,
				})
			}
		}
		return b.String()
	}
	for _, pos := range a.Pos {
		g, spec, _ := strings.Cut(pos, ":")
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		if spec != "*" {
			for _, t := range parseTPs(spec) {
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic, rt.Partitions = t.topic, t.partitions
				rg.Topics = append(rg.Topics, rt)
			}
		}
		req.Groups = append(req.Groups, rg)
	}
	resp := s.h.c.OffsetFetch(context.Background(), req)()
	for _, g := range resp.Groups {
		fmt.Fprintf(&b, "%s: err=%s\n", g.Group, coordtest.ErrName(g.ErrorCode))
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				writeParts("  ", t.Topic, p)
			}
		}
	}
	return b.String()
}

// offsetDelete takes positional "topic/partition" args.
func (s *script) offsetDelete(a args) {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = a.Str("g", "g1")
	for _, t := range parseTPs(strings.Join(a.Pos, ",")) {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = t.topic
		for _, p := range t.partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
		}
		req.Topics = append(req.Topics, rt)
	}
	s.submit(a.Str("as", "offset-delete"), req.Group, func(m *machine, done func(string)) {
		m.offsetDelete(req, func(r *kmsg.OffsetDeleteResponse) {
			var b strings.Builder
			b.WriteString(coordtest.ErrName(r.ErrorCode))
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					fmt.Fprintf(&b, " %s/%d=%s", t.Topic, p.Partition, coordtest.ErrName(p.ErrorCode))
				}
			}
			done(b.String())
		})
	})
}

func (s *script) describe(a args) string {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = int16(a.Int("v", 5))
	req.Groups = a.Pos
	req.IncludeAuthorizedOperations = a.Str("ops", "") == "true"
	resp := s.h.c.DescribeGroups(context.Background(), req)()
	var b strings.Builder
	for _, g := range resp.Groups {
		fmt.Fprintf(&b, "%s: err=%s state=%s type=%q protocol=%q", g.Group, coordtest.ErrName(g.ErrorCode), g.State, g.ProtocolType, g.Protocol)
		if g.AuthorizedOperations != -2147483648 {
			fmt.Fprintf(&b, " ops=%d", g.AuthorizedOperations)
		}
		if g.ErrorMessage != nil {
			fmt.Fprintf(&b, " msg=%q", *g.ErrorMessage)
		}
		b.WriteString("\n")
		for _, m := range g.Members {
			inst := ""
			if m.InstanceID != nil {
				inst = " instance=" + *m.InstanceID
			}
			fmt.Fprintf(&b, "  %s%s client=%s host=%s metadata=%q assignment=%q\n", m.MemberID, inst, m.ClientID, m.ClientHost, showMetadata(m.ProtocolMetadata), m.MemberAssignment)
		}
	}
	return b.String()
}

// deleteGroups posts each shard's share of the groups directly and prints
// one answer, in request order, once every shard answered.
func (s *script) deleteGroups(a args) {
	ids := a.Pos
	byShard := make(map[*shard][]int)
	for i, id := range ids {
		sh := s.h.c.rt.ShardFor(id)
		byShard[sh] = append(byShard[sh], i)
	}
	answer := s.reqs.Add(a.Str("as", "delete"))
	var mu sync.Mutex // the shards answer on their own goroutines
	results := make([]string, len(ids))
	left := len(byShard)
	for sh, idx := range byShard {
		sh.Post(context.Background(), func() {
			sh.Machine.deleteGroups(pick(ids, idx), func(rs []kmsg.DeleteGroupsResponseGroup) {
				mu.Lock()
				defer mu.Unlock()
				for i, res := range rs {
					results[idx[i]] = res.Group + "=" + coordtest.ErrName(res.ErrorCode)
				}
				left--
				if left == 0 {
					answer(strings.Join(results, " "))
				}
			})
		})
	}
}

// records prints the records appended to a partition (p=N) or to all.
func (s *script) records(a args) string {
	var b strings.Builder
	for p := range s.h.cfg.OffsetsTopicPartitions {
		if v, ok := a.KV["p"]; ok && v != strconv.Itoa(int(p)) {
			continue
		}
		for _, r := range s.h.store.Records(p) {
			fmt.Fprintf(&b, "p%d %s\n", p, describeRecord(r))
		}
	}
	if b.Len() == 0 {
		return "no records\n"
	}
	return b.String()
}

func describeRecord(r Record) string {
	if r.Control {
		return describeMarker(r)
	}
	if r.Transactional {
		return fmt.Sprintf("txn(pid=%d epoch=%d) %s", r.ProducerID, r.ProducerEpoch, describeRecord(Record{Key: r.Key, Value: r.Value}))
	}
	v, _ := coord.KeyVersion(r.Key)
	switch v {
	case offsetCommitKeyV0, offsetCommitKeyVersion:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			return "bad key: " + err.Error()
		}
		head := fmt.Sprintf("offset key=v%d %s %s/%d", k.Version, k.Group, k.Topic, k.Partition)
		if r.Value == nil {
			return head + " tombstone"
		}
		var val kmsg.OffsetCommitValue
		if err := val.ReadFrom(r.Value); err != nil {
			return head + " bad value: " + err.Error()
		}
		out := fmt.Sprintf("%s value=v%d offset=%d meta=%s", head, val.Version, val.Offset, showMeta(val.Metadata))
		if val.Version >= 3 {
			out += fmt.Sprintf(" epoch=%d", val.LeaderEpoch)
		}
		if val.Version == 1 {
			out += fmt.Sprintf(" expire=%d", val.ExpireTimestamp)
		}
		return out
	case groupMetadataKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			return "bad key: " + err.Error()
		}
		head := fmt.Sprintf("group key=v%d %s", k.Version, k.Group)
		if r.Value == nil {
			return head + " tombstone"
		}
		var val kmsg.GroupMetadataValue
		if err := val.ReadFrom(r.Value); err != nil {
			return head + " bad value: " + err.Error()
		}
		proto, leader := "<nil>", "<nil>"
		if val.Protocol != nil {
			proto = *val.Protocol
		}
		if val.Leader != nil {
			leader = *val.Leader
		}
		var ms []string
		for _, m := range val.Members {
			inst := ""
			if m.InstanceID != nil {
				inst = "@" + *m.InstanceID
			}
			ms = append(ms, fmt.Sprintf("%s%s:%q", m.MemberID, inst, m.Assignment))
		}
		return fmt.Sprintf("%s value=v%d type=%q gen=%d protocol=%s leader=%s members=[%s]", head, val.Version, val.ProtocolType, val.Generation, proto, leader, strings.Join(ms, " "))
	}
	return describeConsumerRecord(r)
}

// state prints a group's internal state.
func (s *script) state(id string) string {
	sh := s.h.c.rt.ShardFor(id)
	ch := make(chan string, 1)
	sh.Post(context.Background(), func() {
		p := sh.Machine.partitions[PartitionFor(id, s.h.cfg.OffsetsTopicPartitions)]
		if p == nil {
			ch <- "partition not loaded"
			return
		}
		g := p.groups[id]
		if g == nil {
			ch <- "no group"
			return
		}
		proto := "<nil>"
		if g.protocolName != nil {
			proto = *g.protocolName
		}
		var b strings.Builder
		fmt.Fprintf(&b, "state=%s gen=%d type=%q protocol=%s leader=%s members=%v", g.state, g.generation, g.protocolType, proto, g.leader, g.order)
		if len(g.pendingJoin) > 0 {
			fmt.Fprintf(&b, " pending-join=%d", len(g.pendingJoin))
		}
		if len(g.pendingSync) > 0 {
			fmt.Fprintf(&b, " pending-sync=%d", len(g.pendingSync))
		}
		fmt.Fprintf(&b, " offsets=%d", len(g.offsets))
		ch <- b.String()
	})
	return <-ch + "\n"
}

// showAssignment prints a ConsumerProtocol assignment as its partitions,
// anything else (test strings) quoted.
func showAssignment(b []byte) string {
	var ca kmsg.ConsumerMemberAssignment
	if len(b) < 2 || b[0] != 0 || b[1] > 3 || ca.ReadFrom(b) != nil {
		return fmt.Sprintf("%q", b)
	}
	var parts []string
	for _, t := range ca.Topics {
		ps := make([]string, len(t.Partitions))
		for i, p := range t.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t.Topic+":"+strings.Join(ps, ","))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
