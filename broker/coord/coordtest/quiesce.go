package coordtest

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/coord"
)

// Quiesce waits until no shard of rt has work queued and every I/O it
// waits for is done or held by the test (held counts those, as the test's
// gates do), so that what a script prints does not depend on timing. It
// returns at once when the shards have stopped.
func Quiesce[K comparable, M any](t testing.TB, rt *coord.Runtime[K, M], held func() int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := 0
		for _, s := range rt.Shards() {
			n := make(chan int, 1)
			if !s.Post(context.Background(), func() { n <- s.Busy() + s.Queued() }) {
				return
			}
			busy += <-n
		}
		if busy == held() {
			// One more round: completions posted meanwhile are now queued.
			idle := true
			for _, s := range rt.Shards() {
				if s.Queued() > 0 {
					idle = false
				}
			}
			if idle {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator did not go idle: %d busy, %d held", busy, held())
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// GoroutinesIn lists the stacks of live goroutines running code of one of
// pkgs (substrings of a frame, such as "broker/coord.") other than the
// test's own. A coordinator's shard goroutines run coord's code.
func GoroutinesIn(pkgs ...string) []string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	var out []string
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "coordtest.GoroutinesIn") {
			continue
		}
		for _, pkg := range pkgs {
			if strings.Contains(g, pkg) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// NoGoroutinesLeft waits up to d until no goroutine runs code of pkgs (see
// GoroutinesIn) and otherwise fails the test with their stacks: after
// Close, a coordinator must leave nothing running.
func NoGoroutinesLeft(t testing.TB, d time.Duration, pkgs ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := GoroutinesIn(pkgs...)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left after Close:\n%s", strings.Join(left, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
