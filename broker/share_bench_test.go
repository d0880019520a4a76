package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkShareGroupConsume: b.N records of 100 bytes through a share
// group of one franz-go share consumer on one partition, each accepted.
func BenchmarkShareGroupConsume(b *testing.B) {
	ts := startServer(b, "")
	createTopic(b, ts.admin(b), "bq", 1, nil)
	// 16 KiB batches, the Java producer's batch.size default: a share
	// fetch acquires whole batches.
	adm := ts.client(b, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(16<<10))
	ctx := context.Background()
	req := groupConfigRequest("bg", "share.auto.offset.reset", "earliest")
	if resp, err := req.RequestWith(ctx, adm); err != nil || resp.Resources[0].ErrorCode != 0 {
		b.Fatalf("group config: %v %+v", err, resp)
	}
	val := make([]byte, 100)
	var wg sync.WaitGroup
	for range b.N {
		wg.Add(1)
		adm.Produce(ctx, &kgo.Record{Topic: "bq", Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	b.SetBytes(100)
	b.ResetTimer()
	cl := ts.client(b, kgo.ShareGroup("bg"), kgo.ConsumeTopics("bq"))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var got atomic.Int64
	for got.Load() < int64(b.N) && cctx.Err() == nil {
		fs := cl.PollFetches(cctx)
		got.Add(int64(len(fs.Records())))
		cl.MarkAcks(kgo.AckAccept)
	}
	if got.Load() < int64(b.N) {
		b.Fatalf("read %d of %d", got.Load(), b.N)
	}
}
