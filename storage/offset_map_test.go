package storage

import (
	"fmt"
	"testing"
	"time"
)

func TestOffsetMap(t *testing.T) {
	m := newOffsetMap()
	m.reset(100, 1<<20)
	if n := len(m.slots); n != 101 {
		t.Fatalf("%d slots for 100 wanted, want the next prime 101", n)
	}
	if m.get([]byte("x")) != -1 || m.latest != -1 {
		t.Fatal("empty map finds a key")
	}
	for i := range 90 {
		if !m.put(fmt.Appendf(nil, "key-%d", i%60), int64(i)) {
			t.Fatalf("put %d failed", i)
		}
	}
	if m.entries != 60 || m.latest != 89 {
		t.Fatalf("entries %d, latest %d", m.entries, m.latest)
	}
	for i := range 60 {
		want := int64(i)
		if i < 30 {
			want = int64(i + 60) // overwritten by the second round
		}
		if got := m.get(fmt.Appendf(nil, "key-%d", i)); got != want {
			t.Fatalf("key-%d at %d, want %d", i, got, want)
		}
	}
	if m.get([]byte("key-60")) != -1 || m.get(nil) != -1 && m.get([]byte{}) != -1 {
		t.Fatal("found a key never put")
	}
	if c := m.capacity(0.9); c != 90 {
		t.Fatalf("capacity %d", c)
	}

	// The budget caps the table; a full table refuses new keys and keeps
	// old ones.
	m.reset(1000, 7*offsetSlotSize)
	if len(m.slots) != 7 {
		t.Fatalf("%d slots in a 7-slot budget", len(m.slots))
	}
	for i := range 7 {
		if !m.put(fmt.Appendf(nil, "%d", i), int64(i)) {
			t.Fatalf("put %d into a table with room", i)
		}
	}
	if m.put([]byte("one too many"), 99) {
		t.Fatal("put into a full table")
	}
	if !m.put([]byte("3"), 50) || m.get([]byte("3")) != 50 {
		t.Fatal("overwrite in a full table")
	}
	// A reset within budget reuses and clears the table.
	m.reset(5, 7*offsetSlotSize)
	if len(m.slots) != 7 || m.entries != 0 || m.get([]byte("3")) != -1 {
		t.Fatalf("reset left %d slots, %d entries", len(m.slots), m.entries)
	}
}

func TestPrimes(t *testing.T) {
	for _, tt := range []struct{ n, prev, next int64 }{
		{3, 3, 3}, {4, 3, 5}, {24, 23, 29}, {100, 97, 101}, {5592405, 5592373, 5592407},
	} {
		if got := prevPrime(tt.n); got != tt.prev {
			t.Errorf("prevPrime(%d) = %d, want %d", tt.n, got, tt.prev)
		}
		if got := nextPrime(tt.n); got != tt.next {
			t.Errorf("nextPrime(%d) = %d, want %d", tt.n, got, tt.next)
		}
	}
}

func TestThrottler(t *testing.T) {
	tests := []struct {
		name   string
		rate   float64
		steps  []int           // bytes observed, 100 ms apart
		sleeps []time.Duration // sleeps asked for
	}{
		{name: "unlimited", rate: 0, steps: []int{1 << 30, 1 << 30, 1 << 30, 1 << 30}},
		{name: "under the rate", rate: 10_000, steps: []int{500, 500, 500, 500}},
		// 4000 bytes by 400 ms at 1000 B/s should take 4 s: sleep 3.6 s.
		{name: "over the rate", rate: 1000, steps: []int{1000, 1000, 1000, 1000}, sleeps: []time.Duration{3600 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.UnixMilli(0)
			var slept []time.Duration
			th := newThrottler(tt.rate, func() time.Time { return now }, func(d time.Duration) {
				slept = append(slept, d)
				now = now.Add(d)
			})
			for _, n := range tt.steps {
				now = now.Add(100 * time.Millisecond)
				th.maybeThrottle(n)
			}
			if fmt.Sprint(slept) != fmt.Sprint(tt.sleeps) {
				t.Fatalf("slept %v, want %v", slept, tt.sleeps)
			}
		})
	}
}
