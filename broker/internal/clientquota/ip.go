package clientquota

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// IPRates measures the rate at which each IP address opens connections,
// against the connection_creation_rate quotas of ip entities (KIP-612),
// as Kafka's ConnectionQuotas does: the same sampled rate as the client
// quotas, the connection counted before the check, and a throttle time
// bounded by one window.
type IPRates struct {
	n        int
	windowMs int64

	mu        sync.Mutex
	rates     map[netip.Addr]*sensor
	lastSweep int64
}

// NewIPRates returns connection-rate sensors of samples windows of window
// each.
func NewIPRates(samples int, window time.Duration) *IPRates {
	return &IPRates{n: max(samples, 1), windowMs: max(window.Milliseconds(), 1), rates: map[netip.Addr]*sensor{}}
}

// IPLimit is addr's connection_creation_rate in img: its own ip entity's,
// else the default ip entity's; false when neither is set (Kafka's
// unlimited default).
func IPLimit(img *image.Image, addr netip.Addr) (float64, bool) {
	if img == nil || !img.HasClientQuotas() {
		return 0, false
	}
	const key = "connection_creation_rate"
	own := image.QuotaEntity{IP: image.QuotaName{Present: true, Name: addr.String()}}
	if v, ok := img.ClientQuotas(own)[key]; ok {
		return v, true
	}
	def := image.QuotaEntity{IP: image.QuotaName{Present: true, Default: true}}
	v, ok := img.ClientQuotas(def)[key]
	return v, ok
}

// Record counts a connection from addr at now against limit connections
// per second and returns how long, in ms, the address is over it: 0
// within the quota, else Kafka's throttle time bounded by one window.
func (r *IPRates) Record(addr netip.Addr, limit float64, now time.Time) int {
	ms := now.UnixMilli()
	r.mu.Lock()
	defer r.mu.Unlock()
	if ms-r.lastSweep > sensorIdleMs/4 {
		for a, s := range r.rates {
			if ms-s.lastUsed > sensorIdleMs {
				delete(r.rates, a)
			}
		}
		r.lastSweep = ms
	}
	s := r.rates[addr]
	if s == nil {
		s = &sensor{rate: newRate(r.n, r.windowMs)}
		r.rates[addr] = s
	}
	s.lastUsed = ms
	return recordConnection(s.rate, limit, ms, r.windowMs)
}

// recordConnection counts one connection in rt at ms and returns the
// throttle time against limit connections per second: 0 within it, else
// Kafka's throttle time bounded by one window (windowMs).
func recordConnection(rt *rate, limit float64, ms, windowMs int64) int {
	rt.record(1, ms)
	measured := rt.measure(ms)
	if measured <= limit {
		return 0
	}
	throttle := (measured - limit) / limit * float64(rt.windowSize(ms))
	return int(min(math.Round(throttle), float64(windowMs)))
}

// ConnRate measures how fast one listener, or the whole broker, accepts
// connections, against max.connection.creation.rate, as Kafka's
// ConnectionQuotas does: the same sampled rate as the client quotas, the
// connection counted before the check.
type ConnRate struct {
	windowMs int64

	mu   sync.Mutex // guards rate
	rate *rate
}

// NewConnRate returns a connection-rate sensor of samples windows of
// window each.
func NewConnRate(samples int, window time.Duration) *ConnRate {
	w := max(window.Milliseconds(), 1)
	return &ConnRate{windowMs: w, rate: newRate(max(samples, 1), w)}
}

// Record counts a connection at now against limit connections per second
// and returns how long, in ms, the acceptor is to wait: 0 within the
// rate, else Kafka's throttle time bounded by one window.
func (r *ConnRate) Record(limit float64, now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recordConnection(r.rate, limit, now.UnixMilli(), r.windowMs)
}
