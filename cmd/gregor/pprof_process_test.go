package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestPprofEnable: http.pprof.enable=true serves Go's profiles on
// http.listener (the heap profile in its text form, the goroutine dump);
// off, the default, the same paths give no profile.
func TestPprofEnable(t *testing.T) {
	on := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--override", "http.listener=127.0.0.1:0", "--override", "http.pprof.enable=true")
	web := httpAddr(t, on)
	if code, body := httpGet(t, web, "/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile:") {
		t.Fatalf("/debug/pprof/heap with http.pprof.enable=true: %d %.200s", code, body)
	}
	if code, body := httpGet(t, web, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile:") {
		t.Fatalf("/debug/pprof/goroutine with http.pprof.enable=true: %d %.200s", code, body)
	}

	off := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0")
	web = httpAddr(t, off)
	// The console (on by default) answers every other path, so the test
	// is that no profile comes back.
	if code, body := httpGet(t, web, "/debug/pprof/heap?debug=1"); code == http.StatusOK && strings.Contains(body, "heap profile:") {
		t.Fatalf("/debug/pprof/heap served without http.pprof.enable: %.200s", body)
	}
}
