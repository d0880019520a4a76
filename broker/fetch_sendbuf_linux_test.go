//go:build linux

package broker

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/broker/internal/fetch"
)

// TestConsumerFetchSendfileCalls consumes 16 partitions of 1 KiB records
// with franz-go (its defaults: fetch.max.bytes 50 MiB, 1 MiB a partition)
// and counts the broker's sendfile calls: the consumer's connection has
// its send buffer raised to hold a response (sizeFetchConn), so a
// partition's megabyte goes out in about one call, where the 100 KiB of
// socket.send.buffer.bytes took ten and more, each but the last ending on
// a full socket and a wait in the poller. Every record is checked.
func TestConsumerFetchSendfileCalls(t *testing.T) {
	const parts, batches, perBatch = 16, 24, 64 // 1.5 MiB a partition
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "sf", parts, nil)
	batch := recordBatch(t, perBatch, 1024)
	for p := range parts {
		produceBatches(t, ts, "sf", int32(p), batch, batches)
	}
	calls0, slices0 := fetch.SendfileCalls()
	bytes0 := fetch.SendfileBytes()
	consumeRecordBatches(t, ts.addr, "sf", parts, batches*perBatch, perBatch, 1024)
	calls1, slices1 := fetch.SendfileCalls()
	calls, slices, sent := calls1-calls0, slices1-slices0, fetch.SendfileBytes()-bytes0
	if want := int64(parts * batches * len(batch)); sent < want {
		t.Fatalf("%d bytes sent with sendfile, want at least the %d produced", sent, want)
	}
	// Each wait for the client frees at least a third of the buffer
	// (the kernel wakes a writer then), so besides one call a slice
	// there is at most one more per third of the buffer sent.
	sndbuf := 2 * min(wmemMax(t), 50<<20) // the kernel doubles SO_SNDBUF
	limit := 2*slices + 3*sent/int64(sndbuf)
	t.Logf("%d sendfile calls for %d slices, %d bytes (send buffer %d, limit %d)", calls, slices, sent, sndbuf, limit)
	if calls > limit {
		t.Fatalf("%d sendfile calls for %d slices of %d bytes: more than %d, as with a send buffer far below the response", calls, slices, sent, limit)
	}
}

// wmemMax is the kernel's cap on SO_SNDBUF (net.core.wmem_max).
func wmemMax(t *testing.T) int {
	b, err := os.ReadFile("/proc/sys/net/core/wmem_max")
	if err != nil {
		t.Skipf("net.core.wmem_max: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("net.core.wmem_max %q: %v", b, err)
	}
	return n
}

// consumeRecordBatches reads every partition of topic from the start
// with franz-go until each has n records, checking each record is where
// recordBatch put it: offsets in order, the value at an offset size bytes
// of 'a' plus its place in its batch of perBatch.
func consumeRecordBatches(t *testing.T, addr, topic string, parts, n, perBatch, size int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := make([]int64, parts)
	got := 0
	ctx := testContext(t)
	for got < parts*n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, parts*n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			want := byte('a' + r.Offset%int64(perBatch))
			if len(r.Value) != size || !bytes.Equal(r.Value, bytes.Repeat([]byte{want}, size)) {
				t.Fatalf("partition %d offset %d: value of %d bytes, want %d of %q", r.Partition, r.Offset, len(r.Value), size, want)
			}
			got++
		})
	}
}
