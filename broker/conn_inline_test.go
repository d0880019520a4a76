package broker

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
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
