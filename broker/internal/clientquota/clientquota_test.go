package clientquota

import (
	"math"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

func quotaImage(t *testing.T, recs ...*image.ClientQuotaRecord) *image.Image {
	t.Helper()
	rs := make([]image.Record, len(recs))
	for i, r := range recs {
		rs[i] = r
	}
	img, err := image.NewImage("c").Apply(1, rs...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func ent(parts ...string) []image.QuotaEntityData {
	var out []image.QuotaEntityData
	for i := 0; i < len(parts); i += 2 {
		d := image.QuotaEntityData{Type: parts[i]}
		if parts[i+1] != "<default>" {
			d.Name = new(parts[i+1])
		}
		out = append(out, d)
	}
	return out
}

// Kafka's arithmetic: a new client's rate is divided by at least
// samples-1 windows, and the throttle is the excess over the quota as a
// share of it, times that window.
func TestThrottleTime(t *testing.T) {
	img := quotaImage(t, &image.ClientQuotaRecord{Entity: ent("user", "alice"), Key: "producer_byte_rate", Value: 100})
	m := New("producer_byte_rate", 11, time.Second)
	t0 := time.UnixMilli(1_000_000)
	if got := m.Record(img, "alice", "app", 1000, t0); got != 0 {
		t.Fatalf("1000 bytes over 10 s at 100 B/s: throttle %d, want 0", got)
	}
	if got := m.Record(img, "alice", "app", 100, t0); got != 1000 {
		t.Fatalf("1100 bytes over 10 s at 100 B/s: throttle %d, want 1000 ms", got)
	}
	// Another client of alice shares her user quota.
	// 1200 bytes over 10.5 s: (114.3-100)/100 * 10500 ms.
	if got := m.Record(img, "alice", "other", 100, t0.Add(500*time.Millisecond)); got != 1500 {
		t.Fatalf("alice's second client: throttle %d, want 1500 ms", got)
	}
	// bob has no quota.
	if got := m.Record(img, "bob", "app", 1e9, t0); got != 0 {
		t.Fatalf("bob throttled %d ms", got)
	}
	// Eleven seconds after its last bytes the old sample is still kept,
	// as the one overlapping the measured span: 1300 bytes over 11 s.
	if got := m.Record(img, "alice", "app", 100, t0.Add(11*time.Second)); got != 2000 {
		t.Fatalf("11 s later: throttle %d, want 2000", got)
	}
	// Eleven seconds after its last event it is dropped.
	if got := m.Record(img, "bob", "app", 100, t0.Add(12*time.Second)); got != 0 {
		t.Fatalf("bob throttled")
	}
	if got := m.Record(img, "alice", "app", 100, t0.Add(23*time.Second)); got != 0 {
		t.Fatalf("after the window: throttle %d", got)
	}
	if got := m.MaxValueInWindow(img, "alice", "x"); got != 1000 {
		t.Fatalf("max value in window %v, want 100*10", got)
	}
	if got := m.MaxValueInWindow(img, "bob", "x"); !math.IsInf(got, 1) {
		t.Fatalf("bob's max value in window %v", got)
	}
}

// Kafka's precedence: user and client id, user and default client, user,
// default user and client id, default user and default client, default
// user, client id, default client.
func TestPrecedence(t *testing.T) {
	q := func(v float64, parts ...string) *image.ClientQuotaRecord {
		return &image.ClientQuotaRecord{Entity: ent(parts...), Key: "consumer_byte_rate", Value: v}
	}
	all := []*image.ClientQuotaRecord{
		q(1, "user", "u", "client-id", "c"),
		q(2, "user", "u", "client-id", "<default>"),
		q(3, "user", "u"),
		q(4, "user", "<default>", "client-id", "c"),
		q(5, "user", "<default>", "client-id", "<default>"),
		q(6, "user", "<default>"),
		q(7, "client-id", "c"),
		q(8, "client-id", "<default>"),
	}
	wantTags := []tags{{"u", "c"}, {"u", "c"}, {"u", ""}, {"u", "c"}, {"u", "c"}, {"u", ""}, {"", "c"}, {"", "c"}}
	for i := range all {
		img := quotaImage(t, all[i:]...)
		m := New("consumer_byte_rate", 11, time.Second)
		tg := m.sensorTags(img, "u", "c")
		if tg != wantTags[i] {
			t.Errorf("with quotas %d..8: tags %+v, want %+v", i+1, tg, wantTags[i])
		}
		if v, ok := m.limit(img, tg); !ok || v != float64(i+1) {
			t.Errorf("with quotas %d..8: limit %v %v, want %d", i+1, v, ok, i+1)
		}
	}
	// A producer quota is not a consumer one.
	img := quotaImage(t, &image.ClientQuotaRecord{Entity: ent("user", "u"), Key: "producer_byte_rate", Value: 1})
	if New("consumer_byte_rate", 11, time.Second).Enabled(img) {
		t.Fatal("consumer quotas enabled by a producer quota")
	}
}
