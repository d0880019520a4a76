package controller

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// nodeConfig configures a testNode: a raft node and its controller.
type nodeConfig struct {
	raftnode.Config
	Controller Config
}

// testNode is a raft node with its controller, composed as package
// raftmeta composes them (which imports this package, so its tests cannot
// use it).
type testNode struct {
	*raftnode.Node
	ctrl    *Controller
	serving atomic.Pointer[Controller]
}

func startWith(cfg nodeConfig) (*testNode, error) {
	n := &testNode{}
	cfg.Config.Handlers = Handlers(n.serving.Load)
	rn, err := raftnode.Start(cfg.Config)
	if err != nil {
		return nil, err
	}
	n.Node = rn
	n.ctrl = New(rn, discardLogger(), cfg.Controller)
	n.serving.Store(n.ctrl)
	return n, nil
}

func (n *testNode) Controller() *Controller { return n.ctrl }

func (n *testNode) Close() error {
	n.ctrl.Close()
	err := n.Node.Close()
	n.serving.Store(nil)
	return err
}

// startNode starts a single-voter node in dir and closes it when the test ends.
func startNode(t testing.TB, dir string, mod ...func(*nodeConfig)) *testNode {
	t.Helper()
	cfg := nodeConfig{Config: raftnode.Config{NodeID: 1, Dir: dir, Logger: discardLogger(), ClusterID: "test-cluster"}}
	for _, m := range mod {
		m(&cfg)
	}
	n, err := startWith(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// startController starts a node and a controller and registers broker 1.
func startController(t testing.TB, dir string, mod ...func(*nodeConfig)) (*testNode, *Controller) {
	t.Helper()
	n := startNode(t, dir, mod...)
	c := n.Controller()
	if n.IsLeader() {
		if _, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: image.NewUUID()}); err != nil {
			t.Fatalf("RegisterBroker: %v", err)
		}
	}
	return n, c
}

// serveOne starts a single-voter node of cluster "a" with a TCP transport
// listening on loopback.
func serveOne(t testing.TB) (*testNode, string) {
	t.Helper()
	tr, err := raftnode.NewTCPTransport(raftnode.TransportConfig{NodeID: 1, ClusterID: "a", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, t.TempDir(), func(c *nodeConfig) { c.ClusterID = "a"; c.Transport = tr })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Serve(ln)
	}()
	t.Cleanup(func() {
		n.Close()
		tr.Close()
		<-done
	})
	return n, ln.Addr().String()
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func strp(s string) *string { return &s }

func createTopic(t testing.TB, c *Controller, name string, partitions int32) CreateTopicResult {
	t.Helper()
	res := c.CreateTopics(ctxT(t), []CreateTopic{{Name: name, NumPartitions: partitions, ReplicationFactor: 1}}, false)
	if len(res) != 1 || res[0].Err != nil {
		t.Fatalf("create topic %s: %+v", name, res)
	}
	return res[0]
}
