// Command gregor is a Kafka-compatible broker: `gregor serve` runs a node
// (broker and controller in one process by default); `gregor perf`
// measures a running cluster; `gregor version` prints the build; the
// other commands (`gregor topic create`, `gregor consume`, ...) administer
// a running cluster, as Kafka's tools and Redpanda's rpk do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/broker"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/console"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// runMain runs the command named by args and returns the exit status: 0
// done (or help asked for), 1 failed, 2 a mistake on the command line,
// 130 interrupted (SIGINT or SIGTERM) after printing what it had done.
func runMain(args []string, in io.Reader, out, errOut io.Writer) int {
	err := dispatch(commands(), nil, args, in, out, errOut)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(errOut, "gregor: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	var ie *interruptedError
	if errors.As(err, &ie) {
		return interruptedExit
	}
	return 1
}

// runServe starts a node and runs it until SIGINT or SIGTERM, then shuts
// it down cleanly (checkpoints written, so the next start scans nothing).
func runServe(args []string, logOut io.Writer) error {
	start := time.Now()
	cfg, unknown, err := serveConfig(args)
	if err != nil {
		return err
	}
	log, err := newLogger(logOut, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	for _, name := range unknown {
		log.Warn("ignoring unknown property", "name", name)
	}
	// Accepted for compatibility with Kafka's server.properties, but
	// without effect: each one set is named (docs/configuration.md).
	for _, u := range cfg.UnsupportedSettings() {
		log.Warn("property not supported, it has no effect", "name", u.Name, "value", u.Value, "why", u.Why)
	}
	opts := broker.Options{Logger: log}
	var con *console.Console
	if cfg.HTTPListener != "" && cfg.HTTPConsoleEnable {
		sec, err := consoleSecurity(cfg)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		con = console.New(console.Config{ReadOnly: cfg.HTTPConsoleReadOnly, LoopbackOnly: loopbackListener(cfg.HTTPListener),
			Security: sec, Logger: log.With("component", "console")})
		opts.HTTPHandler = con.Handler()
	}
	srv, err := broker.New(cfg, opts)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return err
	}
	if con != nil {
		startConsole(con, srv, cfg.HTTPConsoleListener, log)
		defer con.Close()
	}
	// Caught from before "gregor started" is logged: whoever waits for
	// that line may signal at once, and the default action would kill the
	// process without a clean shutdown.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	httpAddr := "off"
	if a := srv.HTTPAddr(); a != nil {
		httpAddr = a.String()
	}
	log.Info("gregor started", "addr", srv.Addr().String(), "data", strings.Join(cfg.LogDirs, ","),
		"node_id", cfg.NodeID, "http", httpAddr, "startup", time.Since(start).Round(time.Millisecond))

	memCtx, stopMem := context.WithCancel(context.Background())
	go returnIdleMemory(memCtx, log)
	got := <-sig
	stopMem()
	log.Info("shutting down", "signal", got.String())
	if err := srv.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped cleanly")
	return nil
}

// startConsole connects the web console to the node's first PLAINTEXT
// client listener. The console holds no credentials: where every
// listener asks for TLS or SASL it stays off and says so, rather than
// find a way around them (docs/operations.md).
func startConsole(con *console.Console, srv *broker.Server, listener string, log *slog.Logger) {
	log = log.With("component", "console")
	seed, name, err := consoleSeed(srv.ClientListeners(), listener)
	if err == nil {
		err = con.Start(seed)
	}
	if err != nil {
		con.Off(err.Error())
		log.Warn("web console off", "err", err)
		return
	}
	log.Info("web console on", "listener", name, "via", seed)
}

// loopbackListener reports whether HOST:PORT binds only loopback
// (localhost or a loopback IP), as the embedded defaults do.
func loopbackListener(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// consoleSecurity turns http.console.sasl.* and http.console.ssl.* into
// the console's client options, as the CLI's flags of the same meaning
// (config.checkConsole has refused incomplete settings).
func consoleSecurity(cfg *config.Broker) ([]kgo.Opt, error) {
	proto := cfg.ListenerSecurityProtocolMap[cfg.HTTPConsoleListener]
	sec := clientSecurity{
		mechanism: cfg.HTTPConsoleSASLMechanism,
		user:      cfg.HTTPConsoleSASLUsername,
		password:  cfg.HTTPConsoleSASLPassword,
		tls:       proto == "SSL" || proto == "SASL_SSL",
		tlsCA:     cfg.HTTPConsoleSSLTruststore,
		// Kafka's PEM keystore file holds the certificate chain and the
		// key together.
		tlsCert: cfg.HTTPConsoleSSLKeystore,
		tlsKey:  cfg.HTTPConsoleSSLKeystore,
	}
	opts, err := sec.opts(flag.NewFlagSet("console", flag.ContinueOnError), "http.console")
	if err != nil {
		return nil, err
	}
	return opts, nil
}

// consoleSeed picks the address the console connects to: the client
// listener named by http.console.listener (want), else the first
// PLAINTEXT one; on loopback when it is bound to every interface.
func consoleSeed(listeners []broker.ClientListener, want string) (seed, name string, err error) {
	for _, l := range listeners {
		if want != "" && l.Name != want || want == "" && l.Protocol != "PLAINTEXT" {
			continue
		}
		addr, ok := l.Addr.(*net.TCPAddr)
		if !ok {
			continue
		}
		host := addr.IP
		if host.IsUnspecified() {
			// Bound to every interface ([::] takes IPv4 too).
			host = net.IPv4(127, 0, 0, 1)
		}
		return net.JoinHostPort(host.String(), strconv.Itoa(addr.Port)), l.Name, nil
	}
	if want != "" {
		return "", "", fmt.Errorf("http.console.listener %s is not bound", want)
	}
	return "", "", errors.New("this node has no PLAINTEXT client listener, and the console has no TLS or SASL credentials of its own (http.console.listener, http.console.sasl.*, http.console.ssl.*)")
}
