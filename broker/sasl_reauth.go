package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/gregorbroker/gregor/protocol"
)

// Re-authentication (KIP-368) of an authenticated SASL connection, as
// Kafka's SocketServer and KafkaChannel decide it.

// minReauthInterval is Kafka's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a
// SaslHandshake sooner after the last re-authentication began is an
// ordinary request (answered ILLEGAL_SASL_STATE).
const minReauthInterval = time.Second

// checkSession looks at a request read on a connection whose SASL session
// has an end: a SaslHandshake begins a re-authentication, run here
// (reauth true); any other request after the end closes the connection
// (ok false), as Kafka's processCompletedReceives. A failed
// re-authentication closes it too.
func (c *conn) checkSession(fr *frameReader, frame []byte) (reauth, ok bool) {
	key, _, _, err := protocol.PeekKey(frame)
	now := time.Now()
	if err == nil && key == apiKeySaslHandshake &&
		(c.sasl.reauthStarted.IsZero() || now.Sub(c.sasl.reauthStarted) >= minReauthInterval) {
		if err := c.reauthenticate(fr, frame, now); err != nil {
			if errors.Is(err, errAuthFailed) {
				c.log.Info("closing connection: failed re-authentication", "principal", c.principal.String(), "err", err)
			} else {
				c.log.Debug("connection closed during re-authentication", "err", err)
			}
			return true, false
		}
		return true, true
	}
	if now.After(c.sasl.expiry) {
		c.log.Debug("closing connection: SASL session expired", "principal", c.principal.String(),
			"expired", c.sasl.expiry, "request", key)
		return false, false
	}
	return false, true
}

// reauthenticate runs the exchange again from the SaslHandshake read,
// once every earlier request has been answered (the exchange writes to
// the socket itself; Kafka's clients wait for their responses before
// re-authenticating anyway). Its frames are read through the
// connection's read-ahead buffer, bounded by sasl.server.max.receive.size.
func (c *conn) reauthenticate(fr *frameReader, handshake []byte, now time.Time) error {
	// The writer runs only while responses are queued or awaited; the
	// reader, which alone starts it, is here.
	c.writers.Wait()
	if err := c.ctx.Err(); err != nil {
		return err
	}
	sec := c.s.security[c.listener]
	prev := *c.sasl
	prev.reauthStarted = now
	a := &saslAuth{s: c.s, nc: c.nc, sec: sec, first: handshake, prev: &prev}
	a.readFrame = func() ([]byte, error) {
		if err := fr.waitFirstByte(); err != nil {
			return nil, err
		}
		size, err := fr.readSize(sec.cfg.SASLMaxReceiveSize)
		if err != nil {
			return nil, fmt.Errorf("%w: invalid receive size during re-authentication: %w", errAuthFailed, err)
		}
		return fr.readBody(size)
	}
	sess, err := a.run()
	if err != nil {
		return err
	}
	c.sasl = sess
	c.log.Debug("connection re-authenticated", "principal", sess.principal.String(), "mechanism", sess.mechanism, "expiry", sess.expiry)
	return nil
}
