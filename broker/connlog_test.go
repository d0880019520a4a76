package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestAttrLogger: records of an attrLogger carry its attribute, as
// logger.With would have added it, derived loggers and groups included.
func TestAttrLogger(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, nil)).With("node", 1)
	l := attrLogger(base, "remote", "127.0.0.1:5555")
	l.Info("first", "k", "v")
	l.With("x", 2).WithGroup("g").Info("second", "y", 3)
	out := buf.String()
	for _, want := range []string{"node=1 k=v remote=127.0.0.1:5555", "node=1 remote=127.0.0.1:5555 x=2 g.y=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("log output %q lacks %q", out, want)
		}
	}
}
