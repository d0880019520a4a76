package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/config"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestServeConfigDefaults(t *testing.T) {
	b, unknown, err := serveConfigOut(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 0 {
		t.Errorf("unknown = %q", unknown)
	}
	want := []config.Listener{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}, {Name: "CONTROLLER", Host: "localhost", Port: 9093}}
	if !slices.Equal(b.Listeners, want) || !slices.Equal(b.LogDirs, []string{"./data"}) || b.NodeID != 1 {
		t.Errorf("listeners %v, dirs %v, node %d", b.Listeners, b.LogDirs, b.NodeID)
	}
	if !b.IsBroker() || !b.IsController() {
		t.Errorf("roles %v", b.ProcessRoles)
	}
	// A single node cannot host three replicas of the internal topics.
	if b.OffsetsTopicReplicationFactor != 1 || b.TransactionStateLogReplicationFactor != 1 || b.TransactionStateLogMinISR != 1 {
		t.Errorf("internal topics: RF %d / %d, min ISR %d", b.OffsetsTopicReplicationFactor, b.TransactionStateLogReplicationFactor, b.TransactionStateLogMinISR)
	}
}

func TestServeConfigFlags(t *testing.T) {
	file := writeFile(t, `
process.roles=broker,controller
node.id=3
controller.quorum.voters=3@localhost:19093
listeners=PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093
advertised.listeners=PLAINTEXT://broker3.example.com:19092
log.dirs=/from/file
num.partitions=2
made.up.name=1
`)
	tests := []struct {
		name       string
		args       []string
		partitions int32
		dirs       []string
		listeners  string
		advertised string
	}{
		{"file only", []string{"--config", file}, 2, []string{"/from/file"},
			"PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093", "PLAINTEXT://broker3.example.com:19092"},
		{"override", []string{"--config", file, "--override", "num.partitions=6", "--override", "log.dirs=/a,/b"}, 6, []string{"/a", "/b"},
			"PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093", "PLAINTEXT://broker3.example.com:19092"},
		{"data dir", []string{"-config=" + file, "-data-dir", "/d"}, 2, []string{"/d"},
			"PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093", "PLAINTEXT://broker3.example.com:19092"},
		{"last wins", []string{"--config", file, "--data-dir", "/d", "--override", "log.dirs=/o"}, 2, []string{"/o"},
			"PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093", "PLAINTEXT://broker3.example.com:19092"},
		{"last wins other way", []string{"--config", file, "--override", "log.dirs=/o", "--data-dir", "/d"}, 2, []string{"/d"},
			"PLAINTEXT://localhost:19092,CONTROLLER://localhost:19093", "PLAINTEXT://broker3.example.com:19092"},
		{"listen wildcard", []string{"--config", file, "--listen", ":29092"}, 2, []string{"/from/file"},
			"PLAINTEXT://:29092,CONTROLLER://localhost:19093", "PLAINTEXT://broker3.example.com:29092"},
		{"listen host", []string{"--config", file, "--listen", "10.1.2.3:29092"}, 2, []string{"/from/file"},
			"PLAINTEXT://10.1.2.3:29092,CONTROLLER://localhost:19093", "PLAINTEXT://10.1.2.3:29092"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, unknown, err := serveConfigOut(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(unknown, []string{"made.up.name"}) {
				t.Errorf("unknown = %q", unknown)
			}
			if b.NumPartitions != tt.partitions || !slices.Equal(b.LogDirs, tt.dirs) {
				t.Errorf("partitions %d, dirs %q; want %d, %q", b.NumPartitions, b.LogDirs, tt.partitions, tt.dirs)
			}
			if got := listenersString(b.Listeners); got != tt.listeners {
				t.Errorf("listeners %s, want %s", got, tt.listeners)
			}
			if got := listenersString(b.AdvertisedListeners); got != tt.advertised {
				t.Errorf("advertised %s, want %s", got, tt.advertised)
			}
			// With a file, Kafka's defaults apply, not the dev ones.
			if b.OffsetsTopicReplicationFactor != 3 {
				t.Errorf("offsets RF %d, want Kafka's 3", b.OffsetsTopicReplicationFactor)
			}
		})
	}
}

func TestServeConfigListenWithoutFile(t *testing.T) {
	b, _, err := serveConfigOut([]string{"--listen", "[::1]:0", "--data-dir", "/tmp/x"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := listenersString(b.Listeners); got != "PLAINTEXT://[::1]:0,CONTROLLER://localhost:9093" {
		t.Errorf("listeners %s", got)
	}
	// A file whose listeners lack PLAINTEXT gets one added.
	file := writeFile(t, "listeners=BROKER://:9092,CONTROLLER://:9093\n"+
		"listener.security.protocol.map=BROKER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\ninter.broker.listener.name=BROKER\n")
	b, _, err = serveConfigOut([]string{"--config", file, "--listen", "localhost:9094"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := listenersString(b.Listeners); got != "PLAINTEXT://localhost:9094,BROKER://:9092,CONTROLLER://:9093" {
		t.Errorf("listeners %s", got)
	}
}

func TestServeConfigErrors(t *testing.T) {
	bad := writeFile(t, "num.partitions=zero\n")
	tests := []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--override", "novalue"}, "name=value"},
		{[]string{"--override", "=x"}, "name=value"},
		{[]string{"--data-dir", ""}, "must not be empty"},
		{[]string{"--data-dir", "a,b"}, "one directory"},
		{[]string{"--listen", "9092"}, "host:port"},
		{[]string{"--listen", "localhost:http"}, "port"},
		{[]string{"--listen", "localhost:70000"}, "port"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"--config", bad}, "num.partitions"},
		{[]string{"--override", "listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://localhost:9093"}, "0.0.0.0"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--no-such-flag"}, "not defined"},
	}
	for _, tt := range tests {
		var out strings.Builder
		_, _, err := serveConfigOut(tt.args, &out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("serveConfig(%q) = %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
	var ce *config.ConfigError
	if _, _, err := serveConfigOut([]string{"--config", bad}, io.Discard); !errors.As(err, &ce) || ce.Name != "num.partitions" {
		t.Errorf("bad file: %v, want a *config.ConfigError naming num.partitions", err)
	}
	var out strings.Builder
	if _, _, err := serveConfigOut([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "--override") {
		t.Errorf("-h: %v, output %q", err, out.String())
	}
}
