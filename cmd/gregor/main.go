// Command gregor is a Kafka-compatible broker: `gregor serve` runs a node
// (broker and controller in one process by default); `gregor perf`
// measures a running cluster; `gregor version` prints the build.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/broker"
)

const usage = `usage: gregor <command> [flags]

commands:
  serve     run a node (broker and controller); see gregor serve -h
  perf      measure produce or consume throughput against a running cluster
  groups    list consumer groups, or describe one with its lag
  version   print the version
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = runServe(os.Args[2:], os.Stderr)
	case "perf":
		err = runPerf(os.Args[2:])
	case "groups":
		err = runGroups(os.Args[2:])
	case "version", "--version", "-v":
		err = runVersion(os.Stdout)
	case "help", "-h", "--help":
		fmt.Fprint(os.Stdout, usage)
	default:
		fmt.Fprintf(os.Stderr, "gregor: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gregor: %v\n", err)
		os.Exit(1)
	}
}

// runServe starts a node and runs it until SIGINT or SIGTERM, then shuts
// it down cleanly (checkpoints written, so the next start scans nothing).
func runServe(args []string, logOut io.Writer) error {
	start := time.Now()
	cfg, unknown, err := serveConfig(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
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
	log.Info("gregor started", "addr", srv.Addr().String(), "data", strings.Join(cfg.LogDirs, ","),
		"node_id", cfg.NodeID, "startup", time.Since(start).Round(time.Millisecond))

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
