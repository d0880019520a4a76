package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProduceToFetch measures the broker's end-to-end path as a
// latency-sensitive client drives it, over real sockets: one client
// long-polls a partition (MinBytes 1, MaxWait 5 s) while another
// produces one 1 KiB record with acks=all; an op runs from the Produce
// request's send to the fetch response carrying the record, which covers
// the append, the acknowledgement, the high watermark's advance, the
// long poll's wake-up and both responses' writes. p50 and p99 of the ops
// are reported besides the mean.
func BenchmarkProduceToFetch(b *testing.B) {
	ts := startServer(b, "")
	createTopic(b, ts.admin(b), "lat", 1, nil)
	id := topicID(b, ts, "lat")
	prod, cons := ts.client(b), ts.client(b)
	ctx := testContext(b)
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = "lat", id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = benchBatch(b, 1, 1024)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	// The reader hands on the log end it has read up to after each
	// fetch that brought records.
	got := make(chan int64, 1)
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		var offset int64
		for {
			fr := fetchReq("lat", id, []int64{offset}, 0, -1)
			fr.MaxWaitMillis, fr.MinBytes = 5000, 1
			resp, err := fr.RequestWith(ctx, cons)
			if err != nil {
				readErr <- err
				return
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 {
				readErr <- kerr.ErrorForCode(p.ErrorCode)
				return
			}
			if p.HighWatermark > offset {
				offset = p.HighWatermark
				select {
				case got <- offset:
				case <-stop:
					return
				}
			}
		}
	}()
	defer close(stop)
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		resp, err := req.RequestWith(ctx, prod)
		if err != nil {
			b.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatalf("produce error %d", code)
		}
		for done := false; !done; {
			select {
			case off := <-got:
				done = off >= int64(i+1)
			case err := <-readErr:
				b.Fatalf("fetch: %v", err)
			}
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds()), "p99-µs")
}
