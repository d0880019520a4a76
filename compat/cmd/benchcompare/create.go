package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// -create measures the metadata target of the performance issue on its
// own: CreateTopics/s of one-partition topics on a single gregor and on
// the three-node cluster of scripts/cluster.sh (RF 3), one topic per
// request from 1 and 8 clients, and topics/s with 100 topics per
// request.

// targetClusterCreatesPerSec is the 3-node quorum's CreateTopics/s target.
const targetClusterCreatesPerSec = 200

// createOptions size the -create run.
type createOptions struct {
	on         bool
	topics     int // one-partition topics per one-per-request case
	batchTotal int // topics of the 100-per-request case
}

var createOpts createOptions

func init() {
	flag.BoolVar(&createOpts.on, "create", false, "instead of the comparison, measure CreateTopics/s (one-partition topics) on a single gregor and on a three-node cluster (RF 3): one topic per request from 1 and 8 clients, and 100 topics per request")
	flag.IntVar(&createOpts.topics, "create-topics", 500, "topics -create creates per one-topic-per-request case")
	flag.IntVar(&createOpts.batchTotal, "create-batch-topics", 2000, "topics -create creates, 100 per request, for the batched case")
}

// runCreate runs the -create cases on a fresh single gregor, then on a
// fresh three-node cluster.
func runCreate(ctx context.Context, o createOptions, work, bin string) ([]figure, error) {
	var figs []figure
	g, _, err := startFreshGregor(bin, work, "create", false)
	if err != nil {
		return nil, err
	}
	single, err := createCases(ctx, o, "single node", []string{g.addr}, 1, targetCreatesPerSec)
	if stopErr := g.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return nil, err
	}
	figs = append(figs, single...)

	c, err := startGregorCluster(ctx, bin, filepath.Join(work, "create-cluster"))
	if err != nil {
		return nil, err
	}
	defer c.stop()
	slog.Info("gregor cluster up", "seeds", c.seeds())
	cluster, err := createCases(ctx, o, "3-node quorum, RF 3", c.seeds(), 3, targetClusterCreatesPerSec)
	if err != nil {
		return nil, err
	}
	return append(figs, cluster...), nil
}

// createCases measures one broker set: one topic per request from 1 and
// 8 clients, then 100 per request from 1 client.
func createCases(ctx context.Context, o createOptions, where string, seeds []string, rf int16, target int) ([]figure, error) {
	var figs []figure
	prefix := fmt.Sprintf("c%d-", rf)
	for _, workers := range []int{1, 8} {
		load := loadNow()
		rate, err := createTopicsBatched(ctx, seeds, fmt.Sprintf("%s%dw-", prefix, workers), o.topics, 1, workers, rf)
		if err != nil {
			return nil, err
		}
		slog.Info("created", "where", where, "clients", workers, "per_second", rate)
		figs = append(figs, figure{fmt.Sprintf("CreateTopics/s, %s, %d one-partition topics, one per request, %d client(s) at once (load %.1f)", where, o.topics, workers, load),
			fmt.Sprintf("%.0f/s", rate), fmt.Sprintf("≥ %d/s", target), met(rate >= float64(target))})
	}
	load := loadNow()
	rate, err := createTopicsBatched(ctx, seeds, prefix+"b-", o.batchTotal, 100, 1, rf)
	if err != nil {
		return nil, err
	}
	slog.Info("created", "where", where, "per_request", 100, "per_second", rate)
	figs = append(figs, figure{fmt.Sprintf("topics/s, %s, %d one-partition topics, 100 per request, 1 client (load %.1f)", where, o.batchTotal, load),
		fmt.Sprintf("%.0f/s", rate), "", ""})
	return figs, nil
}

// loadNow is the one-minute load average, 0 if unknown.
func loadNow() float64 {
	s, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	l, _ := loadAvg(string(s))
	return l
}

// createTopicsBatched creates n one-partition topics of replication
// factor rf named prefix+i, perRequest topics per CreateTopics request,
// from workers clients at once, and returns the topics created per
// second. Every topic must be answered created.
func createTopicsBatched(ctx context.Context, seeds []string, prefix string, n, perRequest, workers int, rf int16) (float64, error) {
	var next atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
			if err != nil {
				errs[w] = err
				return
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			for {
				first := next.Add(int64(perRequest)) - int64(perRequest)
				if first >= int64(n) || ctx.Err() != nil {
					return
				}
				var names []string
				for i := first; i < min(first+int64(perRequest), int64(n)); i++ {
					names = append(names, fmt.Sprintf("%s%d", prefix, i))
				}
				resps, err := adm.CreateTopics(ctx, 1, rf, nil, names...)
				if err == nil {
					err = resps.Error()
				}
				if err == nil && len(resps) != len(names) {
					err = fmt.Errorf("%d topics answered of %d", len(resps), len(names))
				}
				if err != nil {
					errs[w] = fmt.Errorf("create topics %s..: %w", names[0], err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
