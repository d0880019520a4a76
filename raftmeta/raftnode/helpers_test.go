package raftnode

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

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
