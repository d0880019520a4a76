package clientquota

import (
	"math"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// bucket is Kafka's TokenBucket, which controller_mutation_rate is
// measured with (KIP-599): tokens refill at the quota per second up to a
// burst of quota.window.num × quota.window.size.seconds × quota, and each
// mutated partition takes one. A bucket starts full, as Kafka's does
// (its first refill counts from time zero).
type bucket struct {
	tokens     float64
	lastUpdate int64
	started    bool
}

// refill adds the tokens earned since the last update, capped at burst.
func (b *bucket) refill(bound, burst float64, now int64) {
	if !b.started {
		b.tokens, b.started = burst, true
	} else {
		b.tokens = min(burst, b.tokens+bound*float64(now-b.lastUpdate)/1000)
	}
	b.lastUpdate = now
}

// RecordMutation counts permits partition mutations of user's client
// clientID against its controller_mutation_rate quota at now, as Kafka's
// StrictControllerMutationQuota (strict) or
// PermissiveControllerMutationQuota does. It returns the throttle time in
// ms (the time until the bucket is back at zero tokens, Kafka's
// ControllerMutationQuotaManager.throttleTimeMs) and whether the mutation
// is refused: a strict quota refuses, without counting it, a mutation
// asked for while the bucket is below zero; a permissive one counts every
// mutation and only reports the throttle time.
func (m *Manager) RecordMutation(img *image.Image, user, clientID string, permits float64, strict bool, now time.Time) (throttleMs int, refused bool) {
	if !m.Enabled(img) {
		return 0, false
	}
	t := m.sensorTags(img, user, clientID)
	bound, ok := m.limit(img, t)
	if !ok {
		return 0, false
	}
	ms := now.UnixMilli()
	burst := float64(m.n) * float64(m.windowMs) / 1000 * bound
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &m.sensorLocked(t, ms).bucket
	b.refill(bound, burst, ms)
	throttle := func() int {
		return int(min(math.Round(-b.tokens/bound*1000), math.MaxInt32))
	}
	if strict && b.tokens < 0 {
		return throttle(), true
	}
	b.tokens = min(burst, b.tokens-permits)
	if !strict && b.tokens < 0 {
		return throttle(), false
	}
	return 0, false
}
