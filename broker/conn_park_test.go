package broker

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// readParkResponse reads the next response frame on c and decodes it as req's
// answer, checking its correlation id.
func readParkResponse(t *testing.T, c net.Conn, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	frame, err := protocol.ReadFrame(c, 1<<30, nil)
	if err != nil {
		t.Fatalf("response %d (%s): %v", corr, kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		t.Fatalf("response with correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != apiKeyApiVersions {
		body = body[1:]
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode response %d: %v", corr, err)
	}
	return resp
}

// TestParkedLongPollKeepsOrder: a long poll's response, which the writer
// parks while it waits and the goroutine that completes it writes, stays
// ahead of the requests pipelined behind it on the connection, whether
// an append wakes it or its wait runs out; and a long poll alone on its
// connection is answered when the append comes.
func TestParkedLongPollKeepsOrder(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "park", 1, nil)
	id := topicID(t, ts, "park")
	cl := ts.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	c := dialRaw(t, ts.addr)
	c.nc.SetDeadline(time.Now().Add(60 * time.Second))

	versions := kmsg.NewPtrApiVersionsRequest()
	versions.Version = 3
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 12
	for round, woken := range []bool{true, false, true} {
		offset := int64(round) // each woken round appends one record; the unwoken one none
		if round == 2 {
			offset = 1
		}
		fetch := fetchReq("park", id, []int64{offset}, 0, -1)
		fetch.Version = 13
		fetch.MinBytes, fetch.MaxWaitMillis = 1, 10000
		if !woken {
			fetch.MaxWaitMillis = 300
		}
		base := int32(10 * round)
		var out []byte
		out = append(out, encodeRequest(fetch, base)...)
		out = append(out, encodeRequest(versions, base+1)...)
		out = append(out, encodeRequest(meta, base+2)...)
		start := time.Now()
		c.write(out)
		if woken {
			// Nothing may overtake the waiting fetch.
			c.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			var b [1]byte
			if n, err := c.nc.Read(b[:]); n > 0 || err == nil {
				t.Fatalf("round %d: a response came before the long poll's", round)
			}
			c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			produceN(t, cl, "park", 0, 1)
		}
		fr := readParkResponse(t, c.nc, fetch, base).(*kmsg.FetchResponse)
		waited := time.Since(start)
		p := fr.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("round %d: fetch error %d", round, p.ErrorCode)
		}
		if got := len(p.RecordBatches) > 0; got != woken {
			t.Fatalf("round %d: records %v, want %v", round, got, woken)
		}
		if !woken && waited < 250*time.Millisecond {
			t.Fatalf("round %d: the unwoken long poll answered after %v, before its wait", round, waited)
		}
		if vr := readParkResponse(t, c.nc, versions, base+1).(*kmsg.ApiVersionsResponse); vr.ErrorCode != 0 {
			t.Fatalf("round %d: api versions error %d", round, vr.ErrorCode)
		}
		if mr := readParkResponse(t, c.nc, meta, base+2).(*kmsg.MetadataResponse); len(mr.Brokers) == 0 {
			t.Fatalf("round %d: metadata without brokers", round)
		}
	}

	// A long poll alone on its connection.
	fetch := fetchReq("park", id, []int64{2}, 0, -1)
	fetch.Version = 13
	fetch.MinBytes, fetch.MaxWaitMillis = 1, 10000
	c.write(encodeRequest(fetch, 100))
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	produceN(t, cl, "park", 0, 1)
	fr := readParkResponse(t, c.nc, fetch, 100).(*kmsg.FetchResponse)
	if p := fr.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("lone long poll: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("lone long poll answered %v after the append", waited)
	}
}

// TestParkedLongPollClientGone: a client that closes its connection while
// its long poll is parked ends the connection at once (the long poll
// stops with it), not when the wait would have run out.
func TestParkedLongPollClientGone(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "gone", 1, nil)
	id := topicID(t, ts, "gone")
	for i := range 10 {
		cli, srv := net.Pipe()
		done := make(chan struct{})
		go ts.Server.serveConn(srv, "PLAINTEXT", func() { close(done) })
		fetch := fetchReq("gone", id, []int64{0}, 0, -1)
		fetch.Version = 13
		fetch.MinBytes, fetch.MaxWaitMillis = 1, 60000
		versions := kmsg.NewPtrApiVersionsRequest()
		versions.Version = 3
		out := append(encodeRequest(fetch, int32(i)), encodeRequest(versions, int32(i)+1)...)
		if _, err := cli.Write(out); err != nil {
			t.Fatalf("write request: %v", err)
		}
		time.Sleep(time.Duration(i*10) * time.Millisecond)
		cli.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %d: serveConn did not end after its client left during a long poll", i)
		}
	}
}
