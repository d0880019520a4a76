// Package console is Gregor's web console: static pages (embedded, no
// build step) and a JSON API that reads the cluster the way a Kafka user
// would, as a franz-go client (kgo/kadm) of the node's own client
// listener. It imports nothing of the broker: cmd/gregor hands the
// console's handler to the broker's HTTP listener (broker.Options.
// HTTPHandler) and tells it where to connect once the listeners are bound.
//
// Going through the Kafka protocol means the console sees and may do
// exactly what any client of that listener may: the broker authenticates
// and authorizes it as it does everyone else (docs/operations.md).
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

//go:embed static
var static embed.FS

// Config is how the console runs.
type Config struct {
	// ReadOnly refuses to produce (http.console.read.only).
	ReadOnly bool
	// SampleEvery is how often each group's lag is sampled for the lag
	// history; default 10s.
	SampleEvery time.Duration
	// Samples is how many samples a group's history keeps; default 360
	// (an hour at 10s).
	Samples int
	// MaxGroups bounds how many groups have a history; default 1000.
	MaxGroups int
	// LoopbackOnly answers only requests addressed to a loopback host
	// (localhost, 127.0.0.0/8, [::1]): set when the HTTP listener is
	// bound to loopback, so that a web page whose name was rebound to
	// 127.0.0.1 (DNS rebinding) can neither read through the console nor
	// produce.
	LoopbackOnly bool
	// Security are the client options (kgo.SASL, kgo.DialTLSConfig) every
	// client of the console connects with, for a listener that asks for
	// SASL or TLS (http.console.sasl.*, http.console.ssl.*): the broker
	// then authenticates and authorizes the console as that user.
	Security []kgo.Opt
	Logger   *slog.Logger
}

// Console serves the pages and the API. Its zero state (before Start or
// after Off) serves the pages, whose API calls answer 503 with the reason.
type Console struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex // guards seeds, off, cl, adm, prod
	seeds []string
	off   string
	cl    *kgo.Client
	adm   *kadm.Client
	// prod produces the form's records: one idempotent producer (one
	// producer id) for the console's life, not one per record.
	prod *kgo.Client

	lag    *lagHistory
	cancel context.CancelFunc
	done   chan struct{}
}

// New makes a console that is not connected yet.
func New(cfg Config) *Console {
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 10 * time.Second
	}
	if cfg.Samples <= 0 {
		cfg.Samples = 360
	}
	if cfg.MaxGroups <= 0 {
		cfg.MaxGroups = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Console{cfg: cfg, log: cfg.Logger, off: "starting", lag: newLagHistory(cfg.Samples, cfg.MaxGroups)}
}

// Start connects the console to seeds (host:port of a client listener,
// which Config.Security must satisfy) and starts sampling group lag.
func (c *Console) Start(seeds ...string) error {
	cl, err := kgo.NewClient(c.clientOpts(seeds)...)
	if err != nil {
		return fmt.Errorf("console: connect to %v: %w", seeds, err)
	}
	prod, err := kgo.NewClient(c.clientOpts(seeds,
		kgo.RecordPartitioner(formPartitioner{kgo.StickyKeyPartitioner(nil)}),
		kgo.ProduceRequestTimeout(10*time.Second), kgo.RecordDeliveryTimeout(15*time.Second))...)
	if err != nil {
		cl.Close()
		return fmt.Errorf("console: connect to %v: %w", seeds, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.seeds, c.cl, c.adm, c.prod, c.off = seeds, cl, kadm.NewClient(cl), prod, ""
	c.cancel, c.done = cancel, make(chan struct{})
	c.mu.Unlock()
	go c.sampleLoop(ctx)
	return nil
}

// clientOpts are the options of a console client of seeds: its id, its
// security, then more.
func (c *Console) clientOpts(seeds []string, more ...kgo.Opt) []kgo.Opt {
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("gregor-console")}, c.cfg.Security...)
	return append(opts, more...)
}

// Off makes the console answer every API call with reason (the pages
// show it): used when it has no listener it may connect to.
func (c *Console) Off(reason string) {
	c.mu.Lock()
	c.off = reason
	c.mu.Unlock()
}

// Close stops the sampler and the client.
func (c *Console) Close() {
	c.mu.Lock()
	cancel, done, cl, prod := c.cancel, c.done, c.cl, c.prod
	c.cancel, c.cl, c.adm, c.prod, c.off = nil, nil, nil, nil, "stopped"
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if cl != nil {
		cl.Close()
	}
	if prod != nil {
		prod.Close()
	}
}

// clients returns the connected client, or an error saying why the
// console is off.
func (c *Console) clients() (*kgo.Client, *kadm.Client, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off != "" {
		return nil, nil, nil, errOff{c.off}
	}
	return c.cl, c.adm, c.seeds, nil
}

type errOff struct{ reason string }

func (e errOff) Error() string { return "console off: " + e.reason }

// Handler serves the pages at / and the API under /api/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	mux.Handle("GET /", http.FileServerFS(files))
	mux.HandleFunc("GET /api/status", c.status)
	mux.HandleFunc("GET /api/cluster", c.api(c.cluster))
	mux.HandleFunc("GET /api/topics", c.api(c.topics))
	mux.HandleFunc("GET /api/topics/{topic}", c.api(c.topic))
	mux.HandleFunc("GET /api/topics/{topic}/records", c.api(c.records))
	mux.HandleFunc("POST /api/topics/{topic}/records", c.api(c.produce))
	mux.HandleFunc("GET /api/groups", c.api(c.groups))
	mux.HandleFunc("GET /api/groups/{group}", c.api(c.group))
	mux.HandleFunc("GET /api/transactions", c.api(c.transactions))
	if !c.cfg.LoopbackOnly {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "the console answers only requests to localhost: this listener is bound to loopback", http.StatusMisdirectedRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a request's Host names this machine's
// loopback: localhost (or a name under .localhost) or a loopback IP.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpError is an error with the status it is answered with.
type httpError struct {
	code int
	err  error
}

func (e httpError) Error() string { return e.err.Error() }

func badRequest(format string, args ...any) error {
	return httpError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// api adapts a handler returning a value to JSON, errors included.
func (c *Console) api(h func(*http.Request, *kgo.Client, *kadm.Client, []string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cl, adm, seeds, err := c.clients()
		var v any
		if err == nil {
			v, err = h(r, cl, adm, seeds)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err != nil {
			code := http.StatusBadGateway // the cluster answered with an error, or not at all
			var he httpError
			var off errOff
			switch {
			case errors.As(err, &he):
				code = he.code
			case errors.As(err, &off):
				code = http.StatusServiceUnavailable
			}
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		if err := json.NewEncoder(w).Encode(v); err != nil {
			c.log.Debug("console: write answer", "err", err)
		}
	}
}

// status tells the pages whether the console is on, and whether it may
// produce.
func (c *Console) status(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	st := struct {
		On       bool     `json:"on"`
		Off      string   `json:"off,omitempty"`
		ReadOnly bool     `json:"read_only"`
		Seeds    []string `json:"seeds"`
		Sample   int64    `json:"lag_sample_ms"`
	}{On: c.off == "", Off: c.off, ReadOnly: c.cfg.ReadOnly, Seeds: c.seeds, Sample: c.cfg.SampleEvery.Milliseconds()}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(st)
}

// errString is err's text, "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
