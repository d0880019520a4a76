package compat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// kafkaGo runs the scenarios through segmentio/kafka-go: its Client for
// admin requests, Writer and Reader for data, as its users do.
func kafkaGo() clientImpl {
	s := map[string]scenarioFunc{
		"metadata":     kgoMetadataKafkaGo,
		"topics.admin": kafkaGoTopicsAdmin,
		"order.key":    kafkaGoOrderKey,
		"group.resume": kafkaGoGroupResume,
		"group.split":  kafkaGoGroupSplit,
		"producer.idempotent": func(context.Context, *env) (string, error) {
			return "", notApplicable("kafka-go's Writer has no idempotent mode")
		},
		"txn.read_committed": func(context.Context, *env) (string, error) {
			return "", notApplicable("kafka-go has no transactional producer")
		},
		"listoffsets.time": kafkaGoListOffsetsTime,
		"configs.describe": kafkaGoConfigsDescribe,
		"configs.alter":    kafkaGoConfigsAlter,
		"deleterecords": func(context.Context, *env) (string, error) {
			return "", notApplicable("kafka-go has no DeleteRecords request")
		},
		"record.1mib":          kafkaGoBigRecord,
		"bulk.100k":            kafkaGoBulk,
		"edge.unknown_topic":   kafkaGoUnknownTopic,
		"edge.too_large":       kafkaGoTooLarge,
		"edge.offset_past_end": kafkaGoOffsetPastEnd,
		"edge.topic_deleted":   kafkaGoTopicDeleted,
	}
	for id, codec := range map[string]compress.Compression{
		"produce.none": 0, "produce.gzip": compress.Gzip, "produce.snappy": compress.Snappy,
		"produce.lz4": compress.Lz4, "produce.zstd": compress.Zstd,
	} {
		s[id] = func(ctx context.Context, e *env) (string, error) { return kafkaGoProduce(ctx, e, id, codec) }
	}
	return clientImpl{name: "kafka-go", scenarios: s}
}

func kafkaGoClient(addr string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(addr), Timeout: 20 * time.Second, Transport: &kafka.Transport{}}
}

// kafkaGoWriter is a Writer with its own transport: kafka-go's shared
// default caches metadata for seconds, so it would not see a topic just
// created (on Kafka too).
func kafkaGoWriter(addr, topic string) *kafka.Writer {
	return &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Transport: &kafka.Transport{}, BatchTimeout: 5 * time.Millisecond,
		RequiredAcks: kafka.RequireAll, Balancer: &kafka.Hash{}}
}

func kafkaGoRead(ctx context.Context, addr, topic string, part int, n int) ([]kafka.Message, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: part, MaxWait: 200 * time.Millisecond,
		MaxBytes: 4 << 20})
	defer r.Close()
	var out []kafka.Message
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return out, fmt.Errorf("read %d of %d from partition %d: %w", len(out), n, part, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func kgoMetadataKafkaGo(ctx context.Context, e *env) (string, error) {
	topic := e.topic("metadata")
	cl := kafkaGoClient(e.addr)
	// kafka-go's Writer asks for auto-creation when it produces.
	w := kafkaGoWriter(e.addr, topic)
	w.AllowAutoTopicCreation = true
	err := w.WriteMessages(ctx, kafka.Message{Value: []byte("v")})
	w.Close()
	if err != nil {
		return "", fmt.Errorf("produce to auto-created topic: %w", err)
	}
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return "", fmt.Errorf("metadata: %w", err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(md.Brokers[0].Port)) != e.addr {
		return "", fmt.Errorf("brokers %+v, want node 1 at %s", md.Brokers, e.addr)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) != 1 || md.Topics[0].Partitions[0].Leader.ID != 1 {
		return "", fmt.Errorf("topic %s: %+v, want one partition led by node 1", topic, md.Topics)
	}
	return "", nil
}

// kafkaGoPartitions asks metadata through a new client: a Transport
// caches metadata for seconds, so a reused one would answer from before
// the change being checked.
func kafkaGoPartitions(ctx context.Context, addr string, topic string) (int, error) {
	md, err := kafkaGoClient(addr).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	if len(md.Topics) != 1 {
		return 0, fmt.Errorf("%d topics in metadata", len(md.Topics))
	}
	if md.Topics[0].Error != nil {
		return 0, md.Topics[0].Error
	}
	return len(md.Topics[0].Partitions), nil
}

func kafkaGoWantPartitions(ctx context.Context, addr, topic string, want int) error {
	if n, err := kafkaGoPartitions(ctx, addr, topic); err != nil || n != want {
		return fmt.Errorf("%d partitions, %v; want %d", n, err, want)
	}
	return nil
}

func kafkaGoTopicsAdmin(ctx context.Context, e *env) (string, error) {
	topic := e.topic("topics.admin")
	cl := kafkaGoClient(e.addr)
	cr, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}}})
	if err == nil {
		err = cr.Errors[topic]
	}
	if err != nil {
		return "", fmt.Errorf("CreateTopics: %w", err)
	}
	if err := visible(ctx, "after create", func() error { return kafkaGoWantPartitions(ctx, e.addr, topic, 3) }); err != nil {
		return "", err
	}
	pr, err := cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: 5}}})
	if err == nil {
		err = pr.Errors[topic]
	}
	if err != nil {
		return "", fmt.Errorf("CreatePartitions: %w", err)
	}
	if err := visible(ctx, "after CreatePartitions", func() error { return kafkaGoWantPartitions(ctx, e.addr, topic, 5) }); err != nil {
		return "", err
	}
	dr, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err == nil {
		err = dr.Errors[topic]
	}
	if err != nil {
		return "", fmt.Errorf("DeleteTopics: %w", err)
	}
	return "", waitFor(ctx, "topic gone after delete", func() error {
		if _, err := kafkaGoPartitions(ctx, e.addr, topic); !errors.Is(err, kafka.UnknownTopicOrPartition) {
			return fmt.Errorf("metadata says %v", err)
		}
		return nil
	})
}

func kafkaGoProduce(ctx context.Context, e *env, id string, codec compress.Compression) (string, error) {
	topic := e.topic(id)
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	w := kafkaGoWriter(e.addr, topic)
	w.Compression = codec
	defer w.Close()
	var msgs []kafka.Message
	for i := 0; i < produceCount; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(produceKey(i)), Value: []byte(produceValue(i)),
			Headers: []kafka.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}}})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	got, err := kafkaGoRead(ctx, e.addr, topic, 0, produceCount)
	if err != nil {
		return "", err
	}
	for i, m := range got {
		if m.Offset != int64(i) || string(m.Key) != produceKey(i) || string(m.Value) != produceValue(i) ||
			len(m.Headers) != 1 || m.Headers[0].Key != "i" || string(m.Headers[0].Value) != strconv.Itoa(i) {
			return "", fmt.Errorf("message %d: offset %d key %q value %q headers %v", i, m.Offset, m.Key, m.Value, m.Headers)
		}
	}
	return "", nil
}

func kafkaGoOrderKey(ctx context.Context, e *env) (string, error) {
	topic := e.topic("order.key")
	if err := e.createTopic(ctx, topic, 4, nil); err != nil {
		return "", err
	}
	w := kafkaGoWriter(e.addr, topic)
	defer w.Close()
	seq := map[string]int{}
	var msgs []kafka.Message
	for i := 0; i < orderCount; i++ {
		k := produceKey(i % orderKeys)
		msgs = append(msgs, kafka.Message{Key: []byte(k), Value: []byte(strconv.Itoa(seq[k]))})
		seq[k]++
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	got, err := e.consumeAll(ctx, topic)
	if err != nil {
		return "", err
	}
	return "", checkOrder(got)
}

func kafkaGoGroupResume(ctx context.Context, e *env) (string, error) {
	topic := e.topic("group.resume")
	if err := e.createTopic(ctx, topic, 2, nil); err != nil {
		return "", err
	}
	const n = 100
	w := kafkaGoWriter(e.addr, topic)
	w.Balancer = &kafka.RoundRobin{}
	var msgs []kafka.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, kafka.Message{Value: []byte(strconv.Itoa(i))})
	}
	err := w.WriteMessages(ctx, msgs...)
	w.Close()
	if err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	seen := map[string]int{}
	member := func(limit int) error {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{e.addr}, GroupID: topic + "-group", Topic: topic,
			StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond, HeartbeatInterval: time.Second,
			SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second})
		defer r.Close() // leaves the group
		for i := 0; i < limit; i++ {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				return fmt.Errorf("fetch %d of %d: %w", i, limit, err)
			}
			seen[string(m.Value)]++
			if err := r.CommitMessages(ctx, m); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
		}
		return nil
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

// kafkaGoGroupSplit runs group.split with two group Readers and
// kafka-go's default balancers (range, then round-robin). A Reader does
// not expose its assignment, so the wait for the split and the check for
// a rebalance read the broker's DescribeGroups, the members told apart by
// the client id each Reader's Dialer sends.
func kafkaGoGroupSplit(ctx context.Context, e *env) (string, error) {
	topic := e.topic("group.split")
	if err := e.createTopic(ctx, topic, splitPartitions, nil); err != nil {
		return "", err
	}
	group := splitGroup(topic)
	tally := newSplitTally()
	rctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	var clientIDs [2]string
	var readers [2]*kafka.Reader
	defer func() {
		stop()
		wg.Wait()
		for _, r := range readers {
			if r != nil {
				r.Close() // leaves the group, once its fetcher stopped
			}
		}
	}()
	for m := range readers {
		clientIDs[m] = fmt.Sprintf("%s-%d", group, m)
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{e.addr}, GroupID: group, Topic: topic,
			StartOffset: kafka.FirstOffset, MaxWait: 200 * time.Millisecond, HeartbeatInterval: time.Second,
			SessionTimeout: splitSessionMs * time.Millisecond,
			Dialer:         &kafka.Dialer{ClientID: clientIDs[m], Timeout: 10 * time.Second, DualStack: true}})
		readers[m] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				msg, err := r.FetchMessage(rctx)
				if err != nil {
					if rctx.Err() == nil {
						errc <- fmt.Errorf("member %d fetch: %w", m, err)
					}
					return
				}
				tally.record(m, int32(msg.Partition), string(msg.Value))
				// Commit with ctx, not rctx: what was processed before the
				// stop is committed before the member leaves.
				if err := r.CommitMessages(ctx, msg); err != nil {
					errc <- fmt.Errorf("member %d commit: %w", m, err)
					return
				}
				tally.commit(1)
			}
		}()
	}
	var sets [2][]int32
	var ids [2]string
	err := waitFor(ctx, "wait for both members to hold a part of the topic", func() error {
		var err error
		sets, ids, err = e.describeSplit(ctx, group, topic, clientIDs)
		return err
	})
	if err != nil {
		return "", err
	}
	w := kafkaGoWriter(e.addr, topic)
	w.Balancer = kafka.BalancerFunc(func(msg kafka.Message, _ ...int) int {
		i, _ := strconv.Atoi(string(msg.Value))
		return i % splitPartitions
	})
	var msgs []kafka.Message
	for i := 0; i < splitCount; i++ {
		msgs = append(msgs, kafka.Message{Value: []byte(strconv.Itoa(i))})
	}
	err = w.WriteMessages(ctx, msgs...)
	w.Close()
	if err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	if err := tally.waitCommitted(ctx, errc); err != nil {
		return "", err
	}
	// The same members with the same assignment: no rebalance moved a
	// partition while consuming.
	endSets, endIDs, err := e.describeSplit(ctx, group, topic, clientIDs)
	if err != nil {
		return "", fmt.Errorf("after consuming: %w", err)
	}
	if endIDs != ids || !slices.Equal(endSets[0], sets[0]) || !slices.Equal(endSets[1], sets[1]) {
		return "", fmt.Errorf("the group rebalanced while consuming: members %v with %v when the records were written, %v with %v at the end",
			ids, sets, endIDs, endSets)
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

func kafkaGoListOffsetsTime(ctx context.Context, e *env) (string, error) {
	topic := e.topic("listoffsets.time")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	w := kafkaGoWriter(e.addr, topic)
	var msgs []kafka.Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, kafka.Message{Value: []byte(strconv.Itoa(i)), Time: time.UnixMilli(timeBase + int64(i)*1000)})
	}
	err := w.WriteMessages(ctx, msgs...)
	w.Close()
	if err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	cl := kafkaGoClient(e.addr)
	list := func(ts int64) (kafka.PartitionOffsets, error) {
		r, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {{Partition: 0, Timestamp: ts}}}})
		if err != nil {
			return kafka.PartitionOffsets{}, err
		}
		if len(r.Topics[topic]) != 1 {
			return kafka.PartitionOffsets{}, fmt.Errorf("%d partitions answered", len(r.Topics[topic]))
		}
		return r.Topics[topic][0], r.Topics[topic][0].Error
	}
	// kafka-go files each answer under the timestamp asked for (its
	// Merge replaces the response's), so only the offsets are checked.
	for _, c := range []struct {
		what string
		ts   int64
		want int64
	}{{"after timeBase+3.5s", timeBase + 3500, 4}, {"at timeBase+3s", timeBase + 3000, 3},
		{"earliest", kafka.FirstOffset, 0}, {"latest", kafka.LastOffset, 10}} {
		po, err := list(c.ts)
		if err != nil {
			return "", fmt.Errorf("ListOffsets %s: %w", c.what, err)
		}
		got := int64(-1)
		switch c.ts {
		case kafka.FirstOffset:
			got = po.FirstOffset
		case kafka.LastOffset:
			got = po.LastOffset
		default:
			for o := range po.Offsets {
				got = o
			}
		}
		if got != c.want {
			return "", fmt.Errorf("ListOffsets %s: %+v, want offset %d", c.what, po, c.want)
		}
	}
	return "", nil
}

// kafkaGoWantConfigs waits until DescribeConfigs shows want (see visible).
func kafkaGoWantConfigs(ctx context.Context, cl *kafka.Client, topic string, want map[string]string) error {
	return visible(ctx, "DescribeConfigs "+topic, func() error { return kafkaGoHasConfigs(ctx, cl, topic, want) })
}

func kafkaGoHasConfigs(ctx context.Context, cl *kafka.Client, topic string, want map[string]string) error {
	r, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic}}})
	if err != nil {
		return fmt.Errorf("DescribeConfigs: %w", err)
	}
	if len(r.Resources) != 1 || r.Resources[0].Error != nil {
		return fmt.Errorf("DescribeConfigs %s: %+v", topic, r.Resources)
	}
	got := map[string]string{}
	for _, c := range r.Resources[0].ConfigEntries {
		got[c.ConfigName] = c.ConfigValue
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("DescribeConfigs %s: %s=%q, want %q", topic, k, got[k], v)
		}
	}
	return nil
}

func kafkaGoCreate(ctx context.Context, cl *kafka.Client, tc kafka.TopicConfig) error {
	cr, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
	if err == nil {
		err = cr.Errors[tc.Topic]
	}
	if err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	return nil
}

func kafkaGoConfigsDescribe(ctx context.Context, e *env) (string, error) {
	topic := e.topic("configs.describe")
	cl := kafkaGoClient(e.addr)
	if err := kafkaGoCreate(ctx, cl, kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "123456789"}}}); err != nil {
		return "", err
	}
	return "", kafkaGoWantConfigs(ctx, cl, topic, map[string]string{"retention.ms": "123456789", "cleanup.policy": "delete"})
}

func kafkaGoConfigsAlter(ctx context.Context, e *env) (string, error) {
	topic := e.topic("configs.alter")
	cl := kafkaGoClient(e.addr)
	if err := kafkaGoCreate(ctx, cl, kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		return "", err
	}
	r, err := cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: "retention.ms", Value: "987654321", ConfigOperation: kafka.ConfigOperationSet}},
	}}})
	if err == nil && len(r.Resources) == 1 {
		err = r.Resources[0].Error
	}
	if err != nil {
		return "", fmt.Errorf("IncrementalAlterConfigs: %w", err)
	}
	return "", kafkaGoWantConfigs(ctx, cl, topic, map[string]string{"retention.ms": "987654321"})
}

func kafkaGoBigRecord(ctx context.Context, e *env) (string, error) {
	topic := e.topic("record.1mib")
	if err := e.createTopic(ctx, topic, 1, map[string]*string{"max.message.bytes": strp(strconv.Itoa(bigTopicMax))}); err != nil {
		return "", err
	}
	big, want := bigValue()
	w := kafkaGoWriter(e.addr, topic)
	w.BatchBytes = bigTopicMax
	err := w.WriteMessages(ctx, kafka.Message{Key: []byte("big"), Value: big})
	w.Close()
	if err != nil {
		return "", fmt.Errorf("write 1 MiB: %w", err)
	}
	got, err := kafkaGoRead(ctx, e.addr, topic, 0, 1)
	if err != nil {
		return "", err
	}
	if sha(got[0].Value) != want {
		return "", fmt.Errorf("read back %d bytes with another hash", len(got[0].Value))
	}
	return "", nil
}

func kafkaGoBulk(ctx context.Context, e *env) (string, error) {
	topic := e.topic("bulk.100k")
	if err := e.createTopic(ctx, topic, 3, nil); err != nil {
		return "", err
	}
	w := kafkaGoWriter(e.addr, topic)
	w.Balancer = &kafka.RoundRobin{}
	w.BatchSize = 1000
	msgs := make([]kafka.Message, bulkCount)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: []byte(bulkValue(i))}
	}
	err := w.WriteMessages(ctx, msgs...)
	w.Close()
	if err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	ends, err := e.endOffsets(ctx, topic)
	if err != nil {
		return "", err
	}
	var vs [][]byte
	for p := 0; p < 3; p++ {
		got, err := kafkaGoRead(ctx, e.addr, topic, p, int(ends[int32(p)]))
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

func kafkaGoUnknownTopic(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.unknown_topic")
	w := kafkaGoWriter(e.strict, topic)
	w.AllowAutoTopicCreation = true // the broker has it off
	w.MaxAttempts = 3
	defer w.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := w.WriteMessages(wctx, kafka.Message{Value: []byte("v")})
	var we kafka.WriteErrors
	if errors.As(err, &we) && len(we) == 1 {
		err = we[0]
	}
	if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		return "", fmt.Errorf("write to unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	return "UNKNOWN_TOPIC_OR_PARTITION after its attempts", nil
}

func kafkaGoTooLarge(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.too_large")
	if err := e.createTopic(ctx, topic, 1, map[string]*string{"max.message.bytes": strp(strconv.Itoa(smallTopicMax))}); err != nil {
		return "", err
	}
	big, _ := bigValue()
	w := kafkaGoWriter(e.addr, topic)
	defer w.Close()
	err := w.WriteMessages(ctx, kafka.Message{Value: big[:tooLargeValue]})
	var we kafka.WriteErrors
	if errors.As(err, &we) && len(we) == 1 {
		err = we[0]
	}
	if !errors.Is(err, kafka.MessageSizeTooLarge) {
		return "", fmt.Errorf("write %d bytes to a topic with max.message.bytes=%d: %v, want MESSAGE_TOO_LARGE", tooLargeValue, smallTopicMax, err)
	}
	return "", nil
}

func kafkaGoOffsetPastEnd(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.offset_past_end")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	w := kafkaGoWriter(e.addr, topic)
	var msgs []kafka.Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, kafka.Message{Value: []byte(strconv.Itoa(i))})
	}
	err := w.WriteMessages(ctx, msgs...)
	w.Close()
	if err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	// A partition reader waits past the end by default (for data to come);
	// with OffsetOutOfRangeError it reports the error instead.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{e.addr}, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond,
		OffsetOutOfRangeError: true})
	defer r.Close()
	if err := r.SetOffset(100); err != nil {
		return "", err
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = r.ReadMessage(rctx)
	if !errors.Is(err, kafka.OffsetOutOfRange) {
		return "", fmt.Errorf("read from 100 of 10: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	return "partition reader with OffsetOutOfRangeError: OFFSET_OUT_OF_RANGE", nil
}

func kafkaGoTopicDeleted(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.topic_deleted")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	w := kafkaGoWriter(e.addr, topic)
	var msgs []kafka.Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, kafka.Message{Value: []byte(strconv.Itoa(i))})
	}
	err := w.WriteMessages(ctx, msgs...)
	w.Close()
	if err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{e.addr}, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond})
	for i := 0; i < 10; i++ {
		if _, err := r.ReadMessage(ctx); err != nil {
			r.Close()
			return "", fmt.Errorf("read %d of 10 before the delete: %w", i, err)
		}
	}
	if dr, err := e.adm.DeleteTopic(ctx, topic); err != nil || dr.Err != nil {
		r.Close()
		return "", fmt.Errorf("DeleteTopics: %v %v", err, dr.Err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := r.ReadMessage(rctx)
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		return "", errors.New("the reader did not close within 10s after the topic was deleted")
	}
	switch {
	case err == nil:
		return "", fmt.Errorf("read offset %d after the topic was deleted", m.Offset)
	case errors.Is(err, context.DeadlineExceeded):
		return "reader kept retrying silently (no records, no error) and closed", nil
	}
	return "reader reported: " + err.Error(), nil
}
