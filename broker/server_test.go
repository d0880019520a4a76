package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/config"
)

// testServer runs a real server on a loopback port with its data in dir.
type testServer struct {
	*Server
	dir  string
	addr string
}

func testConfig(t testing.TB, dir string) *config.Broker {
	t.Helper()
	cfg, _, err := config.Parse(config.DevProperties())
	if err != nil {
		t.Fatal(err)
	}
	cfg.LogDirs = []string{dir}
	for i := range cfg.Listeners {
		cfg.Listeners[i].Host = "127.0.0.1"
		cfg.Listeners[i].Port = 0
	}
	cfg.AdvertisedListeners = nil
	cfg.HTTPListener = "" // tests that want it set their own port
	return cfg
}

func testLogger() *slog.Logger {
	if os.Getenv("GREGOR_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startServer starts a server in dir (a new temporary one when empty) and
// closes it when the test ends.
func startServer(t testing.TB, dir string, tweak ...func(*config.Broker)) *testServer {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := testConfig(t, dir)
	for _, f := range tweak {
		f(cfg)
	}
	s, err := New(cfg, Options{Logger: testLogger()})
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatalf("start server: %v", err)
	}
	ts := &testServer{Server: s, dir: dir, addr: s.Addr().String()}
	t.Cleanup(func() { s.Close() })
	return ts
}

// client returns a franz-go client for the server, closed at test end.
func (ts *testServer) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(ts.addr), kgo.RetryTimeout(10 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (ts *testServer) admin(t testing.TB) *kadm.Client {
	return kadm.NewClient(ts.client(t))
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t testing.TB, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(testContext(t), partitions, 1, configs, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
	}
	waitTopicReady(t, adm, name, partitions)
}

// waitTopicReady waits until every partition of a topic just created
// answers ListOffsets on its leader: CreateTopics answers once the topic
// is committed, and the brokers create its logs afterwards, as Kafka's
// do, so a request sent to a partition at once may find no log yet.
func waitTopicReady(t testing.TB, adm *kadm.Client, name string, partitions int32) {
	t.Helper()
	ctx := testContext(t)
	var last error
	for {
		offsets, err := adm.ListEndOffsets(ctx, name)
		last = err
		if err == nil {
			last = offsets.Error()
			n := 0
			offsets.Each(func(kadm.ListedOffset) { n++ })
			if last == nil && (partitions < 0 || n == int(partitions)) {
				return
			}
			if last == nil {
				last = fmt.Errorf("%d partitions listed, want %d", n, partitions)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s not ready: %v", name, last)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
