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
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/broker"
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
	srv, err := broker.New(cfg, broker.Options{Logger: log})
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return err
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
