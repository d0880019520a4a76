package compat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The data every client writes, so that checks and scripts agree. The
// scripts under python/ and node/ follow the same definitions.
const (
	produceCount = 1000 // records per produce.<codec> scenario
	orderKeys    = 20
	orderCount   = 2000
	bulkCount    = 100000
	oneMiB       = 1 << 20
	// bigTopicMax is max.message.bytes for record.1mib: a 1 MiB record
	// needs a little more than Kafka's default 1048588 in its batch.
	bigTopicMax = 2 << 20
	// smallTopicMax is max.message.bytes for edge.too_large, whose
	// record is tooLargeValue bytes.
	smallTopicMax = 10000
	tooLargeValue = 20000
)

// codecs maps a produce scenario to its record-batch codec id.
var codecs = map[string]int8{"produce.none": 0, "produce.gzip": 1, "produce.snappy": 2, "produce.lz4": 3, "produce.zstd": 4}

func produceKey(i int) string { return fmt.Sprintf("key-%d", i) }

// produceValue repeats a little so that every codec shrinks the batch
// (librdkafka sends a batch uncompressed when compression does not pay).
func produceValue(i int) string {
	return fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%37))
}

func bulkValue(i int) string { return fmt.Sprintf("bulk-%06d", i) }

// bulkSum is the checksum of the bulk scenario: the sum of the CRC-32
// (IEEE) of every value, so it does not depend on the order read.
func bulkSum(values [][]byte) uint64 {
	var s uint64
	for _, v := range values {
		s += uint64(crc32.ChecksumIEEE(v))
	}
	return s
}

func wantBulkSum() uint64 {
	vs := make([][]byte, bulkCount)
	for i := range vs {
		vs[i] = []byte(bulkValue(i))
	}
	return bulkSum(vs)
}

// bigValue is 1 MiB of pseudo-random bytes (incompressible) and its hash.
func bigValue() ([]byte, string) {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, oneMiB)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	h := sha256.Sum256(b)
	return b, hex.EncodeToString(h[:])
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// createTopic creates a topic through the out-of-band admin.
// createTopic creates topic out of band and waits until the broker's
// metadata shows every partition with a leader and every partition
// answers ListOffsets, as Kafka's own test utilities wait: Kafka answers
// CreateTopics once the controller committed the topic, and the broker
// serves its partitions a moment later, when the metadata reaches it
// (its metadata cache first, the partitions' logs just after; Gregor
// serves them at once).
func (e *env) createTopic(ctx context.Context, topic string, partitions int32, configs map[string]*string) error {
	resp, err := e.adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s (out of band): %w", topic, err)
	}
	return visible(ctx, "topic "+topic+" served after create (out of band)", func() error {
		md, err := e.adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		td, ok := md.Topics[topic]
		switch {
		case !ok:
			return fmt.Errorf("not in metadata")
		case td.Err != nil:
			return td.Err
		case len(td.Partitions) != int(partitions):
			return fmt.Errorf("%d partitions", len(td.Partitions))
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Errorf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
			}
		}
		_, err = e.endOffsets(ctx, topic)
		return err
	})
}

func strp(s string) *string { return &s }

// endOffsets returns each partition's high watermark.
func (e *env) endOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	l, err := e.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets %s: %w", topic, err)
	}
	out := map[int32]int64{}
	var first error
	l.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && first == nil {
			first = o.Err
		}
		out[o.Partition] = o.Offset
	})
	if first != nil {
		return nil, fmt.Errorf("list end offsets %s: %w", topic, first)
	}
	return out, nil
}

// consumeAll reads every record of topic up to the current high
// watermarks with a fresh franz-go consumer.
func (e *env) consumeAll(ctx context.Context, topic string, opts ...kgo.Opt) ([]*kgo.Record, error) {
	ends, err := e.endOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	total := int64(0)
	for _, o := range ends {
		total += o
	}
	base := []kgo.Opt{kgo.SeedBrokers(e.addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("consume %s: read %d of %d records: %w", topic, len(out), total, err)
		}
		for _, fe := range fs.Errors() {
			return out, fmt.Errorf("consume %s partition %d: %w", topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			next[r.Partition] = r.Offset + 1
		})
	}
	return out, nil
}

// postCheck verifies, out of band, what a scenario's own checks cannot
// see from inside a client: the codec of the batches written, that an
// idempotent producer's batches carry its producer id, that nothing was
// appended or created where the broker had to refuse.
func postCheck(parent context.Context, e *env, id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 60*time.Second)
	defer cancel()
	topic := e.topic(id)
	if codec, ok := codecs[id]; ok {
		recs, err := e.consumeAll(ctx, topic)
		if err != nil {
			return "", fmt.Errorf("post-check: %w", err)
		}
		if len(recs) != produceCount {
			return "", fmt.Errorf("post-check: topic %s holds %d records, want %d", topic, len(recs), produceCount)
		}
		// librdkafka and kafka-python send a batch uncompressed when the
		// codec does not shrink it (a lone record at the start, say): every
		// record must carry the codec or none, and nearly all the codec.
		compressed := 0
		for _, r := range recs {
			switch got := int8(r.Attrs.CompressionType()); got {
			case codec:
				compressed++
			case 0:
			default:
				return "", fmt.Errorf("post-check: record at %d was written with codec %d, want %d", r.Offset, got, codec)
			}
		}
		if codec != 0 && compressed < len(recs)*9/10 {
			return "", fmt.Errorf("post-check: %d of %d records written with codec %d", compressed, len(recs), codec)
		}
		return "", nil
	}
	switch id {
	case "group.split":
		if err := splitPostCheck(ctx, e, topic); err != nil {
			return "", fmt.Errorf("post-check: %w", err)
		}
	case "producer.idempotent":
		recs, err := e.consumeAll(ctx, topic)
		if err != nil {
			return "", fmt.Errorf("post-check: %w", err)
		}
		for _, r := range recs {
			if r.ProducerID < 0 {
				return "", fmt.Errorf("post-check: record at %d has no producer id: the client fell back to a plain producer", r.Offset)
			}
		}
	case "edge.too_large":
		ends, err := e.endOffsets(ctx, topic)
		if err != nil {
			return "", fmt.Errorf("post-check: %w", err)
		}
		for p, o := range ends {
			if o != 0 {
				return "", fmt.Errorf("post-check: partition %d holds %d records after MESSAGE_TOO_LARGE", p, o)
			}
		}
	case "edge.unknown_topic":
		if err := topicMissing(ctx, e.strict, topic); err != nil {
			return "", fmt.Errorf("post-check on the auto-create-off broker: %w", err)
		}
	case "edge.topic_deleted":
		// A client whose metadata requests allow auto-creation (or are
		// older than v4, where it is implied) creates the topic again,
		// as it would on Kafka: noted, not a failure.
		if err := topicMissing(ctx, e.addr, topic); err != nil {
			return "; the client's metadata requests re-created the topic (auto-create on)", nil
		}
	}
	return "", nil
}

// topicMissing asks addr's metadata, without auto-creation, whether topic
// exists, and wants UNKNOWN_TOPIC_OR_PARTITION.
func topicMissing(ctx context.Context, addr, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("metadata %s: %d topics answered", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("metadata %s: error %v, want UNKNOWN_TOPIC_OR_PARTITION (topic exists?)", topic, err)
	}
	return nil
}

// waitFor polls cond every 100 ms until it returns nil or ctx ends.
// visible waits up to visibleWithin for cond, for what an admin request
// changed to show in the broker's metadata or configs: Kafka propagates
// a committed change from its controller to the brokers asynchronously,
// so a client that reads right after it writes may see the old state for
// a moment. Clients that check their own admin changes poll the same way.
func visible(ctx context.Context, what string, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, visibleWithin)
	defer cancel()
	return waitFor(ctx, what, cond)
}

// visibleWithin bounds visible: Kafka's propagation takes milliseconds,
// so seconds are a failure, not a slow machine.
const visibleWithin = 15 * time.Second

func waitFor(ctx context.Context, what string, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
