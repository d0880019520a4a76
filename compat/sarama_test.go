package compat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaClient runs the scenarios through IBM/sarama as its users do:
// ClusterAdmin, SyncProducer/AsyncProducer, Consumer and ConsumerGroup.
func saramaClient() clientImpl {
	s := map[string]scenarioFunc{
		"metadata":             saramaMetadata,
		"topics.admin":         saramaTopicsAdmin,
		"order.key":            saramaOrderKey,
		"group.resume":         saramaGroupResume,
		"group.split":          saramaGroupSplit,
		"producer.idempotent":  saramaIdempotent,
		"txn.read_committed":   saramaTxn,
		"listoffsets.time":     saramaListOffsetsTime,
		"configs.describe":     saramaConfigsDescribe,
		"configs.alter":        saramaConfigsAlter,
		"deleterecords":        saramaDeleteRecords,
		"record.1mib":          saramaBigRecord,
		"bulk.100k":            saramaBulk,
		"edge.unknown_topic":   saramaUnknownTopic,
		"edge.too_large":       saramaTooLarge,
		"edge.offset_past_end": saramaOffsetPastEnd,
		"edge.topic_deleted":   saramaTopicDeleted,
	}
	for id, codec := range map[string]sarama.CompressionCodec{
		"produce.none": sarama.CompressionNone, "produce.gzip": sarama.CompressionGZIP, "produce.snappy": sarama.CompressionSnappy,
		"produce.lz4": sarama.CompressionLZ4, "produce.zstd": sarama.CompressionZSTD,
	} {
		s[id] = func(ctx context.Context, e *env) (string, error) { return saramaProduce(ctx, e, id, codec) }
	}
	return clientImpl{name: "sarama", scenarios: s}
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "gregor-compat"
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Admin.Timeout = 10 * time.Second
	return cfg
}

func saramaAdmin(e *env, cfg *sarama.Config) (sarama.ClusterAdmin, error) {
	if cfg == nil {
		cfg = saramaConfig()
	}
	return sarama.NewClusterAdmin([]string{e.addr}, cfg)
}

// saramaSend writes msgs with a SyncProducer.
func saramaSend(addr string, cfg *sarama.Config, msgs []*sarama.ProducerMessage) error {
	prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		return fmt.Errorf("new producer: %w", err)
	}
	defer prod.Close()
	if err := prod.SendMessages(msgs); err != nil {
		var pe sarama.ProducerErrors
		if errors.As(err, &pe) && len(pe) > 0 {
			return fmt.Errorf("send: %d failed, first: %w", len(pe), pe[0].Err)
		}
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// saramaRead reads n messages of one partition from offset with a
// partition consumer.
func saramaRead(ctx context.Context, addr string, cfg *sarama.Config, topic string, part int32, offset int64, n int) ([]*sarama.ConsumerMessage, error) {
	cons, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		return nil, fmt.Errorf("new consumer: %w", err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, part, offset)
	if err != nil {
		return nil, fmt.Errorf("consume partition %d: %w", part, err)
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
		case err := <-pc.Errors():
			return out, fmt.Errorf("partition %d: %w", part, err.Err)
		case <-ctx.Done():
			return out, fmt.Errorf("partition %d: read %d of %d: %w", part, len(out), n, ctx.Err())
		}
	}
	return out, nil
}

func saramaMetadata(ctx context.Context, e *env) (string, error) {
	topic := e.topic("metadata")
	cfg := saramaConfig()
	// Producing to a topic that does not exist creates it (auto-create on).
	if err := saramaSend(e.addr, cfg, []*sarama.ProducerMessage{{Topic: topic, Value: sarama.StringEncoder("v")}}); err != nil {
		return "", err
	}
	cl, err := sarama.NewClient([]string{e.addr}, cfg)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	bs := cl.Brokers()
	if len(bs) != 1 || bs[0].ID() != 1 || bs[0].Addr() != e.addr {
		return "", fmt.Errorf("brokers %v, want node 1 at %s", bs, e.addr)
	}
	parts, err := cl.Partitions(topic)
	if err != nil || len(parts) != 1 {
		return "", fmt.Errorf("partitions of %s: %v %v, want [0]", topic, parts, err)
	}
	leader, err := cl.Leader(topic, 0)
	if err != nil || leader.ID() != 1 {
		return "", fmt.Errorf("leader of %s/0: %v", topic, err)
	}
	return "", nil
}

func saramaTopicsAdmin(ctx context.Context, e *env) (string, error) {
	topic := e.topic("topics.admin")
	adm, err := saramaAdmin(e, nil)
	if err != nil {
		return "", err
	}
	defer adm.Close()
	count := func() (int, error) {
		md, err := adm.DescribeTopics([]string{topic})
		if err != nil {
			return 0, err
		}
		if len(md) != 1 {
			return 0, fmt.Errorf("%d topics described", len(md))
		}
		if md[0].Err != sarama.ErrNoError {
			return 0, md[0].Err
		}
		return len(md[0].Partitions), nil
	}
	wantCount := func(want int) error {
		if n, err := count(); err != nil || n != want {
			return fmt.Errorf("%d partitions, %v; want %d", n, err, want)
		}
		return nil
	}
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		return "", fmt.Errorf("CreateTopics: %w", err)
	}
	if err := visible(ctx, "after create", func() error { return wantCount(3) }); err != nil {
		return "", err
	}
	if err := adm.CreatePartitions(topic, 5, nil, false); err != nil {
		return "", fmt.Errorf("CreatePartitions: %w", err)
	}
	if err := visible(ctx, "after CreatePartitions", func() error { return wantCount(5) }); err != nil {
		return "", err
	}
	if err := adm.DeleteTopic(topic); err != nil {
		return "", fmt.Errorf("DeleteTopics: %w", err)
	}
	return "", waitFor(ctx, "topic gone after delete", func() error {
		if _, err := count(); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return fmt.Errorf("describe says %v", err)
		}
		return nil
	})
}

func saramaProduce(ctx context.Context, e *env, id string, codec sarama.CompressionCodec) (string, error) {
	topic := e.topic(id)
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	cfg.Producer.Compression = codec
	cfg.Producer.Flush.Messages = 100
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	var msgs []*sarama.ProducerMessage
	for i := 0; i < produceCount; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(produceKey(i)),
			Value: sarama.StringEncoder(produceValue(i)), Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(strconv.Itoa(i))}}})
	}
	if err := saramaSend(e.addr, cfg, msgs); err != nil {
		return "", err
	}
	got, err := saramaRead(ctx, e.addr, cfg, topic, 0, sarama.OffsetOldest, produceCount)
	if err != nil {
		return "", err
	}
	for i, m := range got {
		if m.Offset != int64(i) || string(m.Key) != produceKey(i) || string(m.Value) != produceValue(i) ||
			len(m.Headers) != 1 || string(m.Headers[0].Key) != "i" || string(m.Headers[0].Value) != strconv.Itoa(i) {
			return "", fmt.Errorf("message %d: offset %d key %q value %q", i, m.Offset, m.Key, m.Value)
		}
	}
	return "", nil
}

func saramaOrderKey(ctx context.Context, e *env) (string, error) {
	topic := e.topic("order.key")
	if err := e.createTopic(ctx, topic, 4, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	seq := map[string]int{}
	var msgs []*sarama.ProducerMessage
	for i := 0; i < orderCount; i++ {
		k := produceKey(i % orderKeys)
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(strconv.Itoa(seq[k]))})
		seq[k]++
	}
	if err := saramaSend(e.addr, cfg, msgs); err != nil {
		return "", err
	}
	got, err := e.consumeAll(ctx, topic)
	if err != nil {
		return "", err
	}
	return "", checkOrder(got)
}

// groupHandler reads up to limit messages of a group session, marking
// and committing each.
type groupHandler struct {
	limit int
	seen  map[string]int
	read  int
	done  chan struct{}
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		if h.read >= h.limit {
			return nil
		}
		h.seen[string(m.Value)]++
		h.read++
		s.MarkMessage(m, "")
		s.Commit()
		if h.read == h.limit {
			close(h.done)
			return nil
		}
	}
	return nil
}

func saramaGroupResume(ctx context.Context, e *env) (string, error) {
	topic := e.topic("group.resume")
	// One partition: sarama runs a claim per partition concurrently, and
	// one claim keeps the stop-at-half exact.
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	const n = 100
	cfg := saramaConfig()
	var msgs []*sarama.ProducerMessage
	for i := 0; i < n; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(strconv.Itoa(i))})
	}
	if err := saramaSend(e.addr, cfg, msgs); err != nil {
		return "", err
	}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	seen := map[string]int{}
	member := func(limit int) error {
		g, err := sarama.NewConsumerGroup([]string{e.addr}, topic+"-group", cfg)
		if err != nil {
			return fmt.Errorf("new group: %w", err)
		}
		defer g.Close() // leaves the group
		h := &groupHandler{limit: limit, seen: seen, done: make(chan struct{})}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			for cctx.Err() == nil {
				if err := g.Consume(cctx, []string{topic}, h); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		select {
		case <-h.done:
			cancel()
			<-errc
			return nil
		case err := <-errc:
			return fmt.Errorf("consume: %w (read %d)", err, h.read)
		case err := <-g.Errors():
			return fmt.Errorf("group: %w (read %d)", err, h.read)
		case <-ctx.Done():
			return fmt.Errorf("read %d of %d: %w", h.read, limit, ctx.Err())
		}
	}
	if err := member(n / 2); err != nil {
		return "", fmt.Errorf("first member: %w", err)
	}
	if err := member(n - n/2); err != nil {
		return "", fmt.Errorf("second member: %w", err)
	}
	for i := 0; i < n; i++ {
		if seen[strconv.Itoa(i)] != 1 {
			return "", fmt.Errorf("record %d read %d times across the two members", i, seen[strconv.Itoa(i)])
		}
	}
	return "", nil
}

// splitHandler is one group.split member: Setup and Cleanup bracket a
// generation with its claims; each message is marked and committed
// after it is processed.
type splitHandler struct {
	m     int
	topic string
	asg   *splitAssign
	tally *splitTally
}

func (h *splitHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.asg.set(h.m, s.Claims()[h.topic])
	return nil
}

func (h *splitHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.asg.set(h.m, nil)
	return nil
}

func (h *splitHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.tally.record(h.m, m.Partition, string(m.Value))
		s.MarkMessage(m, "")
		s.Commit() // synchronous without auto-commit; failures go to Errors()
		h.tally.commit(1)
	}
	return nil
}

// saramaGroupSplit runs group.split with two sarama ConsumerGroups and
// sarama's default range strategy.
func saramaGroupSplit(ctx context.Context, e *env) (string, error) {
	topic := e.topic("group.split")
	if err := e.createTopic(ctx, topic, splitPartitions, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = splitSessionMs * time.Millisecond
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	asg := &splitAssign{}
	tally := newSplitTally()
	cctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	var groups []sarama.ConsumerGroup
	defer func() {
		stop()
		wg.Wait()
		for _, g := range groups {
			g.Close() // leaves the group, once Consume has returned
		}
	}()
	for m := 0; m < 2; m++ {
		g, err := sarama.NewConsumerGroup([]string{e.addr}, splitGroup(topic), cfg)
		if err != nil {
			return "", fmt.Errorf("member %d: new group: %w", m, err)
		}
		groups = append(groups, g)
		h := &splitHandler{m: m, topic: topic, asg: asg, tally: tally}
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Consume returns at each rebalance; the member joins again.
			for cctx.Err() == nil {
				if err := g.Consume(cctx, []string{topic}, h); err != nil && cctx.Err() == nil {
					errc <- fmt.Errorf("member %d consume: %w", m, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			select {
			case err := <-g.Errors():
				if cctx.Err() == nil {
					errc <- fmt.Errorf("member %d: %w", m, err)
				}
			case <-cctx.Done():
			}
		}()
	}
	sets, changes, err := asg.waitSplit(ctx)
	if err != nil {
		return "", err
	}
	var msgs []*sarama.ProducerMessage
	for i := 0; i < splitCount; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(i % splitPartitions), Value: sarama.StringEncoder(strconv.Itoa(i))})
	}
	pcfg := saramaConfig()
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	if err := saramaSend(e.addr, pcfg, msgs); err != nil {
		return "", err
	}
	if err := tally.waitCommitted(ctx, errc); err != nil {
		return "", err
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

func saramaIdempotent(ctx context.Context, e *env) (string, error) {
	topic := e.topic("producer.idempotent")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 5
	var msgs []*sarama.ProducerMessage
	for i := 0; i < produceCount; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(strconv.Itoa(i))})
	}
	if err := saramaSend(e.addr, cfg, msgs); err != nil {
		return "", err
	}
	got, err := saramaRead(ctx, e.addr, saramaConfig(), topic, 0, sarama.OffsetOldest, produceCount)
	if err != nil {
		return "", err
	}
	for i, m := range got {
		if string(m.Value) != strconv.Itoa(i) {
			return "", fmt.Errorf("offset %d holds %q", i, m.Value)
		}
	}
	return "", nil
}

func saramaTxn(ctx context.Context, e *env) (string, error) {
	topic := e.topic("txn.read_committed")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = topic + "-txn"
	cfg.Producer.Transaction.Timeout = 30 * time.Second
	cfg.Producer.Transaction.Retry.Max = 10
	cfg.Net.MaxOpenRequests = 1
	prod, err := sarama.NewSyncProducer([]string{e.addr}, cfg)
	if err != nil {
		return "", fmt.Errorf("new transactional producer: %w", err)
	}
	defer prod.Close()
	for t, commit := range []bool{true, false, true} {
		if err := prod.BeginTxn(); err != nil {
			return "", fmt.Errorf("begin transaction %d: %w", t, err)
		}
		for i := 0; i < 10; i++ {
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("t%d-%d", t, i))}); err != nil {
				return "", fmt.Errorf("produce in transaction %d: %w", t, err)
			}
		}
		if commit {
			err = prod.CommitTxn()
		} else {
			err = prod.AbortTxn()
		}
		if err != nil {
			return "", fmt.Errorf("end transaction %d: %w", t, err)
		}
	}
	rc := saramaConfig()
	rc.Consumer.IsolationLevel = sarama.ReadCommitted
	// 20 committed records out of the log's 30 records and 3 markers. The
	// read stops at 20 records or after 3 s of silence, not at an end
	// offset read now: Kafka writes a commit's marker after EndTxn has
	// answered, so the last transaction may become readable a moment
	// later.
	cons, err := sarama.NewConsumer([]string{e.addr}, rc)
	if err != nil {
		return "", err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return "", err
	}
	defer pc.Close()
	var got []string
	for silent := false; len(got) < 20 && !silent && ctx.Err() == nil; {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			return "", fmt.Errorf("read_committed consume: %w", err.Err)
		case <-time.After(3 * time.Second):
			silent = true // nothing more arrives
		}
	}
	return "", checkCommitted(got)
}

func saramaListOffsetsTime(ctx context.Context, e *env) (string, error) {
	topic := e.topic("listoffsets.time")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	var msgs []*sarama.ProducerMessage
	for i := 0; i < 10; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(strconv.Itoa(i)),
			Timestamp: time.UnixMilli(timeBase + int64(i)*1000)})
	}
	if err := saramaSend(e.addr, cfg, msgs); err != nil {
		return "", err
	}
	cl, err := sarama.NewClient([]string{e.addr}, cfg)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	for _, c := range []struct {
		what string
		at   int64
		want int64
	}{{"after timeBase+3.5s", timeBase + 3500, 4}, {"at timeBase+3s", timeBase + 3000, 3},
		{"earliest", sarama.OffsetOldest, 0}, {"latest", sarama.OffsetNewest, 10}} {
		o, err := cl.GetOffset(topic, 0, c.at)
		if err != nil || o != c.want {
			return "", fmt.Errorf("ListOffsets %s: %d %v, want %d", c.what, o, err, c.want)
		}
	}
	return "", nil
}

// saramaWantConfigs waits until DescribeConfigs shows want (see visible).
func saramaWantConfigs(ctx context.Context, adm sarama.ClusterAdmin, topic string, want map[string]string) error {
	return visible(ctx, "DescribeConfigs "+topic, func() error { return saramaHasConfigs(adm, topic, want) })
}

func saramaHasConfigs(adm sarama.ClusterAdmin, topic string, want map[string]string) error {
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return fmt.Errorf("DescribeConfigs: %w", err)
	}
	got := map[string]string{}
	for _, c := range entries {
		got[c.Name] = c.Value
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("DescribeConfigs %s: %s=%q, want %q", topic, k, got[k], v)
		}
	}
	return nil
}

func saramaConfigsDescribe(ctx context.Context, e *env) (string, error) {
	topic := e.topic("configs.describe")
	adm, err := saramaAdmin(e, nil)
	if err != nil {
		return "", err
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": strp("123456789")}}, false); err != nil {
		return "", fmt.Errorf("CreateTopics: %w", err)
	}
	return "", saramaWantConfigs(ctx, adm, topic, map[string]string{"retention.ms": "123456789", "cleanup.policy": "delete"})
}

func saramaConfigsAlter(ctx context.Context, e *env) (string, error) {
	topic := e.topic("configs.alter")
	adm, err := saramaAdmin(e, nil)
	if err != nil {
		return "", err
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		return "", fmt.Errorf("CreateTopics: %w", err)
	}
	err = adm.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("987654321")}}, false)
	if err != nil {
		return "", fmt.Errorf("IncrementalAlterConfigs: %w", err)
	}
	return "", saramaWantConfigs(ctx, adm, topic, map[string]string{"retention.ms": "987654321"})
}

func saramaDeleteRecords(ctx context.Context, e *env) (string, error) {
	topic := e.topic("deleterecords")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	var msgs []*sarama.ProducerMessage
	for i := 0; i < 10; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(strconv.Itoa(i))})
	}
	if err := saramaSend(e.addr, cfg, msgs); err != nil {
		return "", err
	}
	adm, err := saramaAdmin(e, cfg)
	if err != nil {
		return "", err
	}
	defer adm.Close()
	if err := adm.DeleteRecords(topic, map[int32]int64{0: 4}); err != nil {
		return "", fmt.Errorf("DeleteRecords: %w", err)
	}
	got, err := saramaRead(ctx, e.addr, cfg, topic, 0, sarama.OffsetOldest, 6)
	if err != nil {
		return "", err
	}
	if got[0].Offset != 4 {
		return "", fmt.Errorf("first record from the beginning at %d, want 4", got[0].Offset)
	}
	return "", nil
}

func saramaBigRecord(ctx context.Context, e *env) (string, error) {
	topic := e.topic("record.1mib")
	if err := e.createTopic(ctx, topic, 1, map[string]*string{"max.message.bytes": strp(strconv.Itoa(bigTopicMax))}); err != nil {
		return "", err
	}
	big, want := bigValue()
	cfg := saramaConfig()
	cfg.Producer.MaxMessageBytes = bigTopicMax
	if err := saramaSend(e.addr, cfg, []*sarama.ProducerMessage{{Topic: topic, Key: sarama.StringEncoder("big"), Value: sarama.ByteEncoder(big)}}); err != nil {
		return "", err
	}
	got, err := saramaRead(ctx, e.addr, cfg, topic, 0, sarama.OffsetOldest, 1)
	if err != nil {
		return "", err
	}
	if sha(got[0].Value) != want {
		return "", fmt.Errorf("read back %d bytes with another hash", len(got[0].Value))
	}
	return "", nil
}

func saramaBulk(ctx context.Context, e *env) (string, error) {
	topic := e.topic("bulk.100k")
	if err := e.createTopic(ctx, topic, 3, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Messages = 1000
	prod, err := sarama.NewAsyncProducer([]string{e.addr}, cfg)
	if err != nil {
		return "", err
	}
	go func() {
		for i := 0; i < bulkCount; i++ {
			prod.Input() <- &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(bulkValue(i))}
		}
	}()
	for acked := 0; acked < bulkCount; {
		select {
		case <-prod.Successes():
			acked++
		case pe := <-prod.Errors():
			prod.AsyncClose()
			return "", fmt.Errorf("produce: %w", pe.Err)
		case <-ctx.Done():
			prod.AsyncClose()
			return "", fmt.Errorf("produce: %d of %d acknowledged: %w", acked, bulkCount, ctx.Err())
		}
	}
	prod.Close()
	ends, err := e.endOffsets(ctx, topic)
	if err != nil {
		return "", err
	}
	var vs [][]byte
	for p := int32(0); p < 3; p++ {
		got, err := saramaRead(ctx, e.addr, cfg, topic, p, sarama.OffsetOldest, int(ends[p]))
		if err != nil {
			return "", err
		}
		for _, m := range got {
			vs = append(vs, m.Value)
		}
	}
	if len(vs) != bulkCount || bulkSum(vs) != wantBulkSum() {
		return "", fmt.Errorf("read %d records with checksum %d, want %d with %d", len(vs), bulkSum(vs), bulkCount, wantBulkSum())
	}
	return fmt.Sprintf("checksum %d", wantBulkSum()), nil
}

func saramaUnknownTopic(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.unknown_topic")
	cfg := saramaConfig()
	cfg.Metadata.AllowAutoTopicCreation = true // the broker has it off
	err := saramaSend(e.strict, cfg, []*sarama.ProducerMessage{{Topic: topic, Value: sarama.StringEncoder("v")}})
	if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return "", fmt.Errorf("produce to unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	return "UNKNOWN_TOPIC_OR_PARTITION after its metadata retries", nil
}

func saramaTooLarge(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.too_large")
	if err := e.createTopic(ctx, topic, 1, map[string]*string{"max.message.bytes": strp(strconv.Itoa(smallTopicMax))}); err != nil {
		return "", err
	}
	big, _ := bigValue()
	err := saramaSend(e.addr, saramaConfig(), []*sarama.ProducerMessage{{Topic: topic, Value: sarama.ByteEncoder(big[:tooLargeValue])}})
	if !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
		return "", fmt.Errorf("produce %d bytes to a topic with max.message.bytes=%d: %v, want MESSAGE_TOO_LARGE", tooLargeValue, smallTopicMax, err)
	}
	return "", nil
}

func saramaOffsetPastEnd(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.offset_past_end")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	var msgs []*sarama.ProducerMessage
	for i := 0; i < 10; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(strconv.Itoa(i))})
	}
	if err := saramaSend(e.addr, cfg, msgs); err != nil {
		return "", err
	}
	// A partition consumer has no reset policy: sarama checks the offset
	// against ListOffsets and refuses it.
	_, err := saramaRead(ctx, e.addr, cfg, topic, 0, 100, 1)
	if !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		return "", fmt.Errorf("consume from 100 of 10: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	return "partition consumer: OFFSET_OUT_OF_RANGE (no reset policy outside groups)", nil
}

func saramaTopicDeleted(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.topic_deleted")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	cfg := saramaConfig()
	var msgs []*sarama.ProducerMessage
	for i := 0; i < 10; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(strconv.Itoa(i))})
	}
	if err := saramaSend(e.addr, cfg, msgs); err != nil {
		return "", err
	}
	cons, err := sarama.NewConsumer([]string{e.addr}, cfg)
	if err != nil {
		return "", err
	}
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		cons.Close()
		return "", err
	}
	for n := 0; n < 10; n++ {
		select {
		case <-pc.Messages():
		case err := <-pc.Errors():
			cons.Close()
			return "", fmt.Errorf("before the delete: %w", err.Err)
		case <-ctx.Done():
			cons.Close()
			return "", fmt.Errorf("read %d of 10 before the delete: %w", n, ctx.Err())
		}
	}
	if r, err := e.adm.DeleteTopic(ctx, topic); err != nil || r.Err != nil {
		cons.Close()
		return "", fmt.Errorf("DeleteTopics: %v %v", err, r.Err)
	}
	var seen error
	timeout := time.After(10 * time.Second)
wait:
	for {
		select {
		case m := <-pc.Messages():
			if m != nil {
				cons.Close()
				return "", fmt.Errorf("read offset %d after the topic was deleted", m.Offset)
			}
		case err := <-pc.Errors():
			if err != nil {
				seen = err.Err
				break wait
			}
		case <-timeout:
			break wait
		}
	}
	closed := make(chan struct{})
	go func() { pc.AsyncClose(); cons.Close(); close(closed) }()
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
