package txn

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The scripts in testdata/*.txt are datadriven tests: each case is a
// command, a line "----" and the expected output, ended by a blank line.
// Run with -rewrite to regenerate the expected output, then review the diff.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata scripts with the actual output")

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			runScript(t, f)
		})
	}
}

type scriptCase struct {
	line    int
	command string
	want    string
}

func parseScript(t *testing.T, path string) (cases []scriptCase, comments map[int][]string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	comments = make(map[int][]string)
	var pending []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" {
			continue
		}
		if strings.HasPrefix(l, "#") {
			pending = append(pending, l)
			continue
		}
		c := scriptCase{line: i + 1, command: l}
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s:%d: command without ----", path, c.line)
		}
		var out []string
		for i++; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		c.want = strings.Join(out, "\n")
		comments[len(cases)] = pending
		pending = nil
		cases = append(cases, c)
	}
	return cases, comments
}

func runScript(t *testing.T, path string) {
	cases, comments := parseScript(t, path)
	s := &script{t: t, h: newHarness(t, testConfig())}
	var rewritten strings.Builder
	for i, c := range cases {
		got := strings.TrimRight(s.run(c.command), "\n")
		if *rewrite {
			for _, cm := range comments[i] {
				rewritten.WriteString(cm + "\n")
			}
			fmt.Fprintf(&rewritten, "%s\n----\n%s\n\n", c.command, got)
			continue
		}
		if got != c.want {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.command, got, c.want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// script runs commands against a harness. Requests run on their own
// goroutine through the Coordinator's blocking API; their answer prints
// once it arrives, "waiting" if it has not by the end of the command.
// Marker writes print as they happen.
type script struct {
	t *testing.T
	h *harness

	mu      sync.Mutex
	waiting []*asyncReq
}

type asyncReq struct {
	label  string
	answer string
	done   bool
	fresh  bool
}

type args struct {
	name string
	pos  []string
	kv   map[string]string
	t    *testing.T
	line string
}

func parseArgs(t *testing.T, line string) args {
	fields := strings.Fields(line)
	a := args{name: fields[0], kv: map[string]string{}, t: t, line: line}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok && !strings.Contains(k, "/") {
			a.kv[k] = v
		} else {
			a.pos = append(a.pos, f)
		}
	}
	return a
}

func (a args) str(k, def string) string {
	if v, ok := a.kv[k]; ok {
		return v
	}
	return def
}

func (a args) int(k string, def int64) int64 {
	v, ok := a.kv[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %s=%q is not a number", a.line, k, v)
	}
	return n
}

// parts reads positional topic/partition arguments.
func (a args) parts() []TopicPartition {
	var out []TopicPartition
	for _, p := range a.pos {
		topic, n, ok := strings.Cut(p, "/")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(n)
		if err != nil {
			a.t.Fatalf("%s: bad partition %q", a.line, p)
		}
		out = append(out, TopicPartition{topic, int32(i)})
	}
	return out
}

func (s *script) run(line string) string {
	a := parseArgs(s.t, line)
	var out strings.Builder
	s.exec(a, &out)
	s.h.quiesce()
	s.settle()
	s.mu.Lock()
	for _, r := range s.waiting {
		switch {
		case r.done:
			fmt.Fprintf(&out, "%s: %s\n", r.label, r.answer)
		case r.fresh:
			fmt.Fprintf(&out, "%s: waiting\n", r.label)
		}
		r.fresh = false
	}
	s.waiting = slices.DeleteFunc(s.waiting, func(r *asyncReq) bool { return r.done })
	s.mu.Unlock()
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
		s.mu.Lock()
		open := 0
		for _, r := range s.waiting {
			if !r.done {
				open++
			}
		}
		s.mu.Unlock()
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
	r := &asyncReq{label: label, fresh: true}
	s.mu.Lock()
	s.waiting = append(s.waiting, r)
	s.mu.Unlock()
	before := s.h.c.rt.Posted()
	finished := make(chan struct{})
	go func() {
		answer := fn(context.Background())
		s.mu.Lock()
		r.done, r.answer = true, answer
		s.mu.Unlock()
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

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && ke.Code == code {
		return ke.Message
	}
	return fmt.Sprint(code)
}

func errByName(t *testing.T, name string) error {
	switch name {
	case "deleted":
		return fmt.Errorf("write marker: %w", ErrPartitionDeleted)
	case "plain":
		return fmt.Errorf("disk on fire")
	}
	for code := int16(-1); code < 200; code++ {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code && e.Message == name {
			return fmt.Errorf("failed: %w", e)
		}
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
	switch a.name {
	case "config":
		// Restart on a fresh store with changed settings.
		cfg := testConfig()
		cfg.TransactionVersion = int16(a.int("tv", int64(cfg.TransactionVersion)))
		cfg.TransactionalIDExpirationMs = a.int("expiration", cfg.TransactionalIDExpirationMs)
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
		req.Version = int16(a.int("v", 4))
		req.TransactionalID = a.str("id", "t1")
		req.ProducerID = a.int("pid", 1000)
		req.ProducerEpoch = int16(a.int("epoch", 0))
		req.Group = a.str("group", "g1")
		s.submit("offsets "+req.TransactionalID, 1, func(ctx context.Context) string {
			return errName(h.c.AddOffsetsToTxn(ctx, req)().ErrorCode)
		})
	case "end":
		s.end(a)
	case "describe":
		out.WriteString(s.describe(a))
	case "list":
		out.WriteString(s.list(a))
	case "advance":
		d, err := time.ParseDuration(a.pos[0])
		if err != nil {
			s.t.Fatalf("%s: %v", a.line, err)
		}
		h.advance(d)
	case "store":
		switch {
		case slices.Contains(a.pos, "hold"):
			h.store.set(true)
		case slices.Contains(a.pos, "release"):
			h.store.set(false)
		case slices.Contains(a.pos, "ok"):
			h.store.setFail(nil)
		case a.kv["fail"] != "":
			h.store.setFail(errByName(s.t, a.kv["fail"]))
		}
	case "markers":
		switch {
		case slices.Contains(a.pos, "hold"):
			h.markers.set(true)
		case slices.Contains(a.pos, "release"):
			h.markers.set(false)
		case a.kv["fail"] != "":
			err := errByName(s.t, a.kv["fail"])
			for _, tp := range a.parts() {
				h.markers.fail(tp, err, int(a.int("times", 1)))
			}
		}
	case "alloc":
		h.alloc.failing.Store(slices.Contains(a.pos, "fail"))
	case "records":
		out.WriteString(s.records(a))
	case "restart":
		h.restart()
	case "unload":
		h.c.Unload(int32(a.int("p", 0)))
	case "load":
		p := int32(a.int("p", 0))
		if err := h.c.Load(ctx, p, int32(a.int("epoch", int64(h.epoch))), seqOf(h.store.records(p))); err != nil {
			fmt.Fprintf(out, "error: %v\n", err)
		}
	case "state":
		out.WriteString(s.state(a.str("id", "t1")))
	case "set-epoch":
		// Jump an id's epoch, to reach exhaustion without 32,000 steps.
		id := a.str("id", "t1")
		h.onShard(id, func(m *machine) {
			_, t, _ := m.lookup(id)
			t.producerEpoch = int16(a.int("epoch", 0))
		})
	case "partition":
		fmt.Fprintf(out, "%d\n", h.c.PartitionFor(a.str("id", "t1")))
	default:
		s.t.Fatalf("unknown command %q", a.name)
	}
}

func (s *script) init(a args) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = int16(a.int("v", 5))
	label := "init"
	if id, ok := a.kv["id"]; ok {
		req.TransactionalID = &id
		label = "init " + id
	}
	req.TransactionTimeoutMillis = int32(a.int("timeout", 60000))
	req.ProducerID = a.int("pid", -1)
	req.ProducerEpoch = int16(a.int("epoch", -1))
	posts := int64(1)
	if req.TransactionalID == nil {
		posts = 0
	}
	s.submit(label, posts, func(ctx context.Context) string {
		r := s.h.c.InitProducerID(ctx, req)()
		return fmt.Sprintf("%s pid=%d epoch=%d", errName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
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
	req.Version = int16(a.int("v", def))
	id := a.str("id", "t1")
	pid, epoch := a.int("pid", 1000), int16(a.int("epoch", 0))
	var topics []string
	parts := map[string][]int32{}
	for _, tp := range a.parts() {
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
	label := a.name + " " + id
	s.submit(label, 1, func(ctx context.Context) string {
		r := s.h.c.AddPartitionsToTxn(ctx, req)()
		var b []string
		add := func(topic string, p int32, code int16) {
			b = append(b, fmt.Sprintf("%s/%d=%s", topic, p, errName(code)))
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
	req.Version = int16(a.int("v", 4))
	req.TransactionalID = a.str("id", "t1")
	req.ProducerID = a.int("pid", 1000)
	req.ProducerEpoch = int16(a.int("epoch", 0))
	req.Commit = slices.Contains(a.pos, "commit")
	s.submit("end "+req.TransactionalID, 1, func(ctx context.Context) string {
		r := s.h.c.EndTxn(ctx, req)()
		if req.Version >= 5 {
			return fmt.Sprintf("%s pid=%d epoch=%d", errName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
		}
		return errName(r.ErrorCode)
	})
}

func (s *script) describe(a args) string {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = a.pos
	resp := s.h.c.DescribeTransactions(context.Background(), req)
	var b strings.Builder
	for _, st := range resp.TransactionStates {
		if st.ErrorCode != 0 {
			fmt.Fprintf(&b, "%s: %s\n", st.TransactionalID, errName(st.ErrorCode))
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
	req.Version = int16(a.int("v", 2))
	if v := a.str("states", ""); v != "" {
		req.StateFilters = strings.Split(v, ",")
	}
	if v := a.str("pids", ""); v != "" {
		for _, f := range strings.Split(v, ",") {
			n, _ := strconv.ParseInt(f, 10, 64)
			req.ProducerIDFilters = append(req.ProducerIDFilters, n)
		}
	}
	req.DurationFilterMillis = a.int("duration", -1)
	if v, ok := a.kv["pattern"]; ok {
		req.TransactionalIDPattern = &v
	}
	resp := s.h.c.ListTransactions(context.Background(), req)
	var b strings.Builder
	if resp.ErrorCode != 0 {
		fmt.Fprintf(&b, "%s\n", errName(resp.ErrorCode))
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
	p := int32(a.int("p", 0))
	if id, ok := a.kv["id"]; ok {
		p = s.h.c.PartitionFor(id)
	}
	var b strings.Builder
	for _, r := range s.h.store.records(p) {
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
			out = errName(code) + "\n"
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
