package broker

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/fetch"
)

// TestInlineAnswerWriteFails is the hang TestClientQuotaRates found: a
// response written by the reader itself (answer) to a client already gone
// failed, and the writer's drain waited for the queue to close, which only
// that same reader does. The connection must end instead.
func TestInlineAnswerWriteFails(t *testing.T) {
	ts := startServer(t, "")
	for i := range 20 {
		cli, srv := net.Pipe()
		done := make(chan struct{})
		go func() {
			ts.Server.serveConn(srv, "PLAINTEXT", nil)
			close(done)
		}()
		// The pipe's write returns once the server has read the whole
		// frame; the answer (ready at once) then fails against the closed
		// end, whichever of the two comes first.
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 0
		if _, err := cli.Write(encodeRequest(req, int32(i))); err != nil {
			t.Fatalf("write request: %v", err)
		}
		cli.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %d: serveConn did not end after its answer failed to write", i)
		}
	}
}

// A ready fetch answer with more records than maxInlineRecordBytes goes
// to the writer goroutine on a consumer's connection, so that its reader
// goes on reading, and is written by the reader on a follower's, which
// has no other request in flight; an answer not ready is parked either way.
func TestInlineAnswerFollowerRecords(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "inlinebig", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for range 100 {
		recs = append(recs, &kgo.Record{Topic: "inlinebig", Partition: 0, Value: make([]byte, 2000)})
	}
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := ts.parts.get("inlinebig", 0)
	rr, err := p.Log.ReadSlice(0, 1<<20, p.Log.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Slice == nil || rr.Slice.Len() <= maxInlineRecordBytes {
		t.Fatalf("read %v, want a file slice of more than %d bytes", rr.Slice, maxInlineRecordBytes)
	}
	resp := &fetch.ZeroCopyResponse{FetchResponse: kmsg.NewPtrFetchResponse(), Records: []fetch.FileRecords{{Slice: rr.Slice}}}
	defer resp.Release()
	ready := &slot{done: make(chan struct{}), resp: resp}
	close(ready.done)
	if inlineAnswer(ready, false) {
		t.Fatal("a consumer's answer of records read from files is written by its reader")
	}
	if !inlineAnswer(ready, true) {
		t.Fatal("a follower's answer of records read from files goes to the writer goroutine")
	}
	waiting := &slot{done: make(chan struct{})}
	if !inlineAnswer(waiting, false) || !inlineAnswer(waiting, true) {
		t.Fatal("an answer not ready is not parked by the reader")
	}
}
