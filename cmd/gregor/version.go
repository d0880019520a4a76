package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is Gregor's release, set when building a release:
//
//	go build -ldflags "-X main.version=v0.1.0" ./cmd/gregor
var version = "dev"

// protocolLevel is the Kafka release whose wire protocol, configs and
// behaviour Gregor implements.
const protocolLevel = "Kafka 4.2 protocol"

// runVersion prints what `gregor version` prints: the release, the Go
// toolchain and platform, the protocol level, and the source revision when
// the binary was built from a version-controlled checkout.
func runVersion(w io.Writer) error {
	_, err := fmt.Fprintf(w, "gregor %s\ngo: %s %s/%s\nprotocol: %s\n",
		version, runtime.Version(), runtime.GOOS, runtime.GOARCH, protocolLevel)
	if err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if rev := vcsRevision(); rev != "" {
		if _, err := fmt.Fprintf(w, "commit: %s\n", rev); err != nil {
			return fmt.Errorf("version: %w", err)
		}
	}
	return nil
}

// vcsRevision is the commit the binary was built from, marked when the
// working tree had uncommitted changes, or "" when unknown (go test, or a
// build outside a checkout).
func vcsRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + modified
}
