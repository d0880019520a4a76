package main

import (
	"strings"
	"testing"
)

// TestServeNamesUnsupportedSettings: each property set that has no
// effect in Gregor gets one warning line at start; honoured ones none.
func TestServeNamesUnsupportedSettings(t *testing.T) {
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0",
		"--override", "num.io.threads=16", "--override", "broker.rack=r1", "--override", "fetch.max.bytes=1048576")
	p.stop()
	out := p.log()
	for _, name := range []string{"num.io.threads", "broker.rack"} {
		if n := strings.Count(out, `msg="property not supported, it has no effect" name=`+name+" "); n != 1 {
			t.Errorf("%d warnings for %s, want 1:\n%s", n, name, out)
		}
	}
	if strings.Contains(out, "name=fetch.max.bytes") {
		t.Errorf("the honoured fetch.max.bytes was named as not supported:\n%s", out)
	}
}
