package clientquota

import (
	"math"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// Manager measures one kind of client traffic (producer_byte_rate,
// consumer_byte_rate, request_percentage or controller_mutation_rate)
// per quota sensor.
type Manager struct {
	key      string
	n        int
	windowMs int64

	mu        sync.Mutex
	sensors   map[tags]*sensor
	lastSweep int64
}

// tags name a sensor as Kafka's metric tags do: the user and client id
// whose traffic it counts, "" for a part the applying quota does not
// distinguish (a user's quota is shared by all its clients).
type tags struct{ user, clientID string }

type sensor struct {
	rate     *rate
	bucket   bucket // for controller_mutation_rate (RecordMutation)
	lastUsed int64
	// throttleMs and throttles sum the throttle times applied and count
	// them over the same windows as rate, for the throttle-time metric
	// (Kafka's throttle time sensor, an Avg).
	throttleMs, throttles *rate
}

// sensorIdleMs is how long an unused sensor is kept: Kafka's one hour of
// inactivity.
const sensorIdleMs = int64(time.Hour / time.Millisecond)

// New returns a manager for quota key, measuring over samples windows of
// window each.
func New(key string, samples int, window time.Duration) *Manager {
	return &Manager{key: key, n: max(samples, 1), windowMs: max(window.Milliseconds(), 1), sensors: map[tags]*sensor{}}
}

// Key is the quota key the manager enforces.
func (m *Manager) Key() string { return m.key }

// Enabled reports whether any entity of img has a quota for the
// manager's key; without one nothing is measured (Kafka's
// quotasEnabled).
func (m *Manager) Enabled(img *image.Image) bool {
	if img == nil || !img.HasClientQuotas() {
		return false
	}
	for _, e := range img.QuotaEntities() {
		if e.IP.Present {
			continue
		}
		if _, ok := img.ClientQuotas(e)[m.key]; ok {
			return true
		}
	}
	return false
}

func (m *Manager) has(img *image.Image, user, clientID *string) bool {
	var e image.QuotaEntity
	if user != nil {
		e.User = name(*user)
	}
	if clientID != nil {
		e.ClientID = name(*clientID)
	}
	_, ok := img.ClientQuotas(e)[m.key]
	return ok
}

func (m *Manager) value(img *image.Image, user, clientID *string) (float64, bool) {
	var e image.QuotaEntity
	if user != nil {
		e.User = name(*user)
	}
	if clientID != nil {
		e.ClientID = name(*clientID)
	}
	v, ok := img.ClientQuotas(e)[m.key]
	return v, ok
}

// defaultName stands for an entity type's default in has and value.
const defaultName = "\x00default"

func name(s string) image.QuotaName {
	if s == defaultName {
		return image.QuotaName{Present: true, Default: true}
	}
	return image.QuotaName{Present: true, Name: s}
}

// sensorTags is Kafka's DefaultQuotaCallback.quotaMetricTags: the
// first of the eight entities, from the most specific, that has a quota
// decides which clients share the sensor.
func (m *Manager) sensorTags(img *image.Image, user, clientID string) tags {
	d := defaultName
	switch {
	case m.has(img, &user, &clientID), m.has(img, &user, &d):
		return tags{user, clientID}
	case m.has(img, &user, nil):
		return tags{user, ""}
	case m.has(img, &d, &clientID), m.has(img, &d, &d):
		return tags{user, clientID}
	case m.has(img, &d, nil):
		return tags{user, ""}
	}
	return tags{"", clientID}
}

// limit is Kafka's DefaultQuotaCallback.quotaLimit for a sensor's tags:
// the quota, and false when none applies.
func (m *Manager) limit(img *image.Image, t tags) (float64, bool) {
	d := defaultName
	var try [][2]*string
	switch {
	case t.user != "" && t.clientID != "":
		try = [][2]*string{{&t.user, &t.clientID}, {&t.user, &d}, {&d, &t.clientID}, {&d, &d}}
	case t.user != "":
		try = [][2]*string{{&t.user, nil}, {&d, nil}}
	case t.clientID != "":
		try = [][2]*string{{nil, &t.clientID}, {nil, &d}}
	}
	for _, e := range try {
		if v, ok := m.value(img, e[0], e[1]); ok {
			return v, true
		}
	}
	return 0, false
}

// sensorLocked returns the tags' sensor, creating it, and drops sensors
// idle for an hour.
func (m *Manager) sensorLocked(t tags, now int64) *sensor {
	if now-m.lastSweep > sensorIdleMs/4 {
		for k, s := range m.sensors {
			if now-s.lastUsed > sensorIdleMs {
				delete(m.sensors, k)
			}
		}
		m.lastSweep = now
	}
	s := m.sensors[t]
	if s == nil {
		s = &sensor{rate: newRate(m.n, m.windowMs), throttleMs: newRate(m.n, m.windowMs), throttles: newRate(m.n, m.windowMs)}
		m.sensors[t] = s
	}
	s.lastUsed = now
	return s
}

// Record counts value bytes of user's client clientID at now and returns
// how long, in ms, the client is to be throttled: 0 within its quota,
// else Kafka's QuotaUtils.throttleTime, the excess over the quota as a
// share of the quota, times the window the rate was measured over. The
// bytes are counted even when they are over (Kafka's Sensor.record).
func (m *Manager) Record(img *image.Image, user, clientID string, value float64, now time.Time) int {
	if !m.Enabled(img) {
		return 0
	}
	t := m.sensorTags(img, user, clientID)
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sensorLocked(t, ms)
	s.rate.record(value, ms)
	bound, ok := m.limit(img, t)
	if !ok {
		return 0
	}
	measured := s.rate.measure(ms)
	if measured <= bound {
		return 0
	}
	throttle := (measured - bound) / bound * float64(s.rate.windowSize(ms))
	return int(min(math.Round(throttle), math.MaxInt32))
}

// Unrecord takes back bytes Record counted, for a fetch answered empty
// because it was throttled (Kafka's unrecordQuotaSensor).
func (m *Manager) Unrecord(img *image.Image, user, clientID string, value float64, now time.Time) {
	if !m.Enabled(img) {
		return
	}
	t := m.sensorTags(img, user, clientID)
	ms := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sensorLocked(t, ms).rate.record(-value, ms)
}

// MaxValueInWindow is the most bytes the client's quota allows over the
// rate's window, which caps a fetch's size (Kafka's
// getMaxValueInQuotaWindow); +Inf without a quota.
func (m *Manager) MaxValueInWindow(img *image.Image, user, clientID string) float64 {
	if !m.Enabled(img) {
		return math.Inf(1)
	}
	bound, ok := m.limit(img, m.sensorTags(img, user, clientID))
	if !ok {
		return math.Inf(1)
	}
	return bound * float64(m.n-1) * float64(m.windowMs) / 1000
}

// Throttled records that the client was throttled for ms, the time the
// broker applied (after any cap), for the throttle-time metric.
func (m *Manager) Throttled(img *image.Image, user, clientID string, ms int, now time.Time) {
	if ms <= 0 || !m.Enabled(img) {
		return
	}
	t := m.sensorTags(img, user, clientID)
	at := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sensorLocked(t, at)
	s.throttleMs.record(float64(ms), at)
	s.throttles.record(1, at)
}

// SensorStats is one quota sensor's measurements, as Kafka exposes them
// per user and client id (kafka.server:type=Produce|Fetch|Request).
type SensorStats struct {
	// User and ClientID are the sensor's tags: "" for a part the quota
	// that applies does not distinguish.
	User, ClientID string
	// Rate is the measured rate in the quota's unit per second: bytes for
	// the byte rates, percent of a thread for request_percentage.
	Rate float64
	// ThrottleMs is the average throttle time applied over the windows,
	// 0 when none was.
	ThrottleMs float64
}

// Stats measures every sensor at now.
func (m *Manager) Stats(now time.Time) []SensorStats {
	at := now.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]SensorStats, 0, len(m.sensors))
	for t, s := range m.sensors {
		st := SensorStats{User: t.user, ClientID: t.clientID, Rate: max(s.rate.measure(at), 0)}
		if n := s.throttles.sum(at); n > 0 {
			st.ThrottleMs = s.throttleMs.sum(at) / n
		}
		out = append(out, st)
	}
	return out
}
