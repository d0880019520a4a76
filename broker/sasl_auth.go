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
// Re-authentication (KIP-368) is not served: connections.max.reauth.ms
// must be 0, so the session lifetime returned is 0.

// errAuthFailed marks an authentication the client failed, as opposed to
// a connection error.
var errAuthFailed = errors.New("authentication failed")

type saslAuth struct {
	s   *Server
	nc  net.Conn
	sec *listenerSecurity
}

// authenticateSASL runs the exchange and returns the authenticated
// principal and the mechanism used.
func (s *Server) authenticateSASL(nc net.Conn, sec *listenerSecurity) (security.Principal, string, error) {
	a := &saslAuth{s: s, nc: nc, sec: sec}
	var (
		session       security.Session
		mechanism     string
		headers       = true // false after a SaslHandshake v0
		versionsSeen  bool
		handshakeSeen bool
	)
	for {
		frame, err := a.read()
		if err != nil {
			return security.Principal{}, "", err
		}
		if handshakeSeen && !headers {
			reply, done, err := session.Step(frame)
			if err != nil {
				return security.Principal{}, "", fmt.Errorf("%w with SASL mechanism %s: %w", errAuthFailed, mechanism, err)
			}
			if err := a.writeRaw(reply); err != nil {
				return security.Principal{}, "", err
			}
			if done {
				return session.Principal(), mechanism, nil
			}
			continue
		}
		key, version, corr, err := protocol.PeekKey(frame)
		if err != nil {
			return security.Principal{}, "", fmt.Errorf("%w: %w", errAuthFailed, err)
		}
		if !handshakeSeen {
			switch key {
			case apiKeyApiVersions:
				if versionsSeen {
					return security.Principal{}, "", fmt.Errorf("%w: unexpected ApiVersions request after the first during SASL handshake", errAuthFailed)
				}
				if !s.versions.Supports(key, version) {
					// The client retries at a version both know.
					if err := a.write(corr, s.unsupportedApiVersionsResponse()); err != nil {
						return security.Principal{}, "", err
					}
					continue
				}
				if _, _, err := protocol.ParseRequest(frame); err != nil {
					return security.Principal{}, "", fmt.Errorf("%w: malformed ApiVersions: %w", errAuthFailed, err)
				}
				versionsSeen = true
				if err := a.write(corr, s.apiVersionsResponse(version)); err != nil {
					return security.Principal{}, "", err
				}
			case apiKeySaslHandshake:
				req, err := a.parse(frame, key, version)
				if err != nil {
					return security.Principal{}, "", err
				}
				hs := req.(*kmsg.SASLHandshakeRequest)
				resp := hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
				resp.SupportedMechanisms = slices.Clone(sec.cfg.SASLMechanisms)
				m, ok := sec.mechs[hs.Mechanism]
				if !ok {
					resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
					if err := a.write(corr, resp); err != nil {
						return security.Principal{}, "", err
					}
					return security.Principal{}, "", fmt.Errorf("%w: unsupported SASL mechanism %q", errAuthFailed, hs.Mechanism)
				}
				if err := a.write(corr, resp); err != nil {
					return security.Principal{}, "", err
				}
				handshakeSeen, headers = true, version >= 1
				mechanism, session = hs.Mechanism, m.Start()
			default:
				return security.Principal{}, "", fmt.Errorf("%w: unexpected Kafka request of type %s during SASL handshake", errAuthFailed, kmsg.NameForKey(key))
			}
			continue
		}
		if key != apiKeySaslAuthenticate {
			return security.Principal{}, "", fmt.Errorf("%w: unexpected Kafka request of type %s during SASL authentication", errAuthFailed, kmsg.NameForKey(key))
		}
		req, err := a.parse(frame, key, version)
		if err != nil {
			return security.Principal{}, "", err
		}
		ar := req.(*kmsg.SASLAuthenticateRequest)
		resp := ar.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		reply, done, err := session.Step(ar.SASLAuthBytes)
		if err != nil {
			var ae *security.AuthError
			msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
			if errors.As(err, &ae) {
				msg = ae.Msg
			}
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			resp.ErrorMessage = &msg
			if werr := a.write(corr, resp); werr != nil {
				return security.Principal{}, "", werr
			}
			return security.Principal{}, "", fmt.Errorf("%w with SASL mechanism %s: %w", errAuthFailed, mechanism, err)
		}
		resp.SASLAuthBytes = reply
		if resp.SASLAuthBytes == nil {
			resp.SASLAuthBytes = []byte{}
		}
		if err := a.write(corr, resp); err != nil {
			return security.Principal{}, "", err
		}
		if done {
			return session.Principal(), mechanism, nil
		}
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
