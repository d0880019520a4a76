package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/group"
)

var grpFigures = flag.Bool("groups.figures", false,
	"run TestGroupsFigures: consumer group figures for docs/performance.md (a non-race gregor, minutes of work)")

// TestGroupsFigures measures the consumer group figures of
// docs/performance.md against a gregor built without the race detector:
// how long a group takes to become stable when N members join at once
// over 1,000 partitions, OffsetCommit throughput on one group and over
// 100 groups, and how long a restart takes to load 1 million committed
// offsets from __consumer_offsets. It runs only with -groups.figures:
//
//	go test ./integration -run TestGroupsFigures -groups.figures -v -timeout 30m
func TestGroupsFigures(t *testing.T) {
	if !*grpFigures {
		t.Skip("measures for minutes; pass -groups.figures")
	}
	bin := filepath.Join(t.TempDir(), "gregor")
	build := exec.Command("go", "build", "-o", bin, "../cmd/gregor")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build gregor: %v", err)
	}
	// launchGregor runs gregorBin. No other test runs meanwhile: this
	// test is not parallel and the parallel ones wait for it.
	raceBin := gregorBin
	gregorBin = bin
	t.Cleanup(func() { gregorBin = raceBin })

	t.Run("stable", grpFigureStable)
	t.Run("commits", grpFigureCommits)
	t.Run("load", grpFigureLoad)
}

func grpMedian(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// grpFigureStable: N members join a group at once over a topic of 1,000
// partitions; the time until every member holds partitions of the final
// assignment (all 1,000 held, each member some).
func grpFigureStable(t *testing.T) {
	p := grpStartGregor(t, t.TempDir(), freePort(t))
	const topic, partitions = "fig-stable", 1000
	createTopic(t, p.addr, topic, partitions)
	_, b := grpRawBroker(t, p.addr)
	for _, mode := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic range (eager)", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"classic cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"KIP-848 (uniform, heartbeat 500 ms)", []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}},
	} {
		for _, n := range []int{10, 100} {
			var runs []time.Duration
			for run := range 3 {
				g := fmt.Sprintf("fig-stable-%s-%d-%d", strings.Fields(mode.name)[0], n, run)
				grpWaitCoordinator(t, b, g)
				runs = append(runs, grpTimeStable(t, p.addr, g, topic, partitions, n, mode.opts))
			}
			t.Logf("FIGURE stable: %s, %d members, %d partitions: median %v (runs %v)", mode.name, n, partitions, grpMedian(runs), runs)
		}
	}
}

func grpTimeStable(t *testing.T, addr, g, topic string, partitions, n int, opts []kgo.Opt) time.Duration {
	var mu sync.Mutex
	held := make([]int, n)
	clients := make([]*kgo.Client, n)
	start := time.Now()
	for i := range n {
		change := func(sign int) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				mu.Lock()
				held[i] += sign * len(ps[topic])
				mu.Unlock()
			}
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(g), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.SessionTimeout(30 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
			kgo.OnPartitionsAssigned(change(1)), kgo.OnPartitionsRevoked(change(-1)), kgo.OnPartitionsLost(change(-1))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = cl
		go func() {
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
	}
	var took time.Duration
	grpWaitFor(t, 5*time.Minute, fmt.Sprintf("%d members to hold all %d partitions", n, partitions), func() bool {
		mu.Lock()
		defer mu.Unlock()
		total := 0
		for _, h := range held {
			if h == 0 {
				return false
			}
			total += h
		}
		took = time.Since(start)
		return total == partitions
	})
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.Close()
		}()
	}
	wg.Wait()
	return took
}

// grpFigureCommits: OffsetCommit requests of one partition each, from 64
// concurrent committers over 8 connections, for 5 s: into one group, then
// round-robin over 100 groups.
func grpFigureCommits(t *testing.T) {
	p := grpStartGregor(t, t.TempDir(), freePort(t))
	const topic = "fig-commit"
	createTopic(t, p.addr, topic, 100)
	_, b := grpRawBroker(t, p.addr)
	for i := range 100 {
		grpWaitCoordinator(t, b, fmt.Sprintf("fig-commit-%d", i))
	}
	const conns, perConn, d = 8, 8, 5 * time.Second
	for _, spread := range []int{1, 100} {
		var clients []*kgo.Broker
		for range conns {
			_, cb := grpRawBroker(t, p.addr)
			clients = append(clients, cb)
		}
		var n, failed atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		deadline := time.Now().Add(d)
		var wg sync.WaitGroup
		for w := range conns * perConn {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []time.Duration
				for i := 0; time.Now().Before(deadline); i++ {
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Group = fmt.Sprintf("fig-commit-%d", (w+i*conns*perConn)%spread)
					req.Generation = -1
					rt := kmsg.NewOffsetCommitRequestTopic()
					rt.Topic = topic
					rp := kmsg.NewOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset = int32((w+i)%100), int64(i)
					rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{rp}
					req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
					t0 := time.Now()
					resp, err := clients[w%conns].Request(context.Background(), req)
					if err != nil || resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
						failed.Add(1)
						continue
					}
					mine = append(mine, time.Since(t0))
					n.Add(1)
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		if failed.Load() > 0 || len(lat) == 0 {
			t.Fatalf("%d commits failed, %d succeeded", failed.Load(), len(lat))
		}
		t.Logf("FIGURE commits: %d group(s), %d committers: %.0f commits/s (p50 %v, p99 %v)",
			spread, conns*perConn, float64(n.Load())/d.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100])
	}
}

// grpFigureLoad: 1,000 groups commit 1,000 partitions each (1 million
// offsets); gregor stops (SIGTERM, and then SIGKILL) and restarts, and the
// time until every __consumer_offsets partition answers OffsetFetch with
// its offsets is taken.
func grpFigureLoad(t *testing.T) {
	dir, port := t.TempDir(), freePort(t)
	p := grpStartGregor(t, dir, port)
	const topic, groups, partitions = "fig-load", 1000, 1000
	createTopic(t, p.addr, topic, partitions)
	_, b := grpRawBroker(t, p.addr)
	grpWaitCoordinator(t, b, "fig-load-0000")
	name := func(i int) string { return fmt.Sprintf("fig-load-%04d", i) }

	writeStart := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < groups; i = int(next.Add(1) - 1) {
				req := kmsg.NewPtrOffsetCommitRequest()
				req.Group, req.Generation = name(i), -1
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = topic
				for part := range partitions {
					rp := kmsg.NewOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset = int32(part), int64(i+part)
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
				resp, err := b.Request(context.Background(), req)
				if err != nil {
					t.Error(err)
					return
				}
				for _, rp := range resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions {
					if rp.ErrorCode != 0 {
						t.Errorf("commit %s: %v", req.Group, kerr.ErrorForCode(rp.ErrorCode))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("wrote %d offsets in %v", groups*partitions, time.Since(writeStart).Round(time.Millisecond))

	// One probe group per __consumer_offsets partition: all are loaded
	// when every probe answers.
	probes := map[int32]string{}
	for i := range groups {
		probes[group.PartitionFor(name(i), 50)] = name(i)
	}
	if len(probes) != 50 {
		t.Fatalf("the groups cover %d of 50 partitions", len(probes))
	}
	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		if how == "SIGTERM" {
			p.stop()
		} else {
			p.kill()
		}
		size := grpDirSize(t, dir, "__consumer_offsets-")
		t0 := time.Now()
		p = grpStartGregor(t, dir, port)
		started := time.Since(t0)
		_, b = grpRawBroker(t, p.addr)
		grpWaitFor(t, 5*time.Minute, "every __consumer_offsets partition to load", func() bool {
			req := kmsg.NewPtrOffsetFetchRequest()
			for _, g := range probes {
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = g
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic, rt.Partitions = topic, []int32{999}
				rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{rt}
				req.Groups = append(req.Groups, rg)
			}
			resp, err := b.Request(context.Background(), req)
			if err != nil {
				return false
			}
			for _, g := range resp.(*kmsg.OffsetFetchResponse).Groups {
				if g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Partitions[0].Offset < 0 {
					return false
				}
			}
			return true
		})
		loaded := time.Since(t0)
		// Every offset is back.
		adm := kadm.NewClient(newClient(t, p.addr))
		total := 0
		for i := 0; i < groups; i += 100 {
			var gs []string
			for j := i; j < i+100; j++ {
				gs = append(gs, name(j))
			}
			for _, r := range adm.FetchManyOffsets(testContext(t, time.Minute), gs...) {
				if r.Err != nil {
					t.Fatalf("fetch %s: %v", r.Group, r.Err)
				}
				r.Fetched.Each(func(o kadm.OffsetResponse) {
					var gi int
					fmt.Sscanf(r.Group, "fig-load-%d", &gi)
					if o.Err == nil && o.At == int64(gi)+int64(o.Partition) {
						total++
					}
				})
			}
		}
		if total != groups*partitions {
			t.Fatalf("after the restart %d of %d offsets read back", total, groups*partitions)
		}
		t.Logf("FIGURE load: %d offsets (%d groups x %d partitions, %.0f MiB of __consumer_offsets), restart after %s: started in %v, all loaded after %v",
			groups*partitions, groups, partitions, float64(size)/(1<<20), how, started.Round(time.Millisecond), loaded.Round(time.Millisecond))
	}
}

func grpDirSize(t *testing.T, dir, prefix string) int64 {
	var n int64
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() && strings.HasPrefix(filepath.Base(filepath.Dir(path)), prefix) {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
