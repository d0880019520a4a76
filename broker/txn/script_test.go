package txn

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// TestScripts runs the datadriven scripts of testdata/*.txt (see
// coordtest.RunScripts; -rewrite regenerates their expected output).
func TestScripts(t *testing.T) {
	coordtest.RunScripts(t, func(t *testing.T) func(string) string {
		s := &script{t: t, h: newHarness(t, testConfig())}
		return s.run
	})
}

// script runs commands against a harness. Requests run on their own
// goroutine through the Coordinator's blocking API; their answer prints
// once it arrives, "waiting" if it has not by the end of the command.
// Marker writes print as they happen.
type script struct {
	t    *testing.T
	h    *harness
	reqs coordtest.Requests
}

type args = coordtest.Args

// topicPartitions reads positional topic/partition arguments.
func topicPartitions(a args) []TopicPartition {
	var out []TopicPartition
	for _, p := range a.Pos {
		topic, n, ok := strings.Cut(p, "/")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(n)
		if err != nil {
			a.T.Fatalf("%s: bad partition %q", a.Line, p)
		}
		out = append(out, TopicPartition{topic, int32(i)})
	}
	return out
}

func (s *script) run(line string) string {
	a := coordtest.ParseArgs(s.t, line)
	var out strings.Builder
	s.exec(a, &out)
	s.h.quiesce()
	s.settle()
	s.reqs.Report(&out)
	for _, at := range s.h.markers.drain() {
		out.WriteString(fmtMarker(at) + "\n")
	}
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

// settle waits until every request the shards have answered has recorded
// its answer: the ones left are parked in a shard.
func (s *script) settle() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		open := s.reqs.Open()
		c := s.h.c
		if int64(open) == c.rt.Posted()-c.rt.Answered() {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("requests did not settle: %d open, %d parked", open, c.rt.Posted()-c.rt.Answered())
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// submit runs a request on its own goroutine and waits until it has been
// handed to a shard (posts of them) or answered, so the shards see it
// before the command quiesces.
func (s *script) submit(label string, posts int64, fn func(ctx context.Context) string) {
	answer := s.reqs.Add(label)
	before := s.h.c.rt.Posted()
	finished := make(chan struct{})
	go func() {
		answer(fn(context.Background()))
		close(finished)
	}()
	deadline := time.After(10 * time.Second)
	for s.h.c.rt.Posted() < before+posts {
		select {
		case <-finished:
			return
		case <-deadline:
			s.t.Fatalf("%s was never handed to a shard", label)
		case <-time.After(20 * time.Microsecond):
		}
	}
}

func errByName(t *testing.T, name string) error {
	switch name {
	case "deleted":
		return fmt.Errorf("write marker: %w", ErrPartitionDeleted)
	case "plain":
		return fmt.Errorf("disk on fire")
	}
	if e := coordtest.KafkaError(name); e != nil {
		return fmt.Errorf("failed: %w", e)
	}
	t.Fatalf("unknown error %q", name)
	return nil
}

func fmtMarker(at markerAttempt) string {
	m := at.m
	kind := "abort"
	if m.Commit {
		kind = "commit"
	}
	var parts []string
	for i, tp := range m.Partitions {
		code := "NONE"
		if err := at.errs[i]; err != nil {
			var ke *kerr.Error
			switch {
			case errorsAs(err, &ke):
				code = ke.Message
			default:
				code = err.Error()
			}
		}
		parts = append(parts, fmt.Sprintf("%s/%d=%s", tp.Topic, tp.Partition, code))
	}
	return fmt.Sprintf("marker %s pid=%d epoch=%d coord=%d tv=%d %s", kind, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch,
		m.TransactionVersion, strings.Join(parts, " "))
}

func (s *script) exec(a args, out *strings.Builder) {
	ctx := context.Background()
	h := s.h
	switch a.Name {
	case "config":
		// Restart on a fresh store with changed settings.
		cfg := testConfig()
		cfg.TransactionVersion = int16(a.Int("tv", int64(cfg.TransactionVersion)))
		cfg.TransactionalIDExpirationMs = a.Int("expiration", cfg.TransactionalIDExpirationMs)
		s.h.c.Close()
		s.h = newHarness(s.t, cfg)
	case "init":
		s.init(a)
	case "add":
		s.add(a, false)
	case "verify":
		s.add(a, true)
	case "offsets":
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.Version = int16(a.Int("v", 4))
		req.TransactionalID = a.Str("id", "t1")
		req.ProducerID = a.Int("pid", 1000)
		req.ProducerEpoch = int16(a.Int("epoch", 0))
		req.Group = a.Str("group", "g1")
		s.submit("offsets "+req.TransactionalID, 1, func(ctx context.Context) string {
			return coordtest.ErrName(h.c.AddOffsetsToTxn(ctx, req)().ErrorCode)
		})
	case "end":
		s.end(a)
	case "describe":
		out.WriteString(s.describe(a))
	case "list":
		out.WriteString(s.list(a))
	case "advance":
		h.advance(a.Duration(0))
	case "store":
		coordtest.StoreCommand(a, h.store, func(name string) error { return errByName(s.t, name) })
	case "markers":
		switch {
		case slices.Contains(a.Pos, "hold"):
			h.markers.Set(true)
		case slices.Contains(a.Pos, "release"):
			h.markers.Set(false)
		case a.KV["fail"] != "":
			err := errByName(s.t, a.KV["fail"])
			for _, tp := range topicPartitions(a) {
				h.markers.fail(tp, err, int(a.Int("times", 1)))
			}
		}
	case "alloc":
		h.alloc.failing.Store(slices.Contains(a.Pos, "fail"))
	case "records":
		out.WriteString(s.records(a))
	case "restart":
		h.restart()
	case "unload":
		h.c.Unload(int32(a.Int("p", 0)))
	case "load":
		p := int32(a.Int("p", 0))
		if err := h.c.Load(ctx, p, int32(a.Int("epoch", int64(h.epoch))), coordtest.SeqOf(h.store.Records(p))); err != nil {
			fmt.Fprintf(out, "error: %v\n", err)
		}
	case "state":
		out.WriteString(s.state(a.Str("id", "t1")))
	case "set-epoch":
		// Jump an id's epoch, to reach exhaustion without 32,000 steps.
		id := a.Str("id", "t1")
		h.onShard(id, func(m *machine) {
			_, t, _ := m.lookup(id)
			t.producerEpoch = int16(a.Int("epoch", 0))
		})
	case "partition":
		fmt.Fprintf(out, "%d\n", h.c.PartitionFor(a.Str("id", "t1")))
	default:
		s.t.Fatalf("unknown command %q", a.Name)
	}
}

func (s *script) init(a args) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = int16(a.Int("v", 5))
	label := "init"
	if id, ok := a.KV["id"]; ok {
		req.TransactionalID = &id
		label = "init " + id
	}
	req.TransactionTimeoutMillis = int32(a.Int("timeout", 60000))
	req.ProducerID = a.Int("pid", -1)
	req.ProducerEpoch = int16(a.Int("epoch", -1))
	posts := int64(1)
	if req.TransactionalID == nil {
		posts = 0
	}
	s.submit(label, posts, func(ctx context.Context) string {
		r := s.h.c.InitProducerID(ctx, req)()
		return fmt.Sprintf("%s pid=%d epoch=%d", coordtest.ErrName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
	})
}

// add sends AddPartitionsToTxn: v0-v3 as a client, v4+ as a broker (with
// verify, VerifyOnly).
func (s *script) add(a args, verify bool) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	def := int64(3)
	if verify {
		def = 4
	}
	req.Version = int16(a.Int("v", def))
	id := a.Str("id", "t1")
	pid, epoch := a.Int("pid", 1000), int16(a.Int("epoch", 0))
	var topics []string
	parts := map[string][]int32{}
	for _, tp := range topicPartitions(a) {
		if _, ok := parts[tp.Topic]; !ok {
			topics = append(topics, tp.Topic)
		}
		parts[tp.Topic] = append(parts[tp.Topic], tp.Partition)
	}
	if req.Version < 4 {
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		for _, t := range topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = t, parts[t]
			req.Topics = append(req.Topics, rt)
		}
	} else {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, verify
		for _, t := range topics {
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic, rt.Partitions = t, parts[t]
			tx.Topics = append(tx.Topics, rt)
		}
		req.Transactions = append(req.Transactions, tx)
	}
	label := a.Name + " " + id
	s.submit(label, 1, func(ctx context.Context) string {
		r := s.h.c.AddPartitionsToTxn(ctx, req)()
		var b []string
		add := func(topic string, p int32, code int16) {
			b = append(b, fmt.Sprintf("%s/%d=%s", topic, p, coordtest.ErrName(code)))
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.ErrorCode)
			}
		}
		for _, tx := range r.Transactions {
			for _, t := range tx.Topics {
				for _, p := range t.Partitions {
					add(t.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
		return strings.Join(b, " ")
	})
}

func (s *script) end(a args) {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = int16(a.Int("v", 4))
	req.TransactionalID = a.Str("id", "t1")
	req.ProducerID = a.Int("pid", 1000)
	req.ProducerEpoch = int16(a.Int("epoch", 0))
	req.Commit = slices.Contains(a.Pos, "commit")
	s.submit("end "+req.TransactionalID, 1, func(ctx context.Context) string {
		r := s.h.c.EndTxn(ctx, req)()
		if req.Version >= 5 {
			return fmt.Sprintf("%s pid=%d epoch=%d", coordtest.ErrName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
		}
		return coordtest.ErrName(r.ErrorCode)
	})
}

func (s *script) describe(a args) string {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = a.Pos
	resp := s.h.c.DescribeTransactions(context.Background(), req)
	var b strings.Builder
	for _, st := range resp.TransactionStates {
		if st.ErrorCode != 0 {
			fmt.Fprintf(&b, "%s: %s\n", st.TransactionalID, coordtest.ErrName(st.ErrorCode))
			continue
		}
		fmt.Fprintf(&b, "%s: state=%s pid=%d epoch=%d timeout=%d start=%s", st.TransactionalID, st.State,
			st.ProducerID, st.ProducerEpoch, st.TimeoutMillis, s.showTime(st.StartTimestamp))
		for _, t := range st.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, " %s/%d", t.Topic, p)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// showTime prints a timestamp relative to the fake clock's start.
func (s *script) showTime(msTs int64) string {
	if msTs < 0 {
		return fmt.Sprint(msTs)
	}
	return fmt.Sprintf("+%s", time.Duration(msTs-1_700_000_000_000)*time.Millisecond)
}

func (s *script) list(a args) string {
	req := kmsg.NewPtrListTransactionsRequest()
	req.Version = int16(a.Int("v", 2))
	if v := a.Str("states", ""); v != "" {
		req.StateFilters = strings.Split(v, ",")
	}
	if v := a.Str("pids", ""); v != "" {
		for _, f := range strings.Split(v, ",") {
			n, _ := strconv.ParseInt(f, 10, 64)
			req.ProducerIDFilters = append(req.ProducerIDFilters, n)
		}
	}
	req.DurationFilterMillis = a.Int("duration", -1)
	if v, ok := a.KV["pattern"]; ok {
		req.TransactionalIDPattern = &v
	}
	resp := s.h.c.ListTransactions(context.Background(), req)
	var b strings.Builder
	if resp.ErrorCode != 0 {
		fmt.Fprintf(&b, "%s\n", coordtest.ErrName(resp.ErrorCode))
	}
	if len(resp.UnknownStateFilters) > 0 {
		fmt.Fprintf(&b, "unknown states: %s\n", strings.Join(resp.UnknownStateFilters, ","))
	}
	for _, st := range resp.TransactionStates {
		fmt.Fprintf(&b, "%s pid=%d %s\n", st.TransactionalID, st.ProducerID, st.TransactionState)
	}
	if b.Len() == 0 {
		b.WriteString("none\n")
	}
	return b.String()
}

// records prints a partition's records decoded (p=N, or the partition of
// id=X).
func (s *script) records(a args) string {
	p := int32(a.Int("p", 0))
	if id, ok := a.KV["id"]; ok {
		p = s.h.c.PartitionFor(id)
	}
	var b strings.Builder
	for _, r := range s.h.store.Records(p) {
		var k kmsg.TxnMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			fmt.Fprintf(&b, "bad key: %v\n", err)
			continue
		}
		if r.Value == nil {
			fmt.Fprintf(&b, "%s tombstone\n", k.TransactionalID)
			continue
		}
		var v kmsg.TxnMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			fmt.Fprintf(&b, "%s bad value: %v\n", k.TransactionalID, err)
			continue
		}
		fmt.Fprintf(&b, "%s v%d %s pid=%d epoch=%d prev=%d next=%d tv=%d timeout=%d start=%s update=%s", k.TransactionalID, v.Version,
			txnState(v.State), v.ProducerID, v.ProducerEpoch, v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion,
			v.TimeoutMillis, s.showTime(v.StartTimestamp), s.showTime(v.LastUpdateTimestamp))
		if v.Topics == nil {
			b.WriteString(" parts=null")
		}
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(&b, " %s/%d", t.Topic, p)
			}
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		b.WriteString("no records\n")
	}
	return b.String()
}

// state prints an id's full in-memory state.
func (s *script) state(id string) string {
	var out string
	s.h.onShard(id, func(m *machine) {
		_, t, code := m.lookup(id)
		switch {
		case code != 0:
			out = coordtest.ErrName(code) + "\n"
		case t == nil:
			out = "no such id\n"
		default:
			pending := "-"
			if t.pending != stateNone {
				pending = t.pending.String()
			}
			var parts []string
			for _, tp := range t.partitions.sorted() {
				parts = append(parts, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
			}
			out = fmt.Sprintf("%s p=%d state=%s pending=%s pid=%d prev=%d next=%d epoch=%d last=%d tv=%d timeout=%d start=%s update=%s fence-failed=%v parts=[%s]\n",
				t.id, t.partition, t.state, pending, t.producerID, t.prevProducerID, t.nextProducerID, t.producerEpoch,
				t.lastProducerEpoch, t.tv, t.timeoutMs, s.showTime(t.startMs), s.showTime(t.lastUpdateMs), t.failedFence,
				strings.Join(parts, " "))
		}
	})
	return out
}
