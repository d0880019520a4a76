package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/security"
	"github.com/gregorbroker/gregor/security/authz"
)

// The connections this node opens to the others, secured as the listener
// they reach asks: the replica fetchers', the transaction markers' and
// the KIP-890 verifications' (kgo clients on the inter-broker listener)
// and the metadata quorum's (the raft transport on the controller
// listener, which speaks Kafka's SaslHandshake and SaslAuthenticate
// before its own frames when the listener is SASL).

// peerSecurity is the client side of one listener of the other nodes.
type peerSecurity struct {
	cfg       config.PeerSecurity
	tls       *tls.Config    // nil: not TLS
	mechanism sasl.Mechanism // nil: no SASL
	user      string         // the SASL user, for logs
}

// newPeerSecurity loads the trust and key stores and reads the SASL
// credentials of p, so that a bad one stops start-up.
func newPeerSecurity(p config.PeerSecurity) (*peerSecurity, error) {
	ps := &peerSecurity{cfg: p}
	if p.TLS() {
		t, err := security.ClientTLS(p)
		if err != nil {
			return nil, fmt.Errorf("security: %w", err)
		}
		ps.tls = t
	}
	if p.SASL() {
		user, pass, err := security.PeerCredentials(p)
		if err != nil {
			return nil, fmt.Errorf("security: %w", err)
		}
		ps.user = user
		switch p.Mechanism {
		case config.MechanismPlain:
			ps.mechanism = plain.Auth{User: user, Pass: pass}.AsMechanism()
		case config.MechanismScramSHA256:
			ps.mechanism = scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		case config.MechanismScramSHA512:
			ps.mechanism = scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		default:
			return nil, fmt.Errorf("security: %s: no client for SASL mechanism %s", p.MechanismKey, p.Mechanism)
		}
	}
	return ps, nil
}

// kgoOpts are the client options that secure a kgo client's connections
// to the listener.
func (ps *peerSecurity) kgoOpts() []kgo.Opt {
	var opts []kgo.Opt
	if ps.tls != nil {
		// kgo clones the config and sets ServerName to the host dialled.
		opts = append(opts, kgo.DialTLSConfig(ps.tls))
	}
	if ps.mechanism != nil {
		opts = append(opts, kgo.SASL(ps.mechanism))
	}
	return opts
}

// principal is who this node is to the peer, for the start-up log: the
// SASL user, the subject of the client certificate, or User:ANONYMOUS.
func (ps *peerSecurity) principal(mapper *security.PrincipalMapper) string {
	switch {
	case ps.mechanism != nil:
		return security.User(ps.user).String()
	case ps.tls != nil && len(ps.tls.Certificates) > 0 && ps.tls.Certificates[0].Leaf != nil && mapper != nil:
		if p, err := mapper.CertificatePrincipal([]*x509.Certificate{ps.tls.Certificates[0].Leaf}); err == nil {
			return p.String()
		}
	}
	return security.Anonymous.String()
}

// secureDial secures c, a connection to a controller at addr: the TLS
// handshake, then the SASL exchange.
func (ps *peerSecurity) secureDial(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ps.tls != nil {
		cfg := ps.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	if ps.mechanism != nil {
		if err := saslClient(ctx, c, host, ps.mechanism); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// saslClient authenticates on c as a Kafka client does: SaslHandshake v1
// naming the mechanism, then its tokens in SaslAuthenticate v1 requests
// until the mechanism is done.
func saslClient(ctx context.Context, c net.Conn, host string, m sasl.Mechanism) error {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
		defer c.SetDeadline(time.Time{})
	}
	rw := bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
	corr := int32(0)
	call := func(req kmsg.Request) (kmsg.Response, error) {
		corr++
		if _, err := rw.Write(protocol.AppendRequest(nil, corr, "gregor-controller-client", req)); err != nil {
			return nil, err
		}
		if err := rw.Flush(); err != nil {
			return nil, err
		}
		_, resp, err := protocol.ReadResponse(rw, 1<<20, nil, corr, req)
		return resp, err
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = m.Name()
	r, err := call(hs)
	if err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	hsResp := r.(*kmsg.SASLHandshakeResponse)
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake %s (the controller enables %v): %w", m.Name(), hsResp.SupportedMechanisms, err)
	}
	session, token, err := m.Authenticate(ctx, host)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", m.Name(), err)
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = token
		r, err := call(req)
		if err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			return fmt.Errorf("SASL %s: %w: %s", m.Name(), err, msg)
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("SASL %s: %w", m.Name(), err)
		}
		if done {
			return nil
		}
		token = next
	}
}

// secureControllerConn secures a connection accepted on the controller
// listener named listener as the client listeners are (TLS, SASL), and
// then, with an authorizer, requires CLUSTER_ACTION on the cluster of its
// principal, as Kafka's controller asks of brokers and controllers.
func (s *Server) secureControllerConn(listener string) func(ctx context.Context, c net.Conn) (net.Conn, error) {
	return func(ctx context.Context, c net.Conn) (net.Conn, error) {
		sc, principal, _, err := s.secureConn(c, listener) // the quorum transport never re-authenticates: its frames are not Kafka requests
		if err != nil {
			if errors.Is(err, errAuthFailed) {
				s.log.Info("closing connection: failed authentication", "remote", c.RemoteAddr().String(), "listener", listener, "err", err)
				// Held for connection.failed.authentication.delay.ms
				// before the transport closes it, as on the other
				// listeners.
				if d := time.Duration(s.cfg.ConnectionFailedAuthenticationDelayMs) * time.Millisecond; d > 0 {
					t := time.NewTimer(d)
					select {
					case <-t.C:
					case <-s.ctx.Done():
						t.Stop()
					}
				}
			}
			return nil, err
		}
		if s.acls == nil || s.acls.a.IsSuperUser(principal.String()) {
			return sc, nil
		}
		if !s.metaStarted.Load() {
			return nil, fmt.Errorf("principal %s: the ACLs are not loaded yet", principal)
		}
		req := authz.Request{Principal: principal.String(), Host: remoteHost(c.RemoteAddr())}
		if !s.authorizer().Authorize(req, authz.OpClusterAction, authz.ResourceCluster, authz.ClusterName) {
			s.log.Info("closing connection: principal not authorized", "remote", c.RemoteAddr().String(), "listener", listener,
				"principal", principal.String(), "needs", "CLUSTER_ACTION on the cluster")
			return nil, fmt.Errorf("principal %s lacks CLUSTER_ACTION on the cluster", principal)
		}
		return sc, nil
	}
}
