package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

func initProducerID(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("init producer id: %v code %d", err, resp.ErrorCode)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func idempotentBatch(t *testing.T, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	var recs []protocol.Record
	for i, v := range values {
		recs = append(recs, protocol.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	now := time.Now().UnixMilli()
	b, err := protocol.BuildBatch(protocol.BatchHeader{FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, recs, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIdempotentProducer: a retried batch is answered with its original
// offsets and written once, also after a clean restart; a sequence gap
// answers OUT_OF_ORDER_SEQUENCE_NUMBER and an old epoch is fenced.
func TestIdempotentProducer(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "idem", 1, nil)
	cl := ts.client(t)
	pid, epoch := initProducerID(t, cl)
	pid2, _ := initProducerID(t, cl)
	if pid2 == pid || pid < 0 || epoch != 0 {
		t.Fatalf("producer ids %d and %d, epoch %d", pid, pid2, epoch)
	}
	c := dialRaw(t, ts.addr)
	b0 := idempotentBatch(t, pid, epoch, 0, "a", "b")
	if p := produceRaw(t, c, "idem", b0); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first batch: code %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, c, "idem", idempotentBatch(t, pid, epoch, 2, "c")); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("second batch: code %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, c, "idem", b0); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("retried first batch: code %d offset %d, want the original 0", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, c, "idem", idempotentBatch(t, pid, epoch, 5, "gap")); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: code %d", p.ErrorCode)
	}

	ts.Close()
	ts = startServer(t, ts.dir)
	c = dialRaw(t, ts.addr)
	retry := idempotentBatch(t, pid, epoch, 2, "c")
	if p := produceRaw(t, c, "idem", retry); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("retry after restart: code %d offset %d, want the original 2", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, c, "idem", idempotentBatch(t, pid, epoch, 3, "d")); p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("next batch after restart: code %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, c, "idem", idempotentBatch(t, pid, epoch+1, 0, "e")); p.ErrorCode != 0 {
		t.Fatalf("epoch bump: code %d", p.ErrorCode)
	}
	if p := produceRaw(t, c, "idem", idempotentBatch(t, pid, epoch, 4, "fenced")); p.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: code %d", p.ErrorCode)
	}
	got := consumeExactly(t, ts.addr, "idem", 5)
	for i, want := range []string{"a", "b", "c", "d", "e"} {
		if string(got[i].Value) != want || got[i].Offset != int64(i) {
			t.Fatalf("record %d: %q at %d", i, got[i].Value, got[i].Offset)
		}
	}
	// A new server's ids come after the old ones.
	pid3, _ := initProducerID(t, ts.client(t))
	if pid3 <= pid2 {
		t.Fatalf("producer id %d after restart, %d was issued before", pid3, pid2)
	}
	resp, err := (&kmsg.DescribeProducersRequest{Topics: []kmsg.DescribeProducersRequestTopic{{Topic: "idem", Partitions: []int32{0}}}}).RequestWith(testContext(t), ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	ap := resp.Topics[0].Partitions[0].ActiveProducers
	if len(ap) != 1 || ap[0].ProducerID != pid || ap[0].ProducerEpoch != 1 || ap[0].LastSequence != 0 {
		t.Fatalf("describe producers: %+v", ap)
	}
}
