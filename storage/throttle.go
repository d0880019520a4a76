package storage

import (
	"math"
	"time"
)

// throttler holds the cleaner's I/O to log.cleaner.io.max.bytes.per.second
// as Kafka's Throttler: it counts bytes over periods of checkInterval and,
// at the end of a period that ran too fast, sleeps for as long as the
// bytes should have taken.
type throttler struct {
	rate          float64 // bytes per second; +Inf or <= 0: no limit
	checkInterval time.Duration
	now           func() time.Time
	sleep         func(time.Duration) // returns early if the cleaner stops

	periodStart time.Time
	observed    float64
}

// cleanerThrottleCheckInterval is Kafka's checkIntervalMs for the cleaner.
const cleanerThrottleCheckInterval = 300 * time.Millisecond

func newThrottler(rate float64, now func() time.Time, sleep func(time.Duration)) *throttler {
	return &throttler{rate: rate, checkInterval: cleanerThrottleCheckInterval, now: now, sleep: sleep, periodStart: now()}
}

func (t *throttler) limited() bool {
	return t.rate > 0 && !math.IsInf(t.rate, 1) && t.rate < math.MaxFloat64
}

// maybeThrottle accounts for n bytes read or written.
func (t *throttler) maybeThrottle(n int) {
	if !t.limited() || n <= 0 {
		return
	}
	t.observed += float64(n)
	elapsed := t.now().Sub(t.periodStart)
	if elapsed <= t.checkInterval {
		return
	}
	if t.observed/elapsed.Seconds() > t.rate {
		want := time.Duration(t.observed / t.rate * float64(time.Second))
		if d := want - elapsed; d > 0 {
			t.sleep(d)
		}
	}
	t.periodStart = t.now()
	t.observed = 0
}
