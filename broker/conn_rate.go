package broker

import (
	"math"
	"time"

	"github.com/gregorbroker/gregor/broker/internal/clientquota"
	"github.com/gregorbroker/gregor/config"
)

// connRates hold max.connection.creation.rate: the broker's rate over its
// listeners (the inter-broker one excepted) and each listener's own, as
// Kafka's ConnectionQuotas. Over either, the acceptor waits the throttle
// time before it takes the connection on, so the rate of new connections
// stays at the limit; the IP rates of KIP-612 (quota.go) close instead.
type connRates struct {
	brokerLimit int32
	broker      *clientquota.ConnRate
	// listenerLimit and listener have the listeners with their own rate,
	// by upper-cased name; written once by newConnRates.
	listenerLimit map[string]int32
	listener      map[string]*clientquota.ConnRate
	interBroker   string
}

func newConnRates(cfg *config.Broker) connRates {
	w := time.Duration(cfg.QuotaWindowSizeSeconds) * time.Second
	r := connRates{
		brokerLimit:   cfg.MaxConnectionCreationRate,
		broker:        clientquota.NewConnRate(int(cfg.QuotaWindowNum), w),
		listenerLimit: cfg.ListenerMaxConnectionCreationRate,
		listener:      map[string]*clientquota.ConnRate{},
		interBroker:   cfg.InterBrokerListenerName,
	}
	for l := range r.listenerLimit {
		r.listener[l] = clientquota.NewConnRate(int(cfg.QuotaWindowNum), w)
	}
	return r
}

// record counts a connection accepted on listener at now and returns how
// long the acceptor is to wait before it takes the connection on.
func (r *connRates) record(listener string, now time.Time) time.Duration {
	ms := 0
	if limit, ok := r.listenerLimit[listener]; ok && limit < math.MaxInt32 {
		ms = r.listener[listener].Record(float64(limit), now)
	}
	if listener != r.interBroker && r.brokerLimit < math.MaxInt32 {
		ms = max(ms, r.broker.Record(float64(r.brokerLimit), now))
	}
	return time.Duration(ms) * time.Millisecond
}

// throttleAccept waits, in listener's acceptor, for the connection rates
// to allow the connection just accepted; false once the server stops.
func (s *Server) throttleAccept(listener string) bool {
	d := s.connRates.record(listener, s.now())
	if d <= 0 {
		return true
	}
	s.log.Debug("throttling the acceptor: max.connection.creation.rate reached", "listener", listener, "wait", d)
	select {
	case <-time.After(d):
		return true
	case <-s.ctx.Done():
		return false
	}
}
