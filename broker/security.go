package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security"
)

// listenerSecurity is what a client listener needs to secure and
// authenticate its connections, built once at start.
type listenerSecurity struct {
	cfg config.ListenerSecurity
	// tls is the config handshakes start from (SSL, SASL_SSL): it hands
	// each ClientHello the current config, so a dynamic key or trust store
	// change applies to new connections at once and open ones keep theirs.
	tls *tls.Config
	cur atomic.Pointer[tls.Config]
	// stores is the listener's dynamic key and trust store properties
	// cur was built with; reloadMu serializes the reloads.
	reloadMu sync.Mutex
	stores   map[string]string
	mapper   *security.PrincipalMapper     // SSL: the client certificate's principal
	mechs    map[string]security.Mechanism // SASL_PLAINTEXT, SASL_SSL
}

// ScramCredentials is where SCRAM mechanisms look users up. The default
// (a nil Options.ScramCredentials) is the metadata image's credentials,
// which AlterUserScramCredentials writes.
type ScramCredentials = security.CredentialStore

// imageScram looks SCRAM credentials up in the current metadata image, so
// that a credential is usable as soon as this broker has applied the
// record that created it and refused once it has applied its removal.
type imageScram struct{ image func() *image.Image }

// ScramCredential implements security.CredentialStore.
func (st imageScram) ScramCredential(mechanism, user string) (security.ScramCredential, bool, error) {
	img := st.image()
	if img == nil {
		return security.ScramCredential{}, false, errors.New("the metadata image is not loaded yet")
	}
	c, ok := img.ScramCredential(user, image.ScramMechanismType(mechanism))
	if !ok {
		return security.ScramCredential{}, false, nil
	}
	return security.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: int(c.Iterations)}, true, nil
}

// newListenerSecurity loads the key and trust stores, principal mapping
// rules and SASL users of every client listener that is not PLAINTEXT,
// so that a bad one stops start-up before anything is opened.
func newListenerSecurity(cfg *config.Broker, listeners []config.Listener, scram ScramCredentials, log *slog.Logger) (map[string]*listenerSecurity, error) {
	out := map[string]*listenerSecurity{}
	for _, l := range listeners {
		ls := cfg.ListenerSecurity(l.Name)
		if !ls.TLS() && !ls.SASL() {
			continue
		}
		sec := &listenerSecurity{cfg: ls}
		if ls.TLS() {
			t, err := security.ServerTLS(ls)
			if err != nil {
				return nil, fmt.Errorf("security: %w", err)
			}
			sec.cur.Store(t)
			sec.tls = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				return sec.cur.Load(), nil
			}}
			m, err := security.NewPrincipalMapper(ls.SSL.PrincipalMappingRules)
			if err != nil {
				return nil, fmt.Errorf("security: listener %s: %s: %w", l.Name, ls.SSL.Source["ssl.principal.mapping.rules"], err)
			}
			sec.mapper = m
		}
		if ls.SASL() {
			m, err := security.NewMechanisms(ls, scram, log)
			if err != nil {
				return nil, fmt.Errorf("security: %w", err)
			}
			sec.mechs = m
		}
		out[l.Name] = sec
	}
	return out, nil
}

// closeListenerSecurity stops what the listeners' mechanisms run in the
// background (an http(s) JWKS's refresher).
func closeListenerSecurity(secs map[string]*listenerSecurity) {
	for _, sec := range secs {
		for _, m := range sec.mechs {
			if c, ok := m.(interface{ Close() }); ok {
				c.Close()
			}
		}
	}
}

// secureConn runs what a connection goes through before its first
// request is served: the TLS handshake on SSL and SASL_SSL listeners, the
// SASL exchange on SASL ones. It returns the connection to use (TLS over
// nc) and its principal: User:ANONYMOUS on PLAINTEXT and on SSL without a
// client certificate, the certificate's mapped subject on SSL, the SASL
// user on SASL listeners, whose session it returns too. An error closes
// the connection.
func (s *Server) secureConn(nc net.Conn, listener string) (net.Conn, security.Principal, *saslSession, error) {
	sec := s.security[listener]
	if sec == nil {
		return nc, security.Anonymous, nil, nil
	}
	principal := security.Anonymous
	if sec.tls != nil {
		tc := tls.Server(nc, sec.tls)
		ctx := s.ctx
		// A handshake that does not finish is an idle connection.
		if idle := time.Duration(s.cfg.ConnectionsMaxIdleMs) * time.Millisecond; idle > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, idle)
			defer cancel()
		}
		if err := tc.HandshakeContext(ctx); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nc, principal, nil, fmt.Errorf("TLS handshake: %w", err)
			}
			// A bad certificate, protocol or cipher: Kafka's
			// SslAuthenticationException.
			return nc, principal, nil, fmt.Errorf("%w: TLS handshake: %w", errAuthFailed, err)
		}
		nc = tc
		if !sec.cfg.SASL() {
			p, err := sec.mapper.CertificatePrincipal(tc.ConnectionState().PeerCertificates)
			if err != nil {
				return nc, principal, nil, fmt.Errorf("principal of the client certificate: %w", err)
			}
			principal = p
		}
	}
	mechanism := ""
	var sess *saslSession
	if sec.mechs != nil {
		var err error
		if sess, err = s.authenticateSASL(nc, sec); err != nil {
			return nc, principal, nil, err
		}
		principal, mechanism = sess.principal, sess.mechanism
	}
	s.log.Debug("connection authenticated", "remote", nc.RemoteAddr().String(), "listener", listener,
		"principal", principal.String(), "mechanism", mechanism)
	return nc, principal, sess, nil
}

// closeFailedAuth closes a connection that failed authentication after
// connection.failed.authentication.delay.ms, as Kafka does, so a client
// guessing passwords gets its answers slowly; other failures close at
// once.
func (s *Server) closeFailedAuth(nc net.Conn, err error) {
	if d := time.Duration(s.cfg.ConnectionFailedAuthenticationDelayMs) * time.Millisecond; d > 0 && errors.Is(err, errAuthFailed) {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
		}
	}
	nc.Close()
}

// logFailedAuth logs a connection that ended before it authenticated: at
// info when the client failed authentication (as Kafka's "Failed
// authentication with ..."), at debug when it went away or stalled.
func (s *Server) logFailedAuth(nc net.Conn, listener string, err error) {
	if errors.Is(err, errAuthFailed) {
		s.log.Info("closing connection: failed authentication", "remote", nc.RemoteAddr().String(), "listener", listener, "err", err)
		return
	}
	s.log.Debug("connection closed before authentication", "remote", nc.RemoteAddr().String(), "listener", listener, "err", err)
}
