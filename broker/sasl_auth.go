package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/security"
)

// The SASL exchange of a connection on a SASL listener, run before any
// other request is read, as Kafka's SaslServerAuthenticator does:
//
//   - first, an ApiVersions (once answered, no second) and a SaslHandshake
//     naming one of the listener's mechanisms; any other request closes
//     the connection unanswered;
//   - after a SaslHandshake v1, SaslAuthenticate requests carry the
//     mechanism's tokens; any other request closes the connection;
//   - after a SaslHandshake v0 (clients before Kafka 1.0), the tokens
//     travel as bare size-prefixed frames, without Kafka headers, and so
//     do the server's replies;
//   - a failed authentication is answered (SASL_AUTHENTICATION_FAILED
//     with the reason, or UNSUPPORTED_SASL_MECHANISM) where the framing
//     allows it, and the connection is closed;
//   - no frame may be larger than sasl.server.max.receive.size.
//
// Re-authentication (KIP-368): a session ends when its credential expires
// (an OAUTHBEARER token's exp) or after connections.max.reauth.ms (per
// listener and mechanism), whichever is first; SaslAuthenticate v1+
// tells the client its lifetime. While a session has an end, a
// SaslHandshake on the connection (no more than one a second) begins a
// re-authentication (conn.reauthenticate), which must use the same
// mechanism and end with the same principal; once it has ended, any other
// request closes the connection (conn.readLoop).

// errAuthFailed marks an authentication the client failed, as opposed to
// a connection error.
var errAuthFailed = errors.New("authentication failed")

// saslSession is a connection's authenticated SASL session.
type saslSession struct {
	mechanism string
	principal security.Principal
	// expiry is when the session ends (zero: never): a request other than
	// a SaslHandshake beginning re-authentication after it closes the
	// connection.
	expiry time.Time
	// reauthStarted is when the last re-authentication began: as Kafka, a
	// SaslHandshake within a second of it is not taken as one.
	reauthStarted time.Time
}

type saslAuth struct {
	s   *Server
	nc  net.Conn
	sec *listenerSecurity
	// first is a frame already read: the SaslHandshake that begins a
	// re-authentication.
	first []byte
	// prev is the session being re-authenticated, nil on the first
	// authentication.
	prev *saslSession
	// readFrame reads the next frame of a re-authentication through the
	// connection's read-ahead buffer; nil: read reads from nc.
	readFrame func() ([]byte, error)
}

// authenticateSASL runs the exchange and returns the session.
func (s *Server) authenticateSASL(nc net.Conn, sec *listenerSecurity) (*saslSession, error) {
	a := &saslAuth{s: s, nc: nc, sec: sec}
	return a.run()
}

// phase is "authentication" or "re-authentication", as Kafka's messages
// say.
func (a *saslAuth) phase() string {
	if a.prev != nil {
		return "re-authentication"
	}
	return "authentication"
}

// run is the exchange, as Kafka's SaslServerAuthenticator: on a
// re-authentication it starts from the SaslHandshake already read and
// takes no ApiVersions.
func (a *saslAuth) run() (*saslSession, error) {
	var (
		session       security.Session
		mechanism     string
		headers       = true // false after a SaslHandshake v0
		versionsSeen  = a.prev != nil
		handshakeSeen bool
		badMechanism  string // a re-authentication asked for another mechanism
	)
	for {
		frame := a.first
		a.first = nil
		if frame == nil {
			var err error
			if frame, err = a.read(); err != nil {
				return nil, err
			}
		}
		if handshakeSeen && !headers {
			if badMechanism != "" {
				return nil, fmt.Errorf("%w: %s", errAuthFailed, badMechanism)
			}
			reply, done, err := session.Step(frame)
			if err != nil {
				return nil, fmt.Errorf("%w with SASL mechanism %s: %w", errAuthFailed, mechanism, err)
			}
			a.logRefusal(session)
			var sess *saslSession
			if done {
				if sess, _, err = a.complete(session, mechanism); err != nil {
					return nil, err
				}
			}
			if err := a.writeRaw(reply); err != nil {
				return nil, err
			}
			if done {
				return sess, nil
			}
			continue
		}
		key, version, corr, err := protocol.PeekKey(frame)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errAuthFailed, err)
		}
		if !handshakeSeen {
			switch key {
			case apiKeyApiVersions:
				if versionsSeen {
					return nil, fmt.Errorf("%w: unexpected ApiVersions request after the first during SASL handshake", errAuthFailed)
				}
				if !a.s.versions.Supports(key, version) {
					// The client retries at a version both know.
					if err := a.write(corr, a.s.unsupportedApiVersionsResponse()); err != nil {
						return nil, err
					}
					continue
				}
				if _, _, err := protocol.ParseRequest(frame); err != nil {
					return nil, fmt.Errorf("%w: malformed ApiVersions: %w", errAuthFailed, err)
				}
				versionsSeen = true
				if err := a.write(corr, a.s.apiVersionsResponse(version)); err != nil {
					return nil, err
				}
			case apiKeySaslHandshake:
				req, err := a.parse(frame, key, version)
				if err != nil {
					return nil, err
				}
				hs := req.(*kmsg.SASLHandshakeRequest)
				resp := hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
				resp.SupportedMechanisms = slices.Clone(a.sec.cfg.SASLMechanisms)
				m, ok := a.sec.mechs[hs.Mechanism]
				if !ok {
					resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
					if err := a.write(corr, resp); err != nil {
						return nil, err
					}
					return nil, fmt.Errorf("%w: unsupported SASL mechanism %q", errAuthFailed, hs.Mechanism)
				}
				if err := a.write(corr, resp); err != nil {
					return nil, err
				}
				handshakeSeen, headers = true, version >= 1
				mechanism, session = hs.Mechanism, m.Start()
				// As Kafka: the handshake succeeds, and the exchange fails
				// at the client's first token.
				if a.prev != nil && mechanism != a.prev.mechanism {
					badMechanism = fmt.Sprintf("SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'", mechanism, a.prev.mechanism)
				}
			default:
				return nil, fmt.Errorf("%w: unexpected Kafka request of type %s during SASL handshake", errAuthFailed, kmsg.NameForKey(key))
			}
			continue
		}
		if badMechanism != "" {
			// Kafka fails without answering.
			return nil, fmt.Errorf("%w: %s", errAuthFailed, badMechanism)
		}
		if key != apiKeySaslAuthenticate {
			return nil, fmt.Errorf("%w: unexpected Kafka request of type %s during SASL authentication", errAuthFailed, kmsg.NameForKey(key))
		}
		req, err := a.parse(frame, key, version)
		if err != nil {
			return nil, err
		}
		ar := req.(*kmsg.SASLAuthenticateRequest)
		resp := ar.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		reply, done, err := session.Step(ar.SASLAuthBytes)
		var sess *saslSession
		if err == nil && done {
			sess, resp.SessionLifetimeMillis, err = a.complete(session, mechanism)
		}
		if err != nil {
			var ce *security.ClientError
			if errors.As(err, &ce) {
				// An unexpected failure of Kafka's SASL server: the
				// connection closes unanswered.
				return nil, fmt.Errorf("%w with SASL mechanism %s: %w", errAuthFailed, mechanism, err)
			}
			var ae *security.AuthError
			msg := "Authentication failed during " + a.phase() + " due to invalid credentials with SASL mechanism " + mechanism
			if errors.As(err, &ae) {
				msg = ae.Msg
			}
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = &msg
			if werr := a.write(corr, resp); werr != nil {
				return nil, werr
			}
			return nil, fmt.Errorf("%w with SASL mechanism %s: %w", errAuthFailed, mechanism, err)
		}
		a.logRefusal(session)
		resp.SASLAuthBytes = reply
		if resp.SASLAuthBytes == nil {
			resp.SASLAuthBytes = []byte{}
		}
		if err := a.write(corr, resp); err != nil {
			return nil, err
		}
		if done {
			return sess, nil
		}
	}
}

// complete builds the session of a finished exchange, its lifetime in
// milliseconds as Kafka's calcCompletionTimesAndReturnSessionLifetimeMs
// computes it (the credential's remaining life, connections.max.reauth.ms
// for the mechanism, or the smaller of both), and, on a
// re-authentication, refuses another principal.
func (a *saslAuth) complete(session security.Session, mechanism string) (*saslSession, int64, error) {
	now := time.Now()
	sess := &saslSession{mechanism: mechanism, principal: session.Principal()}
	if a.prev != nil {
		if p := a.prev.principal; p != sess.principal {
			return nil, 0, &security.AuthError{Msg: fmt.Sprintf("Cannot change principals during re-authentication from %s.%s: %s.%s",
				p.Type, p.Name, sess.principal.Type, sess.principal.Name)}
		}
		sess.reauthStarted = a.prev.reauthStarted
	}
	maxReauth := a.sec.cfg.ReauthMs[mechanism]
	var credExpiry time.Time
	hasCred := false
	if es, ok := session.(security.ExpiringSession); ok {
		credExpiry, hasCred = es.CredentialExpiry()
	}
	if !hasCred && maxReauth <= 0 {
		return sess, 0, nil
	}
	var lifetime int64
	switch {
	case !hasCred:
		lifetime = maxReauth
	case maxReauth <= 0:
		lifetime = credExpiry.UnixMilli() - now.UnixMilli()
	default:
		lifetime = min(credExpiry.UnixMilli()-now.UnixMilli(), maxReauth)
	}
	lifetime = max(lifetime, 0)
	sess.expiry = now.Add(time.Duration(lifetime) * time.Millisecond)
	return sess, lifetime, nil
}

// logRefusal logs why a mechanism refused a credential while the
// exchange goes on (an OAUTHBEARER token: the client is told only the
// RFC 7628 status), as Kafka's validator logs it.
func (a *saslAuth) logRefusal(session security.Session) {
	if r, ok := session.(interface{ Refusal() string }); ok && r.Refusal() != "" {
		a.s.log.Info("SASL credential refused", "remote", a.nc.RemoteAddr().String(), "phase", a.phase(), "reason", r.Refusal())
	}
}

// deadline is when the next read or write of the exchange must be done:
// an exchange that stalls is an idle connection.
func (a *saslAuth) deadline() time.Time {
	if idle := time.Duration(a.s.cfg.ConnectionsMaxIdleMs) * time.Millisecond; idle > 0 {
		return time.Now().Add(idle)
	}
	return time.Time{}
}

// read reads one size-prefixed frame of at most sasl.server.max.receive.size.
func (a *saslAuth) read() ([]byte, error) {
	if a.readFrame != nil {
		return a.readFrame()
	}
	if err := a.nc.SetReadDeadline(a.deadline()); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(a.nc, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > a.sec.cfg.SASLMaxReceiveSize {
		return nil, fmt.Errorf("%w: invalid receive size %d before authentication (sasl.server.max.receive.size %d)", errAuthFailed, n, a.sec.cfg.SASLMaxReceiveSize)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(a.nc, frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// parse decodes a request the exchange serves, refusing a version it
// does not.
func (a *saslAuth) parse(frame []byte, key, version int16) (kmsg.Request, error) {
	if !a.s.versions.Supports(key, version) {
		return nil, fmt.Errorf("%w: %s version %d is not supported", errAuthFailed, kmsg.NameForKey(key), version)
	}
	_, req, err := protocol.ParseRequest(frame)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed %s: %w", errAuthFailed, kmsg.NameForKey(key), err)
	}
	return req, nil
}

func (a *saslAuth) write(corr int32, resp kmsg.Response) error {
	return a.send(protocol.AppendResponse(nil, corr, resp))
}

// writeRaw sends a token without Kafka headers (after SaslHandshake v0).
func (a *saslAuth) writeRaw(token []byte) error {
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(token)), uint32(len(token)))
	return a.send(append(buf, token...))
}

func (a *saslAuth) send(b []byte) error {
	if err := a.nc.SetWriteDeadline(a.deadline()); err != nil {
		return err
	}
	if _, err := a.nc.Write(b); err != nil {
		return err
	}
	return a.nc.SetWriteDeadline(time.Time{})
}
