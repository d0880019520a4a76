package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker"
	"github.com/gregorbroker/gregor/config"
)

// startBroker runs a single-node broker in the test's process on a free
// port and returns its address.
func startBroker(t *testing.T) string {
	t.Helper()
	cfg, _, err := config.Parse(config.DevProperties())
	if err != nil {
		t.Fatal(err)
	}
	cfg.LogDirs = []string{t.TempDir()}
	for i := range cfg.Listeners {
		cfg.Listeners[i].Host = "127.0.0.1"
		cfg.Listeners[i].Port = 0
	}
	cfg.AdvertisedListeners = nil
	cfg.GroupInitialRebalanceDelayMs = 0
	// KIP-848 members learn of freed partitions on their next heartbeat:
	// keep the test short.
	cfg.GroupConsumerHeartbeatIntervalMs = 500
	srv, err := broker.New(cfg, broker.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}

// groupMemberClient polls and commits as a member of group until the
// returned stop, which leaves the group. serverSide picks the KIP-848
// protocol, otherwise the classic one.
func groupMemberClient(t *testing.T, addr, group, topic string, serverSide bool) (stop func()) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.HeartbeatInterval(300 * time.Millisecond), kgo.DisableAutoCommit(),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) { cl.CommitUncommittedOffsets(ctx) }),
	}
	if serverSide {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollRecords(ctx, 100)
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			cl.CommitUncommittedOffsets(cctx)
			ccancel()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			cl.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// settledOwners polls ConsumerGroupDescribe until the consumer group is
// Stable with n members, each reconciled to its target, splitting the
// topic's partitions, and every record is committed. It returns the owner
// of each partition.
func settledOwners(t *testing.T, adm *kadm.Client, cl *kgo.Client, group, topic string, partitions, n int, records int64) map[int32]string {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		owners, ok := describedOwners(t, cl, group, topic, n)
		if ok && len(owners) == partitions && committedSum(t, adm, group) == records {
			return owners
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s never settled with %d members over %d partitions and %d records committed: owners %v, committed %d",
				group, n, partitions, records, owners, committedSum(t, adm, group))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describedOwners(t *testing.T, cl *kgo.Client, group, topic string, n int) (map[int32]string, bool) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("ConsumerGroupDescribe: %v %+v", err, resp)
	}
	d := resp.Groups[0]
	if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != n {
		return nil, false
	}
	owners := make(map[int32]string)
	for _, m := range d.Members {
		var current, target []int32
		for _, tp := range m.Assignment.TopicPartitions {
			if tp.Topic == topic {
				current = append(current, tp.Partitions...)
			}
		}
		for _, tp := range m.TargetAssignment.TopicPartitions {
			target = append(target, tp.Partitions...)
		}
		slices.Sort(current)
		slices.Sort(target)
		if len(current) == 0 || !slices.Equal(current, target) {
			return nil, false
		}
		for _, p := range current {
			if _, dup := owners[p]; dup {
				return nil, false
			}
			owners[p] = m.MemberID
		}
	}
	return owners, true
}

func committedSum(t *testing.T, adm *kadm.Client, group string) int64 {
	offs, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// describeRows runs `gregor group describe` and returns, per partition of
// topic, its columns (CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID).
func describeRows(t *testing.T, addr, group, topic string) map[int32][]string {
	t.Helper()
	var b, e bytes.Buffer
	if code := runMain([]string{"group", "describe", group, "-b", addr, "--timeout", "20s"}, nil, &b, &e); code != 0 {
		t.Fatalf("group describe %s: exit %d: %s", group, code, e.String())
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	for len(lines) > 0 && !strings.HasPrefix(lines[0], "GROUP  ") {
		lines = lines[1:]
	}
	if len(lines) == 0 {
		t.Fatalf("group describe output:\n%s", b.String())
	}
	rows := make(map[int32][]string)
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 9 || f[0] != group || f[1] != topic {
			t.Fatalf("group describe row %q in:\n%s", l, b.String())
		}
		p, err := strconv.ParseInt(f[2], 10, 32)
		if err != nil {
			t.Fatalf("row %q: %v", l, err)
		}
		rows[int32(p)] = f[3:7]
	}
	return rows
}

// TestGroupsDescribeConsumerGroup: `gregor groups describe` on a KIP-848
// group, first an upgraded one (a classic franz-go member with two KIP-848
// members inside a consumer group), then a consumer group of the two
// KIP-848 members. Every partition's row names the member
// ConsumerGroupDescribe reports owning it, and the offsets and lag are
// those committed (everything read: lag 0 on log end offsets summing to
// the records produced).
func TestGroupsDescribeConsumerGroup(t *testing.T) {
	const topic, group, partitions, records = "cli848", "cli848-g", 4, 80
	addr := startBroker(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			r := &kgo.Record{Value: []byte(fmt.Sprint(i)), Partition: int32(i % partitions)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, records/2)

	check := func(what string, members int, total int64) {
		t.Helper()
		owners := settledOwners(t, adm, cl, group, topic, partitions, members, total)
		rows := describeRows(t, addr, group, topic)
		var logEnd int64
		for p := int32(0); p < partitions; p++ {
			r, ok := rows[p]
			if !ok {
				t.Fatalf("%s: no row for partition %d in %v", what, p, rows)
			}
			if r[3] != owners[p] || r[0] != r[1] || r[2] != "0" {
				t.Fatalf("%s: partition %d row %v, want owner %s and lag 0 with the current offset at the log end", what, p, r, owners[p])
			}
			end, _ := strconv.ParseInt(r[1], 10, 64)
			logEnd += end
		}
		if len(rows) != partitions || logEnd != total {
			t.Fatalf("%s: %d rows, log end offsets sum to %d; want %d rows and %d", what, len(rows), logEnd, partitions, total)
		}
		if again, _ := describedOwners(t, cl, group, topic, members); !equalOwners(again, owners) {
			t.Fatalf("%s: owners moved while describing: %v then %v", what, owners, again)
		}
	}

	stopClassic := groupMemberClient(t, addr, group, topic, false)
	// The classic member forms the group before the KIP-848 members join,
	// so theirs is an online upgrade.
	waitClassicStable(t, adm, group)
	groupMemberClient(t, addr, group, topic, true)
	groupMemberClient(t, addr, group, topic, true)
	check("upgraded group", 3, records/2)

	stopClassic()
	produce(records/2, records)
	check("consumer group", 2, records)
}

func equalOwners(a, b map[int32]string) bool {
	if len(a) != len(b) {
		return false
	}
	for p, m := range a {
		if b[p] != m {
			return false
		}
	}
	return true
}

// waitClassicStable polls DescribeGroups until group is a stable classic
// group.
func waitClassicStable(t *testing.T, adm *kadm.Client, group string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		d, err := adm.DescribeGroups(context.Background(), group)
		if err == nil && d[group].Err == nil && d[group].State == "Stable" && d[group].ProtocolType == "consumer" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("classic group %s never stable: %v %+v", group, err, d[group])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
