package broker

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

// TestProduceFlushesEveryPartitionBeforeAnswer: with flush.messages=1, a
// Produce carrying batches for many partitions is answered only once each
// of them is on disk (their fsyncs run side by side, flushProduced), for
// plain and idempotent batches, acks=1 and acks=all.
func TestProduceFlushesEveryPartitionBeforeAnswer(t *testing.T) {
	const parts = 8
	ts := startServer(t, "")
	one := "1"
	createTopic(t, ts.admin(t), "durable", parts, map[string]*string{"flush.messages": &one})
	id := topicID(t, ts, "durable")
	cl := ts.client(t)
	ctx := testContext(t)
	checkFlushed := func(what string) {
		t.Helper()
		for i := range parts {
			p := ts.parts.get("durable", int32(i))
			if rp, leo := p.Log.RecoveryPoint(), p.Log.LogEndOffset(); leo == 0 || rp < leo {
				t.Errorf("%s: partition %d flushed to %d of %d", what, i, rp, leo)
			}
		}
	}
	for _, acks := range []int16{1, -1} {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = acks
		req.TimeoutMillis = 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "durable", id
		for i := range parts {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(i)
			rp.Records = benchBatch(t, 3, 100)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("acks %d: %v", acks, err)
		}
		for _, sp := range resp.Topics[0].Partitions {
			if sp.ErrorCode != 0 || sp.BaseOffset < 0 {
				t.Fatalf("acks %d: partition %d: %v, base offset %d", acks, sp.Partition, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
			}
		}
		checkFlushed("plain batches")
	}
	// The idempotent producer's batches take the producer-state path.
	prod := ts.client(t, kgo.DefaultProduceTopic("durable"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	var recs []*kgo.Record
	for range 4 * parts {
		recs = append(recs, kgo.StringRecord("x"))
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	checkFlushed("idempotent batches")
}

// syncGate holds back the fsyncs of segment files (.log) whose path contains armed until
// release is closed, telling entered when the first one starts: a disk
// whose fsync is slow, so a test can look at the broker in between.
type syncGate struct {
	mu      sync.Mutex
	armed   string
	entered chan struct{}
	release chan struct{}
}

func (g *syncGate) inject(op vfs.Op, path string) error {
	if op != vfs.OpSync {
		return nil
	}
	g.mu.Lock()
	armed, entered, release := g.armed, g.entered, g.release
	g.mu.Unlock()
	if armed == "" || !strings.Contains(path, armed) || !strings.HasSuffix(path, ".log") {
		return nil
	}
	select {
	case entered <- struct{}{}:
	default:
	}
	<-release
	return nil
}

// arm makes the fsyncs of paths containing s wait from now on.
func (g *syncGate) arm(s string) {
	g.mu.Lock()
	g.armed, g.entered, g.release = s, make(chan struct{}, 1), make(chan struct{})
	g.mu.Unlock()
}

// open lets every fsync held back, and every later one, through.
func (g *syncGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed != "" {
		g.armed = ""
		close(g.release)
	}
}

// TestDurableHighWatermarkWaitsForFsync: when the flush policy makes an
// append durable before its acknowledgement (topic flush.messages=1,
// topic flush.ms, broker log.flush.interval.messages=1), the high
// watermark does not pass the append until its fsync is done, as Kafka's
// Log.append flushes before the partition increments its high watermark:
// a consumer long-polling the partition, or fetching while the fsync is
// slow, sees nothing that a crash could still lose, and the acks=all and
// acks=1 answers wait too. The fsync is held back by an error-injecting
// filesystem (vfs.NewFaulty).
func TestDurableHighWatermarkWaitsForFsync(t *testing.T) {
	one := "1"
	cases := []struct {
		name   string
		topic  map[string]*string
		broker func(*config.Broker)
		acks   int16
	}{
		{name: "topic flush.messages=1 acks=all", topic: map[string]*string{"flush.messages": &one}, acks: -1},
		{name: "topic flush.messages=1 acks=1", topic: map[string]*string{"flush.messages": &one}, acks: 1},
		{name: "topic flush.ms=1 acks=all", topic: map[string]*string{"flush.ms": &one}, acks: -1},
		{name: "broker log.flush.interval.messages=1 acks=all", broker: func(c *config.Broker) { c.LogFlushIntervalMessages = 1 }, acks: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gate := &syncGate{}
			dir := t.TempDir()
			cfg := testConfig(t, dir)
			if tc.broker != nil {
				tc.broker(cfg)
			}
			s, err := New(cfg, Options{Logger: testLogger(), FS: vfs.NewFaulty(vfs.Default, gate.inject)})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			t.Cleanup(gate.open) // before Close: a held fsync would hold it
			ts := &testServer{Server: s, dir: dir, addr: s.Addr().String()}
			createTopic(t, ts.admin(t), "durable", 1, tc.topic)
			id := topicID(t, ts, "durable")
			p := ts.parts.get("durable", 0)
			time.Sleep(20 * time.Millisecond) // so flush.ms=1 has passed since the log's creation

			gate.arm("durable-0")
			// Three clients: a connection answers its requests in order,
			// so a fetch behind the long poll would wait for it.
			prod, cons, peek := ts.client(t), ts.client(t), ts.client(t)
			type produced struct {
				resp *kmsg.ProduceResponse
				err  error
			}
			produceDone := make(chan produced, 1)
			go func() {
				req := kmsg.NewPtrProduceRequest()
				req.Acks = tc.acks
				req.TimeoutMillis = 30000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic, rt.TopicID = "durable", id
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = benchBatch(t, 3, 100)
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(testContext(t), prod)
				produceDone <- produced{resp, err}
			}()
			select {
			case <-gate.entered:
			case <-time.After(20 * time.Second):
				t.Fatal("the produce never fsynced")
			}
			// A consumer's long poll, started while the fsync runs.
			polled := make(chan *kmsg.FetchResponse, 1)
			go func() {
				req := fetchReq("durable", id, []int64{0}, 0, -1)
				req.MaxWaitMillis, req.MinBytes = 20000, 1
				resp, err := req.RequestWith(testContext(t), cons)
				if err != nil {
					t.Error(err)
				}
				polled <- resp
			}()
			time.Sleep(300 * time.Millisecond)
			if leo := p.Log.LogEndOffset(); leo != 3 {
				t.Fatalf("log end offset %d while the fsync is held, want the 3 records appended", leo)
			}
			if hw := p.HighWatermark(); hw != 0 {
				t.Errorf("high watermark %d before the fsync completed, want 0", hw)
			}
			select {
			case r := <-produceDone:
				t.Errorf("produce answered before its fsync (err %v)", r.err)
				produceDone <- r
			case r := <-polled:
				fp := r.Topics[0].Partitions[0]
				t.Errorf("long poll answered before the fsync: high watermark %d, %d bytes of records", fp.HighWatermark, len(fp.RecordBatches))
				polled <- r
			default:
			}
			// A fetch that does not wait sees no record either.
			req := fetchReq("durable", id, []int64{0}, 0, -1)
			req.MaxWaitMillis = 0
			fp := doFetch(t, peek, req).Topics[0].Partitions[0]
			if fp.HighWatermark != 0 || len(fp.RecordBatches) != 0 {
				t.Errorf("fetch during the fsync: high watermark %d, %d bytes of records; want 0 and none", fp.HighWatermark, len(fp.RecordBatches))
			}

			gate.open()
			select {
			case r := <-produceDone:
				if r.err != nil {
					t.Fatal(r.err)
				}
				sp := r.resp.Topics[0].Partitions[0]
				if sp.ErrorCode != 0 || sp.BaseOffset != 0 {
					t.Fatalf("produce: %v, base offset %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("produce not answered after the fsync")
			}
			if rp := p.Log.RecoveryPoint(); rp < 3 {
				t.Errorf("recovery point %d after the answer, want 3", rp)
			}
			select {
			case r := <-polled:
				fp := r.Topics[0].Partitions[0]
				if fp.HighWatermark != 3 || len(fp.RecordBatches) == 0 {
					t.Errorf("long poll after the fsync: high watermark %d, %d bytes of records; want 3 and the batch", fp.HighWatermark, len(fp.RecordBatches))
				}
			case <-time.After(20 * time.Second):
				t.Fatal("long poll not answered after the fsync")
			}
		})
	}
}

// TestDurableProduceSyncsOnlyTheLog: with flush.messages=1, each acks=all
// produce of an idempotent client (the end-to-end benchmark's durable
// case) waits for one fsync per partition, its segment's .log, although
// every batch of 5 KiB adds an entry to the .index (index.interval.bytes
// 4 KiB): the active segment's indexes are rebuilt by recovery after an
// unclean shutdown (storage.TestDurableFlushSyncsOnlyTheLog), and the
// produce waited for three fsyncs side by side when they were synced too.
// Every record still reads back, and each answer came after its
// partition's recovery point passed it.
func TestDurableProduceSyncsOnlyTheLog(t *testing.T) {
	var (
		mu    sync.Mutex
		syncs = map[string]int{}
	)
	ts := startServerOpts(t, Options{FS: vfs.NewFaulty(vfs.Default, func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, "durable-") {
			mu.Lock()
			syncs[filepath.Ext(path)]++ // "" for leader-epoch-checkpoint and the directory
			mu.Unlock()
		}
		return nil
	})})
	one := "1"
	createTopic(t, ts.admin(t), "durable", 2, map[string]*string{"flush.messages": &one})
	prod := ts.client(t, kgo.DefaultProduceTopic("durable"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // the batches stay over 4 KiB
	ctx := testContext(t)
	value := func(i int) []byte {
		v := make([]byte, 5<<10)
		copy(v, fmt.Sprintf("record %d", i))
		return v
	}
	produce := func(i int) {
		t.Helper()
		r := &kgo.Record{Partition: int32(i % 2), Value: value(i)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		p := ts.parts.get("durable", r.Partition)
		if rp := p.Log.RecoveryPoint(); rp <= r.Offset {
			t.Fatalf("produce %d answered with offset %d of partition %d while its recovery point was %d", i, r.Offset, r.Partition, rp)
		}
	}
	// The first append of each partition syncs its creation's files too.
	produce(0)
	produce(1)
	mu.Lock()
	clear(syncs)
	mu.Unlock()
	const n = 40
	for i := 2; i < n+2; i++ {
		produce(i)
	}
	mu.Lock()
	logs, idx, tidx := syncs[".log"], syncs[".index"], syncs[".timeindex"]
	mu.Unlock()
	if logs != n {
		t.Errorf("%d .log fsyncs for %d durable produces, want one each", logs, n)
	}
	if idx+tidx != 0 {
		t.Errorf("%d .index and %d .timeindex fsyncs for %d durable produces, want none", idx, tidx, n)
	}
	cons := ts.client(t, kgo.ConsumeTopics("durable"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < n+2 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition != 0 && r.Partition != 1 || len(r.Value) != 5<<10 {
				t.Fatalf("read back a record of %d bytes from partition %d", len(r.Value), r.Partition)
			}
			seen[string(r.Value[:bytes.IndexByte(r.Value, 0)])] = true
		})
	}
	for i := range n + 2 {
		if !seen[fmt.Sprintf("record %d", i)] {
			t.Errorf("record %d not read back", i)
		}
	}
}
