// Package clientquota measures clients' produce and fetch byte rates,
// request time (request_percentage) and partition mutations
// (controller_mutation_rate, in a token bucket, bucket.go) against their
// quotas in the metadata image and computes how long a client that went
// over is throttled, as Kafka's ClientQuotaManager does:
// the same sampled rate (quota.window.num samples of
// quota.window.size.seconds each), the same choice of which quota applies
// to a user and client id and which clients share it, and the same
// throttle time.
package clientquota

// sample is one of a rate's windows: Kafka's SampledStat.Sample.
type sample struct {
	start     int64 // startTimeMs
	lastEvent int64 // lastEventMs
	value     float64
}

func newSample(now int64) sample { return sample{start: now, lastEvent: now} }

// rate is Kafka's Rate over a WindowedSum: the sum of the samples kept
// divided by the time they span, which is counted as at least samples-1
// full windows so that a new client's first bytes do not read as a huge
// rate. As Kafka's SampledStat it keeps one sample more than
// quota.window.num, for the sample that overlaps the start of the
// measured span, and drops a sample once its last event is all the
// windows old.
type rate struct {
	samples  []sample
	current  int
	n        int   // quota.window.num
	windowMs int64 // quota.window.size.seconds, in ms
}

func newRate(n int, windowMs int64) *rate {
	return &rate{n: n, windowMs: windowMs}
}

// record adds v at now (ms), starting the next sample when the current
// one is a whole window old (SampledStat.record and advance).
func (r *rate) record(v float64, now int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, newSample(now))
	}
	s := &r.samples[r.current]
	if now-s.start >= r.windowMs {
		r.current = (r.current + 1) % (r.n + 1)
		if r.current >= len(r.samples) {
			r.samples = append(r.samples, newSample(now))
		} else {
			r.samples[r.current] = newSample(now)
		}
		s = &r.samples[r.current]
	}
	s.value += v
	s.lastEvent = now
}

// purge resets the samples whose last event is older than all the
// windows together (SampledStat.purgeObsoleteSamples).
func (r *rate) purge(now int64) {
	expire := int64(r.n) * r.windowMs
	for i := range r.samples {
		if now-r.samples[i].lastEvent >= expire {
			r.samples[i] = newSample(now)
		}
	}
}

// windowSize is the span the rate divides by, in ms (Rate.windowSize).
func (r *rate) windowSize(now int64) int64 {
	r.purge(now)
	oldest := now
	if len(r.samples) > 0 {
		oldest = r.samples[0].start
		for _, s := range r.samples[1:] {
			oldest = min(oldest, s.start)
		}
	}
	elapsed := now - oldest
	full := elapsed / r.windowMs
	if minFull := int64(r.n - 1); full < minFull {
		elapsed += (minFull - full) * r.windowMs
	}
	return max(elapsed, 1)
}

// measure is the rate per second at now (Rate.measure).
func (r *rate) measure(now int64) float64 {
	r.purge(now)
	var sum float64
	for _, s := range r.samples {
		sum += s.value
	}
	return sum / (float64(r.windowSize(now)) / 1000)
}

// sum is the total recorded over the samples kept (Kafka's WindowedSum),
// which an Avg divides by the count's.
func (r *rate) sum(now int64) float64 {
	r.purge(now)
	var sum float64
	for _, s := range r.samples {
		sum += s.value
	}
	return sum
}
