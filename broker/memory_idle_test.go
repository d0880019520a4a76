package broker

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// heapAndStacks is the live heap (after a collection) and the goroutine
// stacks in use: what a broker holds for its idle connections, before
// the collector's headroom.
func heapAndStacks() (heap, stacks uint64) {
	runtime.GC()
	runtime.GC() // a second one frees what sync.Pools held at the first
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
	}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// apiVersionsOK sends an ApiVersions on c and checks its answer.
func apiVersionsOK(t *testing.T, c *rawConn, corr int32) {
	t.Helper()
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := resp.ReadFrom(c.request(kmsg.NewPtrApiVersionsRequest(), corr)); err != nil || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions %d: %v, error code %d, %d keys", corr, err, resp.ErrorCode, len(resp.ApiKeys))
	}
}

// TestIdleConnMemory: 2,000 connections, each quiet after an ApiVersions
// exchange, hold at most connBudget bytes of heap and stack each once
// they were handed to a fresh goroutine (parkAfter; before, 4 KiB of
// stack and 600 bytes of slot queue each: 8 KiB of RSS per connection,
// 10,000 of them over the 100 MiB), and every one still answers.
func TestIdleConnMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("memory figures mean nothing under the race detector; make perf-check runs this without it")
	}
	if testing.Short() {
		t.Skip("opens 2,000 connections")
	}
	const conns, connBudget = 2000, 4800
	const park = 300 * time.Millisecond
	ts := startServer(t, "")
	ts.limits().parkAfter.Store(int64(park))
	// One connection first, so that what the first one sets up once for
	// all (pools, the ApiVersions answer) is not counted.
	apiVersionsOK(t, dialRaw(t, ts.addr), 0)
	bh, bs := heapAndStacks()
	open := make([]*rawConn, conns)
	for i := range open {
		open[i] = dialRaw(t, ts.addr)
		apiVersionsOK(t, open[i], int32(i))
	}
	// The hand-overs run once each connection has been quiet for park;
	// on a loaded machine some come late, so measure until every one
	// has settled, for a few seconds at most.
	time.Sleep(park + 500*time.Millisecond)
	var heap, stacks float64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		ah, as := heapAndStacks()
		// The test's ends of the connections (a net.Conn and a cleanup
		// each, no goroutine) are in the same process and counted too.
		heap, stacks = (float64(ah)-float64(bh))/conns, (float64(as)-float64(bs))/conns
		if heap+stacks <= connBudget && stacks <= 2600 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d idle connections: %.0f bytes of heap (client ends included) and %.0f of stack each", conns, heap, stacks)
	if heap+stacks > connBudget {
		t.Errorf("an idle connection holds %.0f bytes of heap and %.0f of stack, want at most %d together", heap, stacks, connBudget)
	}
	if stacks > 2600 {
		t.Errorf("an idle connection's goroutine holds %.0f bytes of stack, want the 2 KiB a fresh goroutine starts with", stacks)
	}
	for i, c := range open {
		apiVersionsOK(t, c, int32(conns+i))
	}
}

// TestParkedConnKeepsIdleTimeout: a connection handed to a fresh
// goroutine after parkAfter still closes at connections.max.idle.ms
// counted from its last request, not from the hand-over, and one that
// sends a request after its hand-over is served and parks again.
func TestParkedConnKeepsIdleTimeout(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.ConnectionsMaxIdleMs = 1000 })
	ts.limits().parkAfter.Store(int64(300 * time.Millisecond))
	busy := dialRaw(t, ts.addr)
	c := dialRaw(t, ts.addr)
	apiVersionsOK(t, c, 1)
	start := time.Now()
	for i := range 3 {
		// Parked after 300 ms, then a request at 500 ms: served, and
		// the idle time starts again.
		time.Sleep(500 * time.Millisecond)
		apiVersionsOK(t, busy, int32(10+i))
	}
	c.expectClosed()
	if idle := time.Since(start); idle < 900*time.Millisecond || idle > 4*time.Second {
		t.Fatalf("parked connection closed after %v idle, want about 1s", idle)
	}
	apiVersionsOK(t, busy, 20)
	goodClientWorks(t, ts)
}
