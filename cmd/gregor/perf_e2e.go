package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// e2eSettings are the end-to-end part of a report.
type e2eSettings struct {
	Rate     float64 `json:"rate"`      // records/s asked for
	Achieved float64 `json:"achieved"`  // records/s sent
	Verified bool    `json:"verified"`  // every record read back once
	Behind   int64   `json:"behind_ms"` // how far the sender fell behind its schedule, at most
	Sent     int64   `json:"sent"`      // records sent (all of --records unless interrupted)
	// The stages of the latency, so a figure can be traced to the
	// sender, the produce round trip or the fetch: SendDelay is how late
	// each record was handed to the client after its due time (the
	// sender's timer granularity, or a client that blocks on a full
	// buffer); Ack runs from that hand-over to the producer's
	// acknowledgement (linger, the Produce round trip); FromDue is the
	// latency counted from the due time, SendDelay included.
	SendDelay *latencySummary `json:"send_delay_ms,omitempty"`
	Ack       *latencySummary `json:"ack_ms,omitempty"`
	FromDue   *latencySummary `json:"from_due_ms,omitempty"`
}

// e2eDefaultLinger is the linger of `perf e2e` unless --linger is given:
// none, as Kafka's EndToEndLatency tool sets (linger.ms=0), which is what
// a latency-sensitive producer uses; a batch still forms while a Produce
// request is in flight.
const e2eDefaultLinger = time.Duration(0)

// sentHeader is the record header that carries when the record was
// handed to the client, in nanoseconds since the run's start on the
// monotonic clock, read back by the consumer in the same process.
const sentHeader = "gregor-perf-sent"

// e2eStages holds the per-stage latencies of a run besides the headline
// one (read back minus handed to the client).
type e2eStages struct {
	sendDelay, ack, fromDue *latencies
}

func newE2EStages(n int64) e2eStages {
	return e2eStages{sendDelay: newLatencies(n), ack: newLatencies(n), fromDue: newLatencies(n)}
}

// fill puts the stages' summaries into s.
func (st e2eStages) fill(s *e2eSettings) {
	d, a, f := st.sendDelay.summary(), st.ack.summary(), st.fromDue.summary()
	s.SendDelay, s.Ack, s.FromDue = &d, &a, &f
}

// runE2E measures end-to-end latency at a fixed rate: record i is due at
// start + i/rate and is handed to the client when the sender wakes at or
// after that time; its latency runs from that hand-over to when a
// consumer in this process reads it, as the OpenMessaging Benchmark
// measures it. The sender sleeps between records, and a sleep shorter
// than the runtime's timer granularity (about 1 ms on Linux) ends up to
// that much late: counting from the due time would charge that to the
// broker. The lateness is reported on its own (send_delay_ms), with the
// latency from the due time (from_due_ms): a broker that stalls long
// enough to fill the client's buffer blocks Produce, which shows there
// and in behind_ms (no coordinated omission hidden). The consumer starts
// at the topic's end offsets taken before the first send and checks that
// every record arrives once.
func runE2E(ctx context.Context, o produceOptions, log io.Writer) (perfReport, error) {
	if o.throughput <= 0 {
		return perfReport{}, errors.New("perf e2e: --throughput (the fixed rate, records/s) is required")
	}
	if o.recordSize < 16 {
		return perfReport{}, errors.New("perf e2e: --record-size must be at least 16 (values carry their index)")
	}
	if o.producers != 1 {
		return perfReport{}, errors.New("perf e2e: --producers is for perf produce; e2e runs one producer")
	}
	if o.records > maxVerifyRecords {
		return perfReport{}, fmt.Errorf("perf e2e: --records must be at most %d", maxVerifyRecords)
	}
	prod, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		return perfReport{}, fmt.Errorf("perf e2e: %w", err)
	}
	defer prod.Close()
	if err := ensureTopic(ctx, prod, o.topic, o.partitions, o.replicationFactor, log); err != nil {
		return perfReport{}, err
	}
	ends, err := endOffsets(ctx, kadm.NewClient(prod), o.topic)
	if err != nil {
		return perfReport{}, fmt.Errorf("perf e2e: end offsets of %s: %w", o.topic, err)
	}
	from := map[int32]kgo.Offset{}
	ends.Each(func(l kadm.ListedOffset) { from[l.Partition] = kgo.NewOffset().At(l.Offset) })
	consOpts := append([]kgo.Opt{kgo.SeedBrokers(o.bootstrap...), kgo.ClientID("gregor-perf-e2e"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: from}),
		kgo.FetchMaxWait(100 * time.Millisecond)}, o.secOpts...)
	cons, err := kgo.NewClient(consOpts...)
	if err != nil {
		return perfReport{}, fmt.Errorf("perf e2e: %w", err)
	}
	defer cons.Close()

	lat := newLatencies(o.records)
	stages := newE2EStages(o.records)
	ver := newVerifier(o.records)
	start := time.Now()
	due := func(i uint64) time.Time {
		return start.Add(time.Duration(float64(i) / o.throughput * float64(time.Second)))
	}
	readErr := make(chan error, 1)
	go func() { readErr <- readE2E(ctx, cons, o.records, ver, lat, stages, start, due) }()
	stopProgress := reportEvery(progressInterval(log), func(window time.Duration) {
		n, total, worst := lat.window()
		perSec, mbPerSec := rates(n, n*int64(o.recordSize), window)
		var avg float64
		if n > 0 {
			avg = ms(total / time.Duration(n))
		}
		fmt.Fprintf(log, "%d records read back, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency from due time.\n",
			n, perSec, mbPerSec, avg, ms(worst))
	})
	defer stopProgress()

	base := payloadBase(o.recordSize)
	pool := sync.Pool{New: func() any { b := make([]byte, o.recordSize); return &b }}
	var failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var behind time.Duration
	var sent int64
	for ; sent < o.records && ctx.Err() == nil; sent++ {
		if d := time.Until(due(uint64(sent))); d > 0 {
			time.Sleep(d)
		} else {
			behind = max(behind, -d)
		}
		bp := pool.Get().(*[]byte)
		fillValue(*bp, base, uint64(sent))
		at := time.Since(start)
		stages.sendDelay.add(max(at-due(uint64(sent)).Sub(start), 0))
		r := &kgo.Record{Topic: o.topic, Value: *bp,
			Headers: []kgo.RecordHeader{{Key: sentHeader, Value: binary.BigEndian.AppendUint64(nil, uint64(at))}}}
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			stages.ack.add(time.Since(start) - at)
			pool.Put(bp)
			if err != nil {
				failed.Add(1)
				errOnce.Do(func() { firstErr = err })
			}
		})
	}
	sendElapsed := time.Since(start)
	if ctx.Err() != nil {
		// Interrupted: the summary covers the records read back so far.
		<-readErr
		stopProgress()
		got := lat.len()
		rep := newReport("e2e", o.topic, got, got*int64(o.recordSize), time.Since(start))
		sum := lat.summary()
		rep.Latency = &sum
		rep.E2E = &e2eSettings{Rate: o.throughput, Achieved: float64(sent) / sendElapsed.Seconds(), Behind: behind.Milliseconds(), Sent: sent}
		stages.fill(rep.E2E)
		rep.Interrupted = true
		return rep, &interruptedError{fmt.Sprintf("perf e2e: interrupted after %d records sent, %d read back", sent, got)}
	}
	if err := prod.Flush(ctx); err != nil {
		return perfReport{}, fmt.Errorf("perf e2e: interrupted after %d records: %w", sent, err)
	}
	if n := failed.Load(); n > 0 {
		return perfReport{}, fmt.Errorf("perf e2e: %d of %d records failed, the first with: %w", n, sent, firstErr)
	}
	if err := <-readErr; err != nil {
		return perfReport{}, err
	}
	stopProgress()
	rep := newReport("e2e", o.topic, sent, sent*int64(o.recordSize), time.Since(start))
	sum := lat.summary()
	rep.Latency = &sum
	rep.Produce = o.settings()
	rep.E2E = &e2eSettings{Rate: o.throughput, Achieved: float64(sent) / sendElapsed.Seconds(), Verified: true, Behind: behind.Milliseconds(), Sent: sent}
	stages.fill(rep.E2E)
	return rep, nil
}

// readE2E reads n records, each checked by ver, and adds each one's
// latency from when it was handed to the client (its sentHeader) to lat,
// and from its due time to st.fromDue.
func readE2E(ctx context.Context, cl *kgo.Client, n int64, ver *verifier, lat *latencies, st e2eStages, start time.Time, due func(uint64) time.Time) error {
	const idle = 30 * time.Second
	var got int64
	last := time.Now()
	for got < n {
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		now := time.Now()
		since := now.Sub(start)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("perf e2e: interrupted after reading %d records: %w", got, err)
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return fmt.Errorf("perf e2e: %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		progressed := false
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			if err := ver.check(r.Value); err != nil {
				return fmt.Errorf("perf e2e: %s[%d] offset %d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			index, _ := valueIndex(r.Value, ver.base[:len(r.Value)]) // checked just above
			at, err := sentAt(r)
			if err != nil {
				return fmt.Errorf("perf e2e: %s[%d] offset %d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			lat.add(since - at)
			st.fromDue.add(now.Sub(due(index)))
			got++
			progressed = true
		}
		if progressed {
			last = now
		} else if now.Sub(last) > idle {
			return fmt.Errorf("perf e2e: read %d of %d records, then none for %s", got, n, idle)
		}
	}
	return nil
}

// sentAt is when r was handed to the client, from its sentHeader.
func sentAt(r *kgo.Record) (time.Duration, error) {
	for _, h := range r.Headers {
		if h.Key == sentHeader {
			if len(h.Value) != 8 {
				return 0, fmt.Errorf("header %s of %d bytes, want 8", sentHeader, len(h.Value))
			}
			return time.Duration(binary.BigEndian.Uint64(h.Value)), nil
		}
	}
	return 0, fmt.Errorf("no %s header", sentHeader)
}

// stagesLine is the human form of the stages, after the headline.
func (s *e2eSettings) stagesLine() string {
	if s.SendDelay == nil || s.Ack == nil || s.FromDue == nil {
		return ""
	}
	return fmt.Sprintf(" Sent %.2f ms late at the 99th (%.2f ms max); acknowledged %.2f ms 50th, %.2f ms 99th after send; "+
		"from due time %.2f ms 50th, %.2f ms 99th, %.2f ms 99.9th.",
		s.SendDelay.P99, s.SendDelay.Max, s.Ack.P50, s.Ack.P99, s.FromDue.P50, s.FromDue.P99, s.FromDue.P999)
}

// endOffsets lists topic's end offsets, waiting up to 10 s for a topic
// just created to reach every partition's leader.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (kadm.ListedOffsets, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil || !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.NotLeaderForPartition) || time.Now().After(deadline) {
			return ends, err
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ends, ctx.Err()
		}
	}
}
