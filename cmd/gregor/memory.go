package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// After a burst (a flood of connections, a batch that decompresses
// large) the Go runtime keeps the heap it grew until a garbage collection
// finds it unused, which on a quiet broker may be minutes away, and then
// hands pages back slowly. A broker is expected to shrink back once the
// burst is over, so once the process is quiet with much memory to give
// back, it collects and returns it at once. A busy broker is left to the
// runtime: its memory would be asked for again right away.
const (
	memCheckEvery = 10 * time.Second
	// memReturnAt is how much idle heap (garbage and free pages not yet
	// returned) makes a return worth a collection. Loading 10,000 idle
	// partitions at start leaves about 16 MiB of it, which at 32 MiB was
	// kept: 68 MiB of RSS after a restart against 52 MiB returned.
	memReturnAt = 8 << 20
	// memQuietBelow is the allocation over one check interval under which
	// the process counts as quiet.
	memQuietBelow = 32 << 20
)

// returnIdleMemory checks every memCheckEvery until ctx ends.
func returnIdleMemory(ctx context.Context, log *slog.Logger) {
	samples := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},               // allocated so far
		{Name: "/memory/classes/total:bytes"},         // mapped by the runtime
		{Name: "/memory/classes/heap/released:bytes"}, // of which returned
		{Name: "/gc/heap/live:bytes"},                 // live after the last collection
		{Name: "/memory/classes/heap/stacks:bytes"},   // goroutine stacks in use
	}
	metrics.Read(samples)
	lastAllocs := samples[0].Value.Uint64()
	followUp := false
	var floor uint64
	t := time.NewTicker(memCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(samples)
		allocs := samples[0].Value.Uint64()
		quiet := allocs-lastAllocs < memQuietBelow
		lastAllocs = allocs
		idle := idleBytes(samples)
		switch {
		case !quiet:
			followUp = false
			continue
		case idle >= floor+memReturnAt:
			// sync.Pool keeps what it holds through one collection (its
			// victim cache): a second one, a tick later, frees the
			// buffers the pools held at the first.
			followUp = true
		case followUp:
			followUp = false
		default:
			continue
		}
		start := time.Now()
		debug.FreeOSMemory()
		// What could not be returned (fragmented spans, say) is not
		// tried again until as much again has piled up on top of it.
		metrics.Read(samples)
		floor = idleBytes(samples)
		log.Debug("returned idle memory to the OS", "idle_bytes", idle, "left", floor, "took", time.Since(start))
	}
}

// idleBytes is what the process holds beyond its live heap and the stacks
// of its goroutines: garbage, free pages not yet returned, the stacks of
// goroutines gone (10,000 closed connections leave 80 MB of them).
func idleBytes(samples []metrics.Sample) uint64 {
	held := samples[1].Value.Uint64() - samples[2].Value.Uint64()
	// The stacks themselves, not a guess per goroutine: 8 KiB each took
	// 10,000 idle connections, whose stacks are 2 KiB, for 60 MB more in
	// use than they held, and kept the stacks they had before (freed
	// when their waits moved to fresh goroutines) from being returned.
	inUse := samples[3].Value.Uint64() + samples[4].Value.Uint64()
	if held <= inUse {
		return 0
	}
	return held - inUse
}
