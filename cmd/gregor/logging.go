package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// newLogger builds the serve logger from log.level and log.format: text
// (logfmt) or JSON lines, each with exactly one component key (the
// innermost one set, "broker" when none is).
func newLogger(out io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "", "text":
		h = slog.NewTextHandler(out, opts)
	case "json":
		h = slog.NewJSONHandler(out, opts)
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
	return slog.New(&componentHandler{inner: h, component: "broker"}), nil
}

// componentHandler keeps one component attribute per line: loggers made
// with With("component", ...) inside others (the quorum's transport
// inside the broker's, raft's lines inside the node's) name the innermost
// part instead of repeating the key.
type componentHandler struct {
	inner     slog.Handler
	component string
}

func (h *componentHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *componentHandler) Handle(ctx context.Context, r slog.Record) error {
	component := h.component
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	var rest []slog.Attr
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "component" {
			component = a.Value.String()
		} else {
			rest = append(rest, a)
		}
		return true
	})
	// Last, so that lines read by scripts keep their shape
	// (msg="gregor started" addr=...).
	out.AddAttrs(rest...)
	out.AddAttrs(slog.String("component", component))
	return h.inner.Handle(ctx, out)
}

func (h *componentHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := &componentHandler{component: h.component}
	var rest []slog.Attr
	for _, a := range attrs {
		if a.Key == "component" {
			c.component = a.Value.String()
		} else {
			rest = append(rest, a)
		}
	}
	c.inner = h.inner.WithAttrs(rest)
	return c
}

func (h *componentHandler) WithGroup(name string) slog.Handler {
	return &componentHandler{inner: h.inner.WithGroup(name), component: h.component}
}
