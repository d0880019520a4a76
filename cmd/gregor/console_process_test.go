package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/broker"
)

// TestConsoleServed: `gregor serve` serves the web console at / of its
// HTTP listener beside /metrics, connected through its client listener;
// http.console.read.only refuses produce; http.console.enable=false
// leaves only the listener's own paths.
func TestConsoleServed(t *testing.T) {
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0")
	web := httpAddr(t, p)
	if code, body := httpGet(t, web, "/"); code != 200 || !strings.Contains(body, "<title>Gregor console</title>") {
		t.Fatalf("/: %d %.200s", code, body)
	}
	var st struct {
		On       bool     `json:"on"`
		ReadOnly bool     `json:"read_only"`
		Seeds    []string `json:"seeds"`
	}
	_, body := httpGet(t, web, "/api/status")
	if err := json.Unmarshal([]byte(body), &st); err != nil || !st.On || st.ReadOnly || len(st.Seeds) != 1 || st.Seeds[0] != p.addr {
		t.Fatalf("status %s (%v), want on through %s", body, err, p.addr)
	}
	mustCLI(t, p.addr, "", "topic", "create", "seen", "-p", "1")
	if code, body := httpGet(t, web, "/api/topics"); code != 200 || !strings.Contains(body, `"name":"seen"`) {
		t.Fatalf("/api/topics: %d %s", code, body)
	}
	if code, body := httpGet(t, web, "/metrics"); code != 200 || !strings.Contains(body, "kafka_server_replicamanager_partitioncount") {
		t.Fatalf("/metrics beside the console: %d", code)
	}
	// Bound to loopback: a request for another host name (DNS
	// rebinding) is refused by the console, not by /metrics.
	for path, want := range map[string]int{"/api/topics": http.StatusMisdirectedRequest, "/": http.StatusMisdirectedRequest, "/healthz": 200} {
		req, _ := http.NewRequest("GET", "http://"+web+path, nil)
		req.Host = "rebound.example:9644"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s for another host: %d, want %d", path, resp.StatusCode, want)
		}
	}
	p.stop()

	ro := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0",
		"--override", "http.console.read.only=true")
	web = httpAddr(t, ro)
	mustCLI(t, ro.addr, "", "topic", "create", "ro", "-p", "1")
	resp, err := http.Post("http://"+web+"/api/topics/ro/records", "application/json", strings.NewReader(`{"value":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("produce on a read-only console: %d", resp.StatusCode)
	}
	ro.stop()

	off := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0",
		"--override", "http.console.enable=false")
	web = httpAddr(t, off)
	if code, _ := httpGet(t, web, "/"); code != 404 {
		t.Fatalf("/ with the console disabled: %d", code)
	}
	if code, _ := httpGet(t, web, "/readyz"); code != 200 {
		t.Fatalf("/readyz with the console disabled: %d", code)
	}
}

// TestConsoleSeed: the console connects only through a PLAINTEXT
// listener (loopback for a wildcard bind) and is off, with the reason,
// when every listener wants TLS or SASL; which http.listener values
// count as loopback.
func TestConsoleSeed(t *testing.T) {
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	seed, name, err := consoleSeed([]broker.ClientListener{
		{Name: "SECURE", Protocol: "SASL_SSL", Addr: tcp("127.0.0.1", 9094)},
		{Name: "INTERNAL", Protocol: "PLAINTEXT", Addr: tcp("::", 9092)},
	})
	if err != nil || seed != "127.0.0.1:9092" || name != "INTERNAL" {
		t.Fatalf("got %q %q %v", seed, name, err)
	}
	_, _, err = consoleSeed([]broker.ClientListener{
		{Name: "SECURE", Protocol: "SASL_SSL", Addr: tcp("127.0.0.1", 9094)},
		{Name: "TLS", Protocol: "SSL", Addr: tcp("127.0.0.1", 9093)},
		{Name: "SASL", Protocol: "SASL_PLAINTEXT", Addr: tcp("127.0.0.1", 9095)},
	})
	if err == nil || !strings.Contains(err.Error(), "no PLAINTEXT client listener") {
		t.Fatalf("secured listeners only: %v", err)
	}
	for addr, want := range map[string]bool{"localhost:9644": true, "127.0.0.1:9644": true, "[::1]:9644": true,
		"0.0.0.0:9644": false, ":9644": false, "gregor:9644": false} {
		if got := loopbackListener(addr); got != want {
			t.Errorf("loopbackListener(%s) = %v", addr, got)
		}
	}
}
