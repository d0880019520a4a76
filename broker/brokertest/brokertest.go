// Package brokertest starts a real single-node Gregor server on a
// loopback port for tests in other packages and modules (compat, tools).
package brokertest

import (
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/gregorbroker/gregor/broker"
	"github.com/gregorbroker/gregor/config"
)

// Start runs a server with its data in a new temporary directory and
// returns its address (host:port). The server stops when the test ends.
// tweak may change the configuration before start.
func Start(t testing.TB, tweak ...func(*config.Broker)) string {
	t.Helper()
	// The properties `gregor serve` runs on without a file: internal
	// topics with replication factor 1.
	cfg, _, err := config.Parse(config.DevProperties())
	if err != nil {
		t.Fatal(err)
	}
	cfg.LogDirs = []string{t.TempDir()}
	for i := range cfg.Listeners {
		cfg.Listeners[i].Host = "127.0.0.1"
		cfg.Listeners[i].Port = 0
	}
	cfg.AdvertisedListeners = nil
	for _, f := range tweak {
		f(cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("GREGOR_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	s, err := broker.New(cfg, broker.Options{Logger: log})
	if err != nil {
		t.Fatalf("start gregor: %v", err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("start gregor: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Addr().String()
}
