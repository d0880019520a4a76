package compat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lastLog keeps franz-go's last warning or error, the reason a scenario
// gives when the client retried until its deadline.
type lastLog struct {
	mu  sync.Mutex
	msg string
}

func (l *lastLog) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l *lastLog) Log(level kgo.LogLevel, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msg = fmt.Sprint(append([]any{level.String(), msg}, kv...)...)
}

func (l *lastLog) wrap(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.msg == "" {
		return err
	}
	return fmt.Errorf("%w (client log: %s)", err, l.msg)
}

func franzGo() clientImpl {
	s := map[string]scenarioFunc{
		"metadata":             kgoMetadata,
		"topics.admin":         kgoTopicsAdmin,
		"order.key":            kgoOrderKey,
		"group.resume":         kgoGroupResume,
		"group.split":          kgoGroupSplit,
		"producer.idempotent":  kgoIdempotent,
		"txn.read_committed":   kgoTxn,
		"listoffsets.time":     kgoListOffsetsTime,
		"configs.describe":     kgoConfigsDescribe,
		"configs.alter":        kgoConfigsAlter,
		"deleterecords":        kgoDeleteRecords,
		"record.1mib":          kgoBigRecord,
		"bulk.100k":            kgoBulk,
		"edge.unknown_topic":   kgoUnknownTopic,
		"edge.too_large":       kgoTooLarge,
		"edge.offset_past_end": kgoOffsetPastEnd,
		"edge.topic_deleted":   kgoTopicDeleted,
	}
	for id, codec := range map[string]kgo.CompressionCodec{
		"produce.none": kgo.NoCompression(), "produce.gzip": kgo.GzipCompression(), "produce.snappy": kgo.SnappyCompression(),
		"produce.lz4": kgo.Lz4Compression(), "produce.zstd": kgo.ZstdCompression(),
	} {
		s[id] = func(ctx context.Context, e *env) (string, error) { return kgoProduce(ctx, e, id, codec) }
	}
	return clientImpl{name: "franz-go", scenarios: s}
}

func newKgo(addr string, log *lastLog, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.WithLogger(log), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryTimeout(20 * time.Second)}, opts...)...)
}

func kgoMetadata(ctx context.Context, e *env) (string, error) {
	topic := e.topic("metadata")
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	// Producing to a topic that does not exist creates it (auto-create on).
	if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce to auto-created topic: %w", err))
	}
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("metadata: %w", err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != 1 || fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port) != e.addr {
		return "", fmt.Errorf("brokers %+v, want node 1 at %s", md.Brokers, e.addr)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) != 1 || td.Partitions[0].Leader != 1 {
		return "", fmt.Errorf("topic %s: %+v, want one partition led by node 1", topic, td)
	}
	return "", nil
}

// kgoPartitions returns how many partitions metadata lists for topic, or
// the topic's error.
func kgoPartitions(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return 0, err
	}
	td := md.Topics[topic]
	if td.Err != nil {
		return 0, td.Err
	}
	return len(td.Partitions), nil
}

func kgoWantPartitions(ctx context.Context, adm *kadm.Client, topic string, want int) error {
	if n, err := kgoPartitions(ctx, adm, topic); err != nil || n != want {
		return fmt.Errorf("%d partitions, %v; want %d", n, err, want)
	}
	return nil
}

func kgoTopicsAdmin(ctx context.Context, e *env) (string, error) {
	topic := e.topic("topics.admin")
	cl, err := newKgo(e.addr, &lastLog{})
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil || r.Err != nil {
		return "", fmt.Errorf("CreateTopics: %v %v", err, r.Err)
	}
	if err := visible(ctx, "after create", func() error { return kgoWantPartitions(ctx, adm, topic, 3) }); err != nil {
		return "", err
	}
	if r, err := adm.UpdatePartitions(ctx, 5, topic); err != nil || r[topic].Err != nil {
		return "", fmt.Errorf("CreatePartitions: %v %v", err, r[topic].Err)
	}
	if err := visible(ctx, "after CreatePartitions", func() error { return kgoWantPartitions(ctx, adm, topic, 5) }); err != nil {
		return "", err
	}
	if r, err := adm.DeleteTopic(ctx, topic); err != nil || r.Err != nil {
		return "", fmt.Errorf("DeleteTopics: %v %v", err, r.Err)
	}
	err = waitFor(ctx, "topic gone after delete", func() error {
		if _, err := kgoPartitions(ctx, adm, topic); !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("metadata says %v", err)
		}
		return nil
	})
	return "", err
}

func kgoProduce(ctx context.Context, e *env, id string, codec kgo.CompressionCodec) (string, error) {
	topic := e.topic(id)
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < produceCount; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(produceKey(i)), Value: []byte(produceValue(i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	for i := 0; i < produceCount; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return "", log.wrap(fmt.Errorf("consumed %d of %d: %w", i, produceCount, err))
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return "", fmt.Errorf("fetch: %v", errs[0].Err)
		}
		for _, r := range fs.Records() {
			if r.Offset != int64(i) || string(r.Key) != produceKey(i) || string(r.Value) != produceValue(i) ||
				len(r.Headers) != 1 || r.Headers[0].Key != "i" || string(r.Headers[0].Value) != strconv.Itoa(i) {
				return "", fmt.Errorf("record %d: offset %d key %q value %q headers %v", i, r.Offset, r.Key, r.Value, r.Headers)
			}
			i++
		}
	}
	return "", nil
}

func kgoOrderKey(ctx context.Context, e *env) (string, error) {
	topic := e.topic("order.key")
	if err := e.createTopic(ctx, topic, 4, nil); err != nil {
		return "", err
	}
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	seq := map[string]int{}
	var recs []*kgo.Record
	for i := 0; i < orderCount; i++ {
		k := produceKey(i % orderKeys)
		recs = append(recs, &kgo.Record{Key: []byte(k), Value: []byte(strconv.Itoa(seq[k]))})
		seq[k]++
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	got, err := e.consumeAll(ctx, topic)
	if err != nil {
		return "", err
	}
	return "", checkOrder(got)
}

// checkOrder wants every key in one partition with values 0, 1, 2, ...
// in offset order, and all orderCount records.
func checkOrder(recs []*kgo.Record) error {
	part := map[string]int32{}
	next := map[string]int{}
	for _, r := range recs {
		k := string(r.Key)
		if p, ok := part[k]; ok && p != r.Partition {
			return fmt.Errorf("key %s in partitions %d and %d", k, p, r.Partition)
		}
		part[k] = r.Partition
		if string(r.Value) != strconv.Itoa(next[k]) {
			return fmt.Errorf("key %s: value %q at partition %d offset %d, want %d", k, r.Value, r.Partition, r.Offset, next[k])
		}
		next[k]++
	}
	if len(recs) != orderCount || len(part) != orderKeys {
		return fmt.Errorf("read %d records over %d keys, want %d over %d", len(recs), len(part), orderCount, orderKeys)
	}
	return nil
}

func kgoGroupResume(ctx context.Context, e *env) (string, error) {
	topic := e.topic("group.resume")
	if err := e.createTopic(ctx, topic, 2, nil); err != nil {
		return "", err
	}
	const n = 100
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	log := &lastLog{}
	prod, err := newKgo(e.addr, log, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return "", err
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	group := topic + "-group"
	seen := map[string]int{}
	member := func(limit int) (int, error) {
		cl, err := newKgo(e.addr, log, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.SessionTimeout(10*time.Second))
		if err != nil {
			return 0, err
		}
		defer cl.Close() // leaves the group
		read := 0
		for read < limit {
			fs := cl.PollRecords(ctx, limit-read)
			if err := ctx.Err(); err != nil {
				return read, log.wrap(fmt.Errorf("group member read %d of %d: %w", read, limit, err))
			}
			if errs := fs.Errors(); len(errs) > 0 {
				return read, fmt.Errorf("poll: %w", errs[0].Err)
			}
			recs := fs.Records()
			for _, r := range recs {
				seen[string(r.Value)]++
			}
			read += len(recs)
			if err := cl.CommitRecords(ctx, recs...); err != nil {
				return read, fmt.Errorf("commit: %w", err)
			}
		}
		return read, nil
	}
	if _, err := member(n / 2); err != nil {
		return "", fmt.Errorf("first member: %w", err)
	}
	if _, err := member(n - n/2); err != nil {
		return "", fmt.Errorf("second member: %w", err)
	}
	for i := 0; i < n; i++ {
		if seen[strconv.Itoa(i)] != 1 {
			return "", fmt.Errorf("record %d read %d times across the two members", i, seen[strconv.Itoa(i)])
		}
	}
	return "", nil
}

// kgoGroupSplit runs group.split with kgo's default balancer
// (cooperative-sticky over the classic protocol): each member tracks its
// assignment through kgo's assigned, revoked and lost callbacks.
func kgoGroupSplit(ctx context.Context, e *env) (string, error) {
	topic := e.topic("group.split")
	if err := e.createTopic(ctx, topic, splitPartitions, nil); err != nil {
		return "", err
	}
	log := &lastLog{}
	asg := &splitAssign{}
	tally := newSplitTally()
	var members [2]*kgo.Client
	for m := range members {
		track := func(fn func(int, []int32)) func(context.Context, *kgo.Client, map[string][]int32) {
			return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { fn(m, ps[topic]) }
		}
		cl, err := newKgo(e.addr, log, kgo.ConsumerGroup(splitGroup(topic)), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(splitSessionMs*time.Millisecond),
			kgo.OnPartitionsAssigned(track(asg.add)), kgo.OnPartitionsRevoked(track(asg.remove)), kgo.OnPartitionsLost(track(asg.remove)))
		if err != nil {
			return "", err
		}
		defer cl.Close() // leaves the group, after the pollers stopped
		members[m] = cl
	}
	// Both members poll from the start: a kgo group member joins and
	// heartbeats on its own, but rebalances complete around its polls.
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	errc := make(chan error, 2)
	for m, cl := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				fs := cl.PollRecords(pctx, 50)
				recs := fs.Records()
				for _, r := range recs {
					tally.record(m, r.Partition, string(r.Value))
				}
				// Commit with ctx, not pctx: records processed before the
				// stop are committed before the member leaves.
				if len(recs) > 0 {
					if err := cl.CommitRecords(ctx, recs...); err != nil {
						errc <- log.wrap(fmt.Errorf("member %d commit: %w", m, err))
						return
					}
					tally.commit(len(recs))
				}
				for _, fe := range fs.Errors() {
					if pctx.Err() == nil {
						errc <- log.wrap(fmt.Errorf("member %d poll partition %d: %w", m, fe.Partition, fe.Err))
						return
					}
				}
			}
		}()
	}
	sets, changes, err := asg.waitSplit(ctx)
	if err != nil {
		return "", log.wrap(err)
	}
	prod, err := newKgo(e.addr, log, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return "", err
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := 0; i < splitCount; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % splitPartitions), Value: []byte(strconv.Itoa(i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	if err := tally.waitCommitted(ctx, errc); err != nil {
		return "", log.wrap(err)
	}
	if err := asg.stillSplit(sets, changes); err != nil {
		return "", err
	}
	stop()
	wg.Wait()
	select {
	case err := <-errc:
		return "", err
	default:
	}
	return tally.check(sets)
}

func kgoIdempotent(ctx context.Context, e *env) (string, error) {
	topic := e.topic("producer.idempotent")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	// franz-go is idempotent by default; it says so in its log when the
	// broker cannot give it a producer id, and the post-check sees it.
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < produceCount; i++ {
		recs = append(recs, kgo.StringRecord(strconv.Itoa(i)))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	got, err := e.consumeAll(ctx, topic)
	if err != nil {
		return "", err
	}
	for i, r := range got {
		if string(r.Value) != strconv.Itoa(i) {
			return "", fmt.Errorf("offset %d holds %q", i, r.Value)
		}
	}
	if len(got) != produceCount {
		return "", fmt.Errorf("read %d records, want %d", len(got), produceCount)
	}
	return "", nil
}

func kgoTxn(ctx context.Context, e *env) (string, error) {
	topic := e.topic("txn.read_committed")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-txn"),
		kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	for t, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort, kgo.TryCommit} {
		if err := cl.BeginTransaction(); err != nil {
			return "", log.wrap(fmt.Errorf("begin transaction %d: %w", t, err))
		}
		for i := 0; i < 10; i++ {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("t%d-%d", t, i))).FirstErr(); err != nil {
				return "", log.wrap(fmt.Errorf("produce in transaction %d: %w", t, err))
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			return "", log.wrap(fmt.Errorf("end transaction %d: %w", t, err))
		}
	}
	got, err := readCommitted(ctx, e.addr, topic, 20)
	if err != nil {
		return "", err
	}
	return "", checkCommitted(values(got))
}

// readCommitted reads topic with isolation read_committed until it has
// want records, then a second more to catch any record that should not
// be there. (Commit markers take offsets that no record shows, so the
// high watermark cannot tell when the read is complete.)
func readCommitted(ctx context.Context, addr, topic string, want int) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	var extra context.Context
	for {
		pctx := ctx
		if len(out) >= want {
			if extra == nil {
				var cancel context.CancelFunc
				extra, cancel = context.WithTimeout(ctx, time.Second)
				defer cancel()
			}
			pctx = extra
		}
		fs := cl.PollFetches(pctx)
		if pctx.Err() != nil {
			if len(out) >= want {
				return out, nil
			}
			return out, fmt.Errorf("read_committed read %d of %d records: %w", len(out), want, pctx.Err())
		}
		for _, fe := range fs.Errors() {
			return out, fmt.Errorf("read_committed fetch: %w", fe.Err)
		}
		out = append(out, fs.Records()...)
	}
}

func values(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Value))
	}
	return out
}

// checkCommitted wants the records of transactions 0 and 2 only.
func checkCommitted(got []string) error {
	var want []string
	for _, t := range []int{0, 2} {
		for i := 0; i < 10; i++ {
			want = append(want, fmt.Sprintf("t%d-%d", t, i))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("read_committed read %v, want %v", got, want)
	}
	return nil
}

// timeBase is the first record's timestamp in listoffsets.time: record i
// is stamped timeBase + i seconds.
var timeBase = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

func kgoListOffsetsTime(ctx context.Context, e *env) (string, error) {
	topic := e.topic("listoffsets.time")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: time.UnixMilli(timeBase + int64(i)*1000)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	adm := kadm.NewClient(cl)
	check := func(what string, l kadm.ListedOffsets, err error, want int64) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		o, ok := l.Lookup(topic, 0)
		if !ok || o.Err != nil || o.Offset != want {
			return fmt.Errorf("%s: %+v, want offset %d", what, o, want)
		}
		// A lookup by time answers the timestamp of the record found.
		if strings.HasPrefix(what, "offset") && o.Timestamp != timeBase+want*1000 {
			return fmt.Errorf("%s: timestamp %d, want the record's %d", what, o.Timestamp, timeBase+want*1000)
		}
		return nil
	}
	l, err := adm.ListOffsetsAfterMilli(ctx, timeBase+3500, topic)
	if err := check("offset after timeBase+3.5s", l, err, 4); err != nil {
		return "", err
	}
	l, err = adm.ListOffsetsAfterMilli(ctx, timeBase+3000, topic)
	if err := check("offset at timeBase+3s", l, err, 3); err != nil {
		return "", err
	}
	l, err = adm.ListStartOffsets(ctx, topic)
	if err := check("earliest", l, err, 0); err != nil {
		return "", err
	}
	l, err = adm.ListEndOffsets(ctx, topic)
	return "", check("latest", l, err, 10)
}

func kgoConfigsDescribe(ctx context.Context, e *env) (string, error) {
	topic := e.topic("configs.describe")
	cl, err := newKgo(e.addr, &lastLog{})
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": strp("123456789")}, topic); err != nil || r.Err != nil {
		return "", fmt.Errorf("CreateTopics: %v %v", err, r.Err)
	}
	return "", kgoWantConfigs(ctx, adm, topic, map[string]string{"retention.ms": "123456789", "cleanup.policy": "delete"})
}

// kgoWantConfigs waits until DescribeConfigs shows want (see visible).
func kgoWantConfigs(ctx context.Context, adm *kadm.Client, topic string, want map[string]string) error {
	return visible(ctx, "DescribeConfigs "+topic, func() error { return kgoHasConfigs(ctx, adm, topic, want) })
}

func kgoHasConfigs(ctx context.Context, adm *kadm.Client, topic string, want map[string]string) error {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("DescribeConfigs: %w", err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return fmt.Errorf("DescribeConfigs %s: %v %v", topic, err, rc.Err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("DescribeConfigs %s: %s=%q, want %q", topic, k, got[k], v)
		}
	}
	return nil
}

func kgoConfigsAlter(ctx context.Context, e *env) (string, error) {
	topic := e.topic("configs.alter")
	cl, err := newKgo(e.addr, &lastLog{})
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || r.Err != nil {
		return "", fmt.Errorf("CreateTopics: %v %v", err, r.Err)
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("987654321")}}, topic)
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		return "", fmt.Errorf("IncrementalAlterConfigs: %w", err)
	}
	return "", kgoWantConfigs(ctx, adm, topic, map[string]string{"retention.ms": "987654321"})
}

func kgoDeleteRecords(ctx context.Context, e *env) (string, error) {
	topic := e.topic("deleterecords")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, kgo.StringRecord(strconv.Itoa(i)))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	adm := kadm.NewClient(cl)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4})
	rs, err := adm.DeleteRecords(ctx, os)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		return "", fmt.Errorf("DeleteRecords: %w", err)
	}
	l, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("ListOffsets earliest: %w", err)
	}
	if o, _ := l.Lookup(topic, 0); o.Offset != 4 {
		return "", fmt.Errorf("log start offset %d after DeleteRecords to 4", o.Offset)
	}
	got, err := e.consumeAll(ctx, topic)
	if err != nil {
		return "", err
	}
	if len(got) != 6 || got[0].Offset != 4 {
		return "", fmt.Errorf("read %d records from the beginning, want 6 from offset 4", len(got))
	}
	return "", nil
}

func kgoBigRecord(ctx context.Context, e *env) (string, error) {
	topic := e.topic("record.1mib")
	if err := e.createTopic(ctx, topic, 1, map[string]*string{"max.message.bytes": strp(strconv.Itoa(bigTopicMax))}); err != nil {
		return "", err
	}
	big, want := bigValue()
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(bigTopicMax))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("big"), Value: big}).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce 1 MiB: %w", err))
	}
	got, err := e.consumeAll(ctx, topic)
	if err != nil {
		return "", err
	}
	if len(got) != 1 || sha(got[0].Value) != want {
		return "", fmt.Errorf("read %d records; want one with sha256 %s", len(got), want)
	}
	return "", nil
}

func kgoBulk(ctx context.Context, e *env) (string, error) {
	topic := e.topic("bulk.100k")
	if err := e.createTopic(ctx, topic, 3, nil); err != nil {
		return "", err
	}
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := 0; i < bulkCount; i++ {
		wg.Add(1)
		cl.Produce(ctx, kgo.StringRecord(bulkValue(i)), func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", first))
	}
	got, err := e.consumeAll(ctx, topic)
	if err != nil {
		return "", err
	}
	var vs [][]byte
	for _, r := range got {
		vs = append(vs, r.Value)
	}
	if len(vs) != bulkCount || bulkSum(vs) != wantBulkSum() {
		return "", fmt.Errorf("read %d records with checksum %d, want %d with %d", len(vs), bulkSum(vs), bulkCount, wantBulkSum())
	}
	return fmt.Sprintf("checksum %d", wantBulkSum()), nil
}

func kgoUnknownTopic(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.unknown_topic")
	log := &lastLog{}
	// The client asks for auto-creation; the broker has it off.
	cl, err := newKgo(e.strict, log, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic), kgo.UnknownTopicRetries(3))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = cl.ProduceSync(pctx, kgo.StringRecord("v")).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return "", log.wrap(fmt.Errorf("produce to unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err))
	}
	return "UNKNOWN_TOPIC_OR_PARTITION after 3 metadata retries", nil
}

func kgoTooLarge(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.too_large")
	if err := e.createTopic(ctx, topic, 1, map[string]*string{"max.message.bytes": strp(strconv.Itoa(smallTopicMax))}); err != nil {
		return "", err
	}
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	big, _ := bigValue()
	err = cl.ProduceSync(ctx, kgo.SliceRecord(big[:tooLargeValue])).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		return "", log.wrap(fmt.Errorf("produce %d bytes to a topic with max.message.bytes=%d: %v, want MESSAGE_TOO_LARGE", tooLargeValue, smallTopicMax, err))
	}
	return "", nil
}

func kgoOffsetPastEnd(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.offset_past_end")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	log := &lastLog{}
	prod, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic))
	if err != nil {
		return "", err
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, kgo.StringRecord(strconv.Itoa(i)))
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	cl, err := newKgo(e.addr, log, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(100)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < 10 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return "", log.wrap(fmt.Errorf("read %d records after reset: %w", len(got), err))
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return "", fmt.Errorf("poll: %w", errs[0].Err)
		}
		got = append(got, fs.Records()...)
	}
	if got[0].Offset != 0 {
		return "", fmt.Errorf("after reset to earliest the first record is at %d", got[0].Offset)
	}
	return "OFFSET_OUT_OF_RANGE at 100, reset to earliest (0)", nil
}

func kgoTopicDeleted(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.topic_deleted")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	log := &lastLog{}
	cl, err := newKgo(e.addr, log, kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return "", err
	}
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, kgo.StringRecord(strconv.Itoa(i)))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		cl.Close()
		return "", log.wrap(fmt.Errorf("produce: %w", err))
	}
	for n := 0; n < 10; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			cl.Close()
			return "", log.wrap(fmt.Errorf("read %d of 10 before the delete: %w", n, err))
		}
		n += len(fs.Records())
	}
	if r, err := e.adm.DeleteTopic(ctx, topic); err != nil || r.Err != nil {
		cl.Close()
		return "", fmt.Errorf("DeleteTopics: %v %v", err, r.Err)
	}
	// Poll a while: franz-go reports the missing topic as a fetch error
	// once its metadata says so, or keeps quiet; either is its design.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var seen error
	for pctx.Err() == nil && seen == nil {
		fs := cl.PollFetches(pctx)
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				seen = fe.Err
			}
		}
		if len(fs.Records()) > 0 {
			cl.Close()
			return "", fmt.Errorf("read %d records after the topic was deleted", len(fs.Records()))
		}
	}
	closed := make(chan struct{})
	go func() { cl.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		return "", errors.New("the consumer did not close within 10s after the topic was deleted")
	}
	if seen != nil {
		return "consumer reported: " + seen.Error(), nil
	}
	return "consumer stayed silent (no records, no error) and closed", nil
}
