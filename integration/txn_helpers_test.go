package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Helpers shared by the idempotence and transaction tests (txn_*_test.go).

// startProxy starts a proxy in front of target, closed when the test ends.
func startProxy(t *testing.T, target string, seed uint64) *proxy {
	t.Helper()
	px, err := newProxy(target, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.close)
	return px
}

// startBehindProxy starts gregor on port advertising the proxy's address,
// so clients that bootstrap anywhere reach it only through the proxy.
func startBehindProxy(t *testing.T, dir string, port int, px *proxy, extra ...string) *process {
	t.Helper()
	args := append([]string{"--override", "advertised.listeners=PLAINTEXT://" + px.addr()}, extra...)
	return startGregor(t, dir, port, args...)
}

// fastRetries makes a client retry at once and often, so faults that drop
// connections cost milliseconds rather than kgo's growing backoff and its
// five seconds between metadata refreshes (a failed produce waits for
// one).
func fastRetries() []kgo.Opt {
	return []kgo.Opt{
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		kgo.RetryTimeout(2 * time.Minute),
	}
}

// stableOffsets returns each partition's last stable offset
// (ListOffsets read_committed) and end offset (read_uncommitted).
func stableOffsets(ctx context.Context, adm *kadm.Client, topic string) (lso, end map[int32]int64, err error) {
	committed, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("list read_committed offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	lso, end = make(map[int32]int64), make(map[int32]int64)
	var errs []string
	committed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Sprintf("%d: %v", o.Partition, o.Err))
		}
		lso[o.Partition] = o.Offset
	})
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Sprintf("%d: %v", o.Partition, o.Err))
		}
		end[o.Partition] = o.Offset
	})
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("list offsets of %s: %s", topic, strings.Join(errs, "; "))
	}
	return lso, end, nil
}

// unstable lists the partitions whose last stable offset is below the end
// offset.
func unstable(lso, end map[int32]int64) []string {
	var out []string
	for p, e := range end {
		if lso[p] != e {
			out = append(out, fmt.Sprintf("%d: lso %d end %d", p, lso[p], e))
		}
	}
	sort.Strings(out)
	return out
}

// waitStable polls until every partition of topic has its last stable
// offset at its end offset and returns how long that took.
func waitStable(t *testing.T, addr, topic string, within time.Duration) time.Duration {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr, fastRetries()...))
	start := time.Now()
	var last []string
	for time.Since(start) < within {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lso, end, err := stableOffsets(ctx, adm, topic)
		cancel()
		if err == nil {
			if last = unstable(lso, end); len(last) == 0 {
				return time.Since(start)
			}
		} else {
			last = []string{err.Error()}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: last stable offsets still behind after %v: %v", topic, within, last)
	return 0
}

// readIsolation consumes topic from the start at the given isolation level
// until want records arrived (or ctx gives up), then polls for settle more
// to catch records that should not be there.
func readIsolation(t *testing.T, addr, topic string, iso kgo.IsolationLevel, want int, settle time.Duration) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	var out []*kgo.Record
	ctx := testContext(t, 90*time.Second)
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read %d of %d records", topic, len(out), want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	extra, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	for extra.Err() == nil {
		out = append(out, cl.PollFetches(extra).Records()...)
	}
	return out
}

// valuesOf returns the records' values as strings.
func valuesOf(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// asRead converts records to the history checker's form.
func asRead(recs []*kgo.Record) []readRecord {
	out := make([]readRecord, len(recs))
	for i, r := range recs {
		out[i] = readRecord{partition: r.Partition, offset: r.Offset, value: r.Value}
	}
	return out
}

// flattenLog joins readAll's per-partition records.
func flattenLog(log map[int32][]*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, recs := range log {
		out = append(out, recs...)
	}
	return out
}

// firstProblems keeps a failure message readable.
func firstProblems(problems []string, n int) string {
	if len(problems) > n {
		return strings.Join(problems[:n], "\n") + fmt.Sprintf("\n... and %d more", len(problems)-n)
	}
	return strings.Join(problems, "\n")
}
