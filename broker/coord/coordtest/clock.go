package coordtest

import (
	"slices"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/broker/coord"
)

// FakeClock is a coord.Clock whose time moves only when a test advances
// it.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *FakeClock
	when    time.Time
	seq     uint64
	f       func()
	stopped bool
}

// NewFakeClock returns a clock at a fixed instant (2023-11-14T22:13:20Z),
// so that scripts print the same timestamps every run.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.UnixMilli(1_700_000_000_000)}
}

// Now implements coord.Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements coord.Clock: f runs when Advance reaches its time.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) coord.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.stopped {
		return false
	}
	t.stopped = true
	t.c.timers = slices.DeleteFunc(t.c.timers, func(o *fakeTimer) bool { return o == t })
	return true
}

// Advance moves the clock by d, firing the timers due one at a time in
// order (the clock at each one's time) and calling settle before the first
// and after each, so the coordinator finishes what a timer started before
// the next one fires.
func (c *FakeClock) Advance(d time.Duration, settle func()) {
	settle()
	target := c.Now().Add(d)
	for {
		t := c.next(target)
		if t == nil {
			break
		}
		t.f()
		settle()
	}
	c.set(target)
}

// next removes and returns the earliest timer due by target, moving the
// clock to its time; nil when none is due.
func (c *FakeClock) next(target time.Time) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *fakeTimer
	for _, t := range c.timers {
		if t.when.After(target) {
			continue
		}
		if best == nil || t.when.Before(best.when) || t.when.Equal(best.when) && t.seq < best.seq {
			best = t
		}
	}
	if best == nil {
		return nil
	}
	best.stopped = true
	c.timers = slices.DeleteFunc(c.timers, func(o *fakeTimer) bool { return o == best })
	if best.when.After(c.now) {
		c.now = best.when
	}
	return best
}

func (c *FakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}
