package raftmeta

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNode starts a single-voter node in dir and closes it when the test ends.
func startNode(t testing.TB, dir string, mod ...func(*Config)) *Node {
	t.Helper()
	cfg := Config{NodeID: 1, Dir: dir, Logger: discardLogger(), ClusterID: "test-cluster"}
	for _, m := range mod {
		m(&cfg)
	}
	n, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// startController starts a node and a controller and registers broker 1.
func startController(t testing.TB, dir string, mod ...func(*Config)) (*Node, *Controller) {
	t.Helper()
	n := startNode(t, dir, mod...)
	c := n.Controller()
	if n.IsLeader() {
		if _, err := c.RegisterBroker(ctxT(t), RegisterBrokerRecord{BrokerID: 1, IncarnationID: NewUUID()}); err != nil {
			t.Fatalf("RegisterBroker: %v", err)
		}
	}
	return n, c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
