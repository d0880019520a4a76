package broker

import (
	"context"
	"crypto/rand"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

func quotaEntity(parts ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(parts); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: parts[i]}
		if parts[i+1] != "<default>" {
			c.Name = new(parts[i+1])
		}
		e = append(e, c)
	}
	return e
}

func setQuota(t *testing.T, adm *kadm.Client, key string, v float64, entity ...string) {
	t.Helper()
	res, err := adm.AlterClientQuotas(testContext(t), []kadm.AlterClientQuotaEntry{{
		Entity: quotaEntity(entity...), Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("set %s=%v on %v: %v %s", key, v, entity, r.Err, r.ErrMessage)
		}
	}
}

// TestClientQuotasAPI: AlterClientQuotas and DescribeClientQuotas with
// Kafka's filters and errors.
func TestClientQuotasAPI(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	// No quota yet: an empty array, not null.
	empty, err := kmsg.NewPtrDescribeClientQuotasRequest().RequestWith(testContext(t), ts.client(t))
	if err != nil || empty.ErrorCode != 0 || empty.Entries == nil {
		t.Fatalf("describe with no quotas: %+v %v, want an empty, non-null array", empty, err)
	}
	setQuota(t, adm, "producer_byte_rate", 1024, "user", "alice")
	setQuota(t, adm, "consumer_byte_rate", 2048, "user", "alice")
	setQuota(t, adm, "producer_byte_rate", 4096, "user", "alice", "client-id", "app")
	setQuota(t, adm, "consumer_byte_rate", 512, "user", "<default>")
	setQuota(t, adm, "producer_byte_rate", 100, "client-id", "<default>")

	describe := func(strict bool, comps ...kadm.DescribeClientQuotaComponent) []string {
		t.Helper()
		d, err := adm.DescribeClientQuotas(testContext(t), strict, comps)
		if err != nil {
			t.Fatalf("describe %v: %v", comps, err)
		}
		var out []string
		for _, q := range d {
			var vs []string
			for _, v := range q.Values {
				vs = append(vs, v.String())
			}
			out = append(out, q.Entity.String()+" "+strings.Join(vs, ","))
		}
		return out
	}
	user := func(mt kadm.QuotasMatchType, name *string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: "user", MatchType: mt, MatchName: name}
	}
	if got := describe(false, user(0, new("alice"))); len(got) != 2 {
		t.Errorf("user=alice, not strict: %q, want alice and alice with app", got)
	}
	if got := describe(true, user(0, new("alice"))); len(got) != 1 || !strings.Contains(got[0], "consumer_byte_rate=2048") || !strings.Contains(got[0], "producer_byte_rate=1024") {
		t.Errorf("user=alice, strict: %q", got)
	}
	if got := describe(true, user(1, nil)); len(got) != 1 || !strings.Contains(got[0], "consumer_byte_rate=512") {
		t.Errorf("default user, strict: %q", got)
	}
	if got := describe(false, user(2, nil)); len(got) != 3 {
		t.Errorf("any user: %q, want 3 entities", got)
	}
	if got := describe(false); len(got) != 4 {
		t.Errorf("no filter: %q, want every entity", got)
	}

	// Whole-request errors, with Kafka's codes and messages.
	for _, tt := range []struct {
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  *kerr.Error
		msg   string
	}{
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "group"}}, kerr.UnsupportedVersion, "Unsupported entity type group"},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0}}, kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null."},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 2}, {EntityType: "user", MatchType: 2}}, kerr.InvalidRequest, "Entity type user cannot appear more than once in the filter."},
		{[]kmsg.DescribeClientQuotasRequestComponent{{EntityType: "ip", MatchType: 2}, {EntityType: "user", MatchType: 2}}, kerr.InvalidRequest,
			"Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
	} {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components = tt.comps
		resp, err := req.RequestWith(testContext(t), ts.client(t))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != tt.code.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != tt.msg {
			t.Errorf("filter %+v: %d %v, want %s %q", tt.comps, resp.ErrorCode, resp.ErrorMessage, tt.code, tt.msg)
		}
	}

	// Both versions answer in their own encoding.
	for v := int16(0); v <= 1; v++ {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		req.SetVersion(v)
		e := kmsg.NewAlterClientQuotasRequestEntry()
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = "client-id", new("versioned")
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = "fetch_rate", 1
		e.Entity, e.Ops = []kmsg.AlterClientQuotasRequestEntryEntity{ent}, []kmsg.AlterClientQuotasRequestEntryOp{op}
		req.Entries = append(req.Entries, e)
		b, err := ts.client(t).Broker(1).Request(testContext(t), req)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		resp := b.(*kmsg.AlterClientQuotasResponse)
		if len(resp.Entries) != 1 || resp.Entries[0].ErrorCode != kerr.InvalidRequest.Code || resp.Entries[0].ErrorMessage == nil ||
			*resp.Entries[0].ErrorMessage != "Invalid configuration key fetch_rate" || len(resp.Entries[0].Entity) != 1 ||
			resp.Entries[0].Entity[0].Name == nil || *resp.Entries[0].Entity[0].Name != "versioned" {
			t.Fatalf("v%d answer %+v", v, resp.Entries)
		}
	}

	// An ip entity's quota is set, and removal works.
	res, err := adm.AlterClientQuotas(testContext(t), []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity("ip", "10.0.0.9"), Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 50}}},
		{Entity: quotaEntity("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Errorf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	if got := describe(true, user(0, new("alice"))); len(got) != 1 || strings.Contains(got[0], "producer_byte_rate") {
		t.Errorf("after removing alice's producer_byte_rate: %q", got)
	}
}

// measuredRate runs fn until the deadline and returns the bytes per
// second counted by fn's add calls between from and to after the start,
// the span over which Kafka's windowed rate is past its first samples.
type rateMeter struct {
	start    time.Time
	from, to time.Duration
	mu       sync.Mutex
	bytes    int64
}

func (m *rateMeter) add(n int) {
	since := time.Since(m.start)
	if since < m.from || since >= m.to {
		return
	}
	m.mu.Lock()
	m.bytes += int64(n)
	m.mu.Unlock()
}

func (m *rateMeter) rate() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return float64(m.bytes) / (m.to - m.from).Seconds()
}

// throttleHook counts the throttles clients are told of.
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, after bool) {
	if d > 0 && after {
		h.n.Add(1)
	}
}

// TestClientQuotaRates: a producer and a consumer sending and reading as
// fast as they can are held to their byte-rate quotas, measured by the
// client (the producer within 10%), and are told of their throttles in
// throttle_time_ms. Kafka's windowed rate lets a client that has been
// throttled send again in a burst whenever its oldest sample expires, so
// the rate is only steady over many windows: the windows here are 2 of
// 1 s (quota.window.num, quota.window.size.seconds) and the rate is
// measured over 20 s after a 4 s warm-up. (A burst is at most
// quota.window.num-1 windows' worth, so a measurement that catches one
// burst too many is off by at most 1 s of quota in 20.)
func TestClientQuotaRates(t *testing.T) {
	if testing.Short() {
		t.Skip("measures rates for 24 s")
	}
	ts := startServer(t, "", func(c *config.Broker) { c.QuotaWindowNum, c.QuotaWindowSizeSeconds = 2, 1 })
	adm := ts.admin(t)
	const quota = 1 << 20 // 1 MiB/s
	// Random, uncompressed values: the quota counts the bytes on the
	// wire, which the client's count of values then matches.
	value := make([]byte, 16<<10)
	rand.Read(value)
	noCompression := kgo.ProducerBatchCompression(kgo.NoCompression())
	createTopic(t, adm, "quota-produce", 1, nil)
	createTopic(t, adm, "quota-fetch", 1, nil)

	// The data the consumer will read, written before any quota.
	fill := ts.client(t, kgo.DefaultProduceTopic("quota-fetch"), kgo.ClientID("filler"), noCompression,
		// Small batches: a fetch returns whole batches.
		kgo.ProducerBatchMaxBytes(128<<10))
	for range 1600 { // 25 MiB
		fill.Produce(testContext(t), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("fill: %v", err)
			}
		})
	}
	if err := fill.Flush(testContext(t)); err != nil {
		t.Fatal(err)
	}

	// The producer's quota by client id, the consumer's by its user (on
	// PLAINTEXT, ANONYMOUS) with any client id.
	setQuota(t, adm, "producer_byte_rate", quota, "client-id", "quota-producer")
	setQuota(t, adm, "consumer_byte_rate", quota, "user", "ANONYMOUS", "client-id", "<default>")

	t.Run("produce", func(t *testing.T) {
		t.Parallel()
		hook := &throttleHook{}
		cl := ts.client(t, kgo.DefaultProduceTopic("quota-produce"), kgo.ClientID("quota-producer"),
			kgo.MaxBufferedBytes(2<<20), kgo.WithHooks(hook), noCompression,
			// Requests much smaller than a second's quota, so that the
			// rate is not measured in whole requests.
			kgo.ProducerBatchMaxBytes(128<<10))
		m := &rateMeter{start: time.Now(), from: 4 * time.Second, to: 24 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), m.to)
		defer cancel()
		for ctx.Err() == nil {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					m.add(len(r.Value))
				}
			})
		}
		got := m.rate()
		t.Logf("produce: %.0f B/s against a quota of %d B/s (%.1f%%), %d throttles", got, quota, 100*(got-quota)/quota, hook.n.Load())
		if math.Abs(got-quota)/quota > 0.10 {
			t.Errorf("produce rate %.0f B/s is not within 10%% of the quota %d B/s", got, quota)
		}
		if hook.n.Load() == 0 {
			t.Error("no produce response carried a throttle time")
		}
	})

	t.Run("fetch", func(t *testing.T) {
		t.Parallel()
		hook := &throttleHook{}
		cl := ts.client(t, kgo.ConsumeTopics("quota-fetch"), kgo.ClientID("quota-consumer"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hook),
			kgo.FetchMaxBytes(128<<10), kgo.FetchMaxPartitionBytes(128<<10))
		m := &rateMeter{start: time.Now(), from: 4 * time.Second, to: 24 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), m.to)
		defer cancel()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { m.add(len(r.Value)) })
		}
		got := m.rate()
		t.Logf("fetch: %.0f B/s against a quota of %d B/s (%.1f%%), %d throttles", got, quota, 100*(got-quota)/quota, hook.n.Load())
		// A fetch over the quota is answered empty and taken back
		// (Kafka's unrecordQuotaSensor), so each throttle costs the
		// consumer a round trip with no data: it reads a little under
		// its quota, never over.
		if got > quota*1.10 || got < quota*0.80 {
			t.Errorf("fetch rate %.0f B/s is not within -20%%..+10%% of the quota %d B/s", got, quota)
		}
		if hook.n.Load() == 0 {
			t.Error("no fetch response carried a throttle time")
		}
	})
}
