package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesUnservedSecurityProtocol: a listener mapped to
// SASL_PLAINTEXT stops `gregor serve` before it listens or formats its
// data dir, with a message naming the listener and the protocol.
func TestServeRefusesUnservedSecurityProtocol(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := launchServe(t, "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--override", "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT")
	code, out := p.waitExit(60 * time.Second)
	if code == 0 {
		t.Fatalf("gregor with a SASL_PLAINTEXT listener exited 0:\n%s", out)
	}
	if strings.Contains(out, "gregor started") {
		t.Fatalf("gregor started before refusing:\n%s", out)
	}
	if !strings.Contains(out, "listener PLAINTEXT uses security protocol SASL_PLAINTEXT") {
		t.Fatalf("refusal does not name the listener and protocol:\n%s", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("refused start created its data dir (%v)", err)
	}
}
