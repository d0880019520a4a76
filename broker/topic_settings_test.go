package broker

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// slogCapture is an io.Writer for a slog handler that tests read back.
type slogCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *slogCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *slogCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// startServerLogged is startServer with the server's log captured.
func startServerLogged(t *testing.T, tweak ...func(*config.Broker)) (*testServer, *slogCapture) {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	for _, f := range tweak {
		f(cfg)
	}
	logs := &slogCapture{}
	s, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &testServer{Server: s, dir: dir, addr: s.Addr().String()}, logs
}

// countUnsupported counts the warnings naming a topic config of a topic.
func countUnsupported(logs string, topic, name string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `msg="topic config not supported, it has no effect"`) &&
			strings.Contains(line, " topic="+topic+" ") && strings.Contains(line, " name="+name+" ") {
			n++
		}
	}
	return n
}

// TestUnsupportedTopicConfigsNamed: a topic config that has no effect is
// accepted (Kafka's tools set some of them) and named in a warning with
// its topic, once per CreateTopics, AlterConfigs and
// IncrementalAlterConfigs that sets it; honoured ones are not named.
func TestUnsupportedTopicConfigsNamed(t *testing.T) {
	ts, logs := startServerLogged(t)
	adm := ts.admin(t)
	ctx := testContext(t)
	s := func(v string) *string { return &v }

	createTopic(t, adm, "quiet", 1, map[string]*string{"retention.ms": s("3600000"), "compression.type": s("gzip")})
	createTopic(t, adm, "throttled", 1, map[string]*string{
		"leader.replication.throttled.replicas": s("*"),
		"preallocate":                           s("true"),
		"retention.ms":                          s("3600000"),
	})
	out := logs.String()
	if n := countUnsupported(out, "throttled", "leader.replication.throttled.replicas"); n != 1 {
		t.Errorf("%d warnings for leader.replication.throttled.replicas at creation, want 1:\n%s", n, out)
	}
	if n := countUnsupported(out, "throttled", "preallocate"); n != 1 {
		t.Errorf("%d warnings for preallocate at creation, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "topic=quiet name=") {
		t.Errorf("honoured configs of quiet named as not supported:\n%s", out)
	}
	if n := countUnsupported(out, "throttled", "retention.ms"); n != 0 {
		t.Errorf("honoured retention.ms named %d times", n)
	}

	// IncrementalAlterConfigs: only what the request sets is named.
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "follower.replication.throttled.replicas", Value: s("0:1")},
		{Op: kadm.SetConfig, Name: "segment.ms", Value: s("60000")},
	}, "quiet")
	if err != nil || res[0].Err != nil {
		t.Fatalf("incremental alter: %v %v", err, res)
	}
	out = logs.String()
	if n := countUnsupported(out, "quiet", "follower.replication.throttled.replicas"); n != 1 {
		t.Errorf("%d warnings for follower.replication.throttled.replicas, want 1:\n%s", n, out)
	}
	if n := countUnsupported(out, "quiet", "segment.ms"); n != 0 {
		t.Errorf("honoured segment.ms named %d times", n)
	}

	// The legacy AlterConfigs replaces the whole set: local.retention.ms is named.
	res, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{
		{Name: "local.retention.ms", Value: s("1000")},
	}, "quiet")
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %v", err, res)
	}
	out = logs.String()
	if n := countUnsupported(out, "quiet", "local.retention.ms"); n != 1 {
		t.Errorf("%d warnings for local.retention.ms, want 1:\n%s", n, out)
	}
	// Removing an unsupported config names nothing more.
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: "follower.replication.throttled.replicas"},
	}, "quiet")
	if err != nil || res[0].Err != nil {
		t.Fatalf("incremental delete: %v %v", err, res)
	}
	if n := countUnsupported(logs.String(), "quiet", "follower.replication.throttled.replicas"); n != 1 {
		t.Errorf("%d warnings after the delete, want still 1", n)
	}
}

// wordPayload is n bytes that compress somewhat, like real records.
func wordPayload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	words := []string{"order", "customer", "id", "amount", "EUR", "status", "shipped", "{", "}", ":", ","}
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
		b = binary.AppendUvarint(b, r.Uint64N(1e6))
	}
	return b[:n]
}

// storedBatchBytes fetches partition 0 of topic from offset at over the
// wire and returns the size of the first stored batch and its codec.
func storedBatchBytes(t *testing.T, cl *kgo.Client, topic string, at int64) (int, protocol.Codec) {
	t.Helper()
	td, err := kadm.NewClient(cl).ListTopics(testContext(t), topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("metadata %s: %v %v", topic, err, td[topic].Err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 100
	req.MaxBytes = 8 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, td[topic].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset = at
	fp.PartitionMaxBytes = 8 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch %s: %+v", topic, resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch %s: error %d, %d bytes", topic, p.ErrorCode, len(p.RecordBatches))
	}
	h, err := protocol.ParseBatchHeader(p.RecordBatches)
	if err != nil {
		t.Fatalf("fetch %s: %v", topic, err)
	}
	return h.Size(), h.Codec()
}

// TestTopicCompressionLevels: when the broker compresses a batch to the
// topic's compression.type, it does so at the topic's
// compression.<codec>.level (KIP-390), set at creation or altered later;
// the same uncompressed batch is stored smaller at a higher level and
// reads back unchanged.
func TestTopicCompressionLevels(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	ctx := testContext(t)
	value := wordPayload(300<<10, 7)
	s := func(v string) *string { return &v }
	for _, tt := range []struct {
		codec       string
		c           protocol.Codec
		fast, small string
	}{
		{"gzip", protocol.CodecGzip, "1", "9"},
		{"lz4", protocol.CodecLZ4, "9", "17"}, // 9, the default, is lz4's fast mode
		{"zstd", protocol.CodecZstd, "-5", "19"},
	} {
		key := "compression." + tt.codec + ".level"
		sizes := map[string]int{}
		for _, level := range []string{tt.fast, tt.small} {
			topic := tt.codec + "-level-" + level
			createTopic(t, adm, topic, 1, map[string]*string{"compression.type": s(tt.codec), key: s(level)})
			cl := ts.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			n, c := storedBatchBytes(t, cl, topic, 0)
			if c != tt.c {
				t.Fatalf("%s: stored as %s, want %s", topic, c, tt.c)
			}
			sizes[level] = n
		}
		t.Logf("%s: level %s %d bytes, level %s %d bytes (value %d bytes)", tt.codec, tt.fast, sizes[tt.fast], tt.small, sizes[tt.small], len(value))
		if sizes[tt.small] >= sizes[tt.fast] {
			t.Errorf("%s: level %s stored %d bytes, level %s %d: the level is not applied", tt.codec, tt.small, sizes[tt.small], tt.fast, sizes[tt.fast])
		}

		// Altered on the fast topic, the new level applies to the next batch.
		topic := tt.codec + "-level-" + tt.fast
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: s(tt.small)}}, topic)
		if err != nil || res[0].Err != nil {
			t.Fatalf("alter %s: %v %v", key, err, res)
		}
		cl := ts.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if n, _ := storedBatchBytes(t, cl, topic, 1); n != sizes[tt.small] {
			t.Errorf("%s after altering %s to %s: %d bytes, want %d", topic, key, tt.small, n, sizes[tt.small])
		}
		consumer := ts.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var got [][]byte
		for len(got) < 2 {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Value) })
		}
		for i, v := range got {
			if !bytes.Equal(v, value) {
				t.Fatalf("%s: record %d reads back changed", topic, i)
			}
		}
	}
}
