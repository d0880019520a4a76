package broker

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/clientquota"
)

// clientQuotas are the produce and fetch byte-rate quotas and the
// controller mutation quota (broker/internal/clientquota), measured per
// connection's user and client id against the quotas in the metadata
// image.
type clientQuotas struct {
	produce, fetch, mutation, request *clientquota.Manager
	// ipRates measure connection creation per IP address against the
	// ip entities' connection_creation_rate (KIP-612).
	ipRates *clientquota.IPRates
	// maxRequestThrottleMs bounds request_percentage's throttle time at
	// one window, as Kafka's ClientRequestQuotaManager.
	maxRequestThrottleMs int
}

func newClientQuotas(windows, windowSeconds int32) clientQuotas {
	w := time.Duration(windowSeconds) * time.Second
	return clientQuotas{
		produce:  clientquota.New("producer_byte_rate", int(windows), w),
		fetch:    clientquota.New("consumer_byte_rate", int(windows), w),
		mutation: clientquota.New("controller_mutation_rate", int(windows), w),
		request:  clientquota.New("request_percentage", int(windows), w),
		ipRates:  clientquota.NewIPRates(int(windows), w),

		maxRequestThrottleMs: int(w.Milliseconds()),
	}
}

// quotaUser is the user name quotas match for a connection: its
// principal's name, ANONYMOUS without authentication, as Kafka's.
func (c *conn) quotaUser() string { return c.principal.Name }

func clientIDOf(r *request) string {
	if r.hdr.ClientID == nil {
		return ""
	}
	return *r.hdr.ClientID
}

// throttle mutes the connection for ms: no further request is read from
// it until then (Kafka mutes the channel of a throttled client, KIP-219).
func (c *conn) throttle(ms int) {
	if ms <= 0 {
		return
	}
	until := c.s.now().Add(time.Duration(ms) * time.Millisecond).UnixNano()
	for {
		old := c.throttledUntil.Load()
		if old >= until || c.throttledUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// waitThrottle waits out the connection's mute before its next request
// is read.
func (c *conn) waitThrottle() error {
	until := c.throttledUntil.Load()
	if until == 0 {
		return nil
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.ctx.Done():
		return context.Cause(c.ctx)
	}
}

// produceQuota counts a Produce request's size (the whole request, as
// Kafka's request.sizeInBytes) against the client's producer_byte_rate
// and, when it is over, mutes the connection and puts the throttle time
// in the response, which Kafka sends at once (KIP-219). An acks=0
// produce has no response, but its connection is muted all the same.
func (c *conn) produceQuota(r *request, size int, res result) result {
	ms := c.s.byteQuotas.produce.Record(c.s.meta.Image(), c.quotaUser(), clientIDOf(r), float64(size), c.s.now())
	if ms <= 0 {
		return res
	}
	c.throttle(ms)
	c.s.byteQuotas.produce.Throttled(c.s.meta.Image(), c.quotaUser(), clientIDOf(r), ms, c.s.now())
	return withThrottle(res, ms)
}

// withThrottle puts ms in res's response's throttle_time_ms unless it
// already holds more.
func withThrottle(res result, ms int) result {
	set := func(resp kmsg.Response) kmsg.Response {
		if tr, ok := resp.(interface {
			kmsg.ThrottleResponse
			SetThrottle(int32)
		}); ok {
			t, _ := tr.Throttle()
			tr.SetThrottle(max(t, int32(ms)))
		}
		return resp
	}
	switch {
	case res.wait != nil:
		wait := res.wait
		res.wait = func() kmsg.Response {
			if resp := wait(); resp != nil {
				return set(resp)
			}
			return nil
		}
	case res.resp != nil:
		res.resp = set(res.resp)
	}
	return res
}

// requestQuota is who a request's time counts against under
// request_percentage.
type requestQuota struct {
	user, clientID string
}

// nanosToPercent turns thread time into request_percentage's unit: the
// percentage of one thread's second (Kafka's nanosToPercentage).
func nanosToPercent(d time.Duration) float64 { return float64(d.Nanoseconds()) * 100 / 1e9 }

// recordRequestTime counts the time the request took to parse and handle
// (handled, the connection loop's Local phase, Kafka's request thread
// time) against the client's request_percentage quota and, when it is
// over, mutes the connection and puts the throttle time, at most one
// window, in the response (Kafka's sendResponseMaybeThrottle). It
// returns who the request counts against, for the network time its
// response then takes (recordResponseTime); nil when no
// request_percentage quota exists. Follower fetches are exempt, as in
// Kafka.
func (c *conn) recordRequestTime(r *request, handled time.Duration, res result) (result, *requestQuota) {
	img := c.s.meta.Image()
	m := c.s.byteQuotas.request
	if !m.Enabled(img) || isReplicaFetch(r) {
		return res, nil
	}
	q := &requestQuota{user: c.quotaUser(), clientID: clientIDOf(r)}
	ms := m.Record(img, q.user, q.clientID, nanosToPercent(handled), c.s.now())
	ms = min(ms, c.s.byteQuotas.maxRequestThrottleMs)
	if ms <= 0 {
		return res, q
	}
	m.Throttled(img, q.user, q.clientID, ms, c.s.now())
	c.throttle(ms)
	return withThrottle(res, ms), q
}

// recordResponseTime counts the time the response took to send (Kafka's
// network thread time) against the request's quota, without throttling
// for it (Kafka's recordNoThrottle): it weighs on the next request.
func (c *conn) recordResponseTime(q *requestQuota, d time.Duration) {
	if q == nil || d <= 0 {
		return
	}
	c.s.byteQuotas.request.Record(c.s.meta.Image(), q.user, q.clientID, nanosToPercent(d), c.s.now())
}

// isReplicaFetch reports whether r is a follower's Fetch, which Kafka
// exempts from the request quota.
func isReplicaFetch(r *request) bool {
	f, ok := r.req.(*kmsg.FetchRequest)
	if !ok {
		return false
	}
	if f.Version >= 15 {
		return f.ReplicaState.ID >= 0
	}
	return f.ReplicaID >= 0
}

// fetchQuota is who a consumer's fetch counts against.
type fetchQuota struct {
	conn           *conn
	user, clientID string
}

// planFetchQuota gives a consumer's fetch its quota when quotas on
// consumer_byte_rate exist, and caps the fetch at what its quota allows
// over the rate's window, as Kafka's getMaxValueInQuotaWindow does.
func (s *Server) planFetchQuota(plan *fetchPlan, r *request) {
	if plan.replicaID >= 0 {
		return // replication is not a client's traffic
	}
	img := s.meta.Image()
	if !s.byteQuotas.fetch.Enabled(img) {
		return
	}
	q := &fetchQuota{conn: r.conn, user: r.conn.quotaUser(), clientID: clientIDOf(r)}
	plan.quota = q
	if most := s.byteQuotas.fetch.MaxValueInWindow(img, q.user, q.clientID); most < float64(plan.maxBytes) {
		plan.maxBytes = max(int(most), 1)
		plan.minBytes = min(plan.minBytes, plan.maxBytes)
	}
}

// fetchQuotaThrottle counts a consumer's fetched bytes against its
// consumer_byte_rate and returns the throttle time: when over, the bytes
// are taken back (the answer will be empty, Kafka's unrecordQuotaSensor)
// and the connection is muted.
func (s *Server) fetchQuotaThrottle(plan *fetchPlan, read fetchRead) int {
	q := plan.quota
	if q == nil {
		return 0
	}
	img, now := s.meta.Image(), s.now()
	size := float64(read.bytes)
	ms := s.byteQuotas.fetch.Record(img, q.user, q.clientID, size, now)
	if ms <= 0 {
		return 0
	}
	s.byteQuotas.fetch.Unrecord(img, q.user, q.clientID, size, now)
	s.byteQuotas.fetch.Throttled(img, q.user, q.clientID, ms, now)
	q.conn.throttle(ms)
	return ms
}

// mutationQuota is one CreateTopics, CreatePartitions or DeleteTopics
// request's controller_mutation_rate quota (KIP-599), Kafka's
// ControllerMutationQuota: strict from the version Kafka makes it strict,
// permissive below.
type mutationQuota struct {
	s              *Server
	conn           *conn
	user, clientID string
	strict         bool
	// throttleUntil is when the largest throttle time seen ends, counted
	// from the moment the quota was measured: the response is built after
	// the metadata commit, which may take a while, and Kafka's
	// AbstractControllerMutationQuota.throttleTime deducts that wait.
	throttleUntil time.Time
}

// throttlingQuotaExceeded is Kafka's message for THROTTLING_QUOTA_EXCEEDED.
const throttlingQuotaExceeded = "The throttling quota has been exceeded."

// mutationQuotaFor is Kafka's ControllerMutationQuotaManager.newQuotaFor:
// a strict quota for requests at strictSince or later, a permissive one
// before.
func (s *Server) mutationQuotaFor(r *request, strictSince int16) *mutationQuota {
	return &mutationQuota{
		s: s, conn: r.conn,
		user: r.conn.quotaUser(), clientID: clientIDOf(r),
		strict: r.req.GetVersion() >= strictSince,
	}
}

// allow counts partitions mutations and reports whether they may go on:
// false when a strict quota refuses them (the topic is then answered
// THROTTLING_QUOTA_EXCEEDED). The request's throttle time is the largest
// seen.
func (q *mutationQuota) allow(partitions int) bool {
	if partitions <= 0 {
		return true
	}
	now := q.s.now()
	ms, refused := q.s.byteQuotas.mutation.RecordMutation(q.s.meta.Image(), q.user, q.clientID, float64(partitions), q.strict, now)
	if until := now.Add(time.Duration(ms) * time.Millisecond); ms > 0 && until.After(q.throttleUntil) {
		q.throttleUntil = until
	}
	return !refused
}

// remainingMs is the throttle time left at now: what was measured less
// the time since, never below zero (Kafka's
// AbstractControllerMutationQuota.throttleTime).
func (q *mutationQuota) remainingMs(now time.Time) int {
	if q.throttleUntil.IsZero() || !q.throttleUntil.After(now) {
		return 0
	}
	return int(q.throttleUntil.Sub(now) / time.Millisecond)
}

// finish mutes the connection for the request's remaining throttle time
// and returns it for the response's throttle_time_ms, as Kafka's
// sendResponseMaybeThrottleWithControllerQuota.
func (q *mutationQuota) finish() int32 {
	ms := q.remainingMs(q.s.now())
	q.conn.throttle(ms)
	return int32(ms)
}

// errIPRateThrottled refuses a connection over its address's
// connection_creation_rate.
var errIPRateThrottled = errors.New("connection creation rate of the address exceeded")

// ipRateAdmit counts a new connection from addr against its ip entity's
// connection_creation_rate (KIP-612). Over the quota it returns
// errIPRateThrottled and closes the socket once the throttle time has
// passed, as Kafka's Acceptor keeps a throttled socket open for that time
// before it closes it (so that a client does not reconnect at once).
func (s *Server) ipRateAdmit(nc net.Conn, listener string, addr netip.Addr) error {
	limit, ok := clientquota.IPLimit(s.meta.Image(), addr)
	if !ok {
		return nil
	}
	ms := s.byteQuotas.ipRates.Record(addr, limit, s.now())
	if ms <= 0 {
		return nil
	}
	s.log.Info("throttled connection: the address is over its connection_creation_rate",
		"ip", addr, "rate", limit, "listener", listener, "close_after_ms", ms)
	time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { nc.Close() })
	return errIPRateThrottled
}
