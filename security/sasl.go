package security

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/config"
)

// Mechanism is the server side of one SASL mechanism on one listener.
type Mechanism interface {
	// Name is the mechanism's SASL name (PLAIN, SCRAM-SHA-256...).
	Name() string
	// Start begins the exchange with one client.
	Start() Session
}

// Session is one client's exchange. Step takes the client's next token
// and returns the server's reply; done is set once the client is
// authenticated (the reply, possibly empty, still goes to it). An error
// fails the authentication; an *AuthError's message may be shown to the
// client, any other is replaced by a generic one.
type Session interface {
	Step(token []byte) (reply []byte, done bool, err error)
	// Principal is the authenticated user, once done.
	Principal() Principal
}

// ExpiringSession is a Session whose credential expires (an OAUTHBEARER
// token): the authenticated session lasts no longer (KIP-368).
type ExpiringSession interface {
	Session
	CredentialExpiry() (time.Time, bool)
}

// AuthError is a failed authentication whose message is fit for the
// client, Kafka's SaslAuthenticationException.
type AuthError struct{ Msg string }

func (e *AuthError) Error() string { return e.Msg }

func authErrorf(format string, args ...any) error {
	return &AuthError{Msg: fmt.Sprintf(format, args...)}
}

// NewMechanisms builds the enabled mechanisms of a SASL listener from its
// JAAS configs. scram looks SCRAM credentials up; the SCRAM mechanisms
// cannot be enabled without it. log gets what mechanisms log on their own
// (an OAUTHBEARER JWKS's failed fetches).
func NewMechanisms(ls config.ListenerSecurity, scram CredentialStore, log *slog.Logger) (map[string]Mechanism, error) {
	out := map[string]Mechanism{}
	for _, m := range ls.SASLMechanisms {
		jaasKey := "listener.name." + strings.ToLower(ls.Listener) + "." + strings.ToLower(m) + ".sasl.jaas.config"
		switch m {
		case config.MechanismPlain:
			p, err := NewPlain(ls.JAAS[m])
			if err != nil {
				return nil, fmt.Errorf("listener %s: %s: %w", ls.Listener, jaasKey, err)
			}
			out[m] = p
		case config.MechanismScramSHA256, config.MechanismScramSHA512:
			if scram == nil {
				return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s needs a SCRAM credential store", ls.Listener, m)
			}
			s, err := NewScram(m, scram)
			if err != nil {
				return nil, fmt.Errorf("listener %s: %w", ls.Listener, err)
			}
			out[m] = s
		case config.MechanismOAuthBearer:
			o, err := NewOAuthBearer(ls.OAuthBearer, log)
			if err != nil {
				return nil, fmt.Errorf("listener %s: OAUTHBEARER: %w", ls.Listener, err)
			}
			out[m] = o
		default:
			return nil, fmt.Errorf("listener %s: SASL mechanism %s is not supported", ls.Listener, m)
		}
	}
	return out, nil
}

// plainModule is the login module whose user_<name> options list the
// PLAIN users, as Kafka's PlainServerCallbackHandler reads them.
const plainModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

// Plain is SASL/PLAIN (RFC 4616) against the users of a JAAS config.
type Plain struct {
	users map[string]string
}

// NewPlain reads the users of a PlainLoginModule JAAS config.
func NewPlain(jaas string) (*Plain, error) {
	e, err := ParseJAAS(jaas)
	if err != nil {
		return nil, err
	}
	if e.LoginModule != plainModule {
		return nil, fmt.Errorf("login module %s is not %s", e.LoginModule, plainModule)
	}
	p := &Plain{users: map[string]string{}}
	for k, v := range e.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok {
			p.users[name] = v
		}
	}
	return p, nil
}

// Name is PLAIN.
func (p *Plain) Name() string { return config.MechanismPlain }

// Start begins one client's exchange.
func (p *Plain) Start() Session { return &plainSession{users: p.users} }

type plainSession struct {
	users map[string]string
	user  string
	done  bool
}

// Step checks "authzid NUL authcid NUL passwd" as Kafka's PlainSaslServer
// does, with its messages.
func (s *plainSession) Step(token []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, errors.New("PLAIN exchange already complete")
	}
	// As Kafka's extractTokens: at most four tokens are counted.
	tokens := bytes.SplitN(token, []byte{0}, 4)
	if len(tokens) != 3 {
		return nil, false, authErrorf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(tokens))
	}
	authzid, user, password := string(tokens[0]), string(tokens[1]), tokens[2]
	if user == "" {
		return nil, false, authErrorf("Authentication failed: username not specified")
	}
	if len(password) == 0 {
		return nil, false, authErrorf("Authentication failed: password not specified")
	}
	want, ok := s.users[user]
	// Compared in constant time, and a missing user costs the same as a
	// wrong password.
	if subtle.ConstantTimeCompare([]byte(want), password) != 1 || !ok {
		return nil, false, authErrorf("Authentication failed: Invalid username or password")
	}
	if authzid != "" && authzid != user {
		return nil, false, authErrorf("Authentication failed: Client requested an authorization id that is different from username")
	}
	s.user, s.done = user, true
	return []byte{}, true, nil
}

func (s *plainSession) Principal() Principal { return User(s.user) }
