package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/gregorbroker/gregor/config"
)

// The client side of the connections a node opens to another node's
// inter-broker or controller listener, built from that listener's
// settings as Kafka builds its inter-broker clients.

// Login modules whose username and password options are a broker's own
// credentials, as Kafka's PlainLoginModule and ScramLoginModule read them.
const (
	plainLoginModule = plainModule
	scramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// PeerCredentials returns this node's SASL user and password for
// connections to p's listener: the username and password options of the
// listener's JAAS config for p.Mechanism. Errors name the property.
func PeerCredentials(p config.PeerSecurity) (user, password string, err error) {
	e, err := ParseJAAS(p.JAAS)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", p.JAASKey, err)
	}
	want := plainLoginModule
	if p.Mechanism != config.MechanismPlain {
		want = scramLoginModule
	}
	if e.LoginModule != want {
		return "", "", fmt.Errorf("%s: %s needs login module %s, not %s", p.JAASKey, p.Mechanism, want, e.LoginModule)
	}
	user, password = e.Options["username"], e.Options["password"]
	if user == "" || password == "" {
		return "", "", fmt.Errorf("%s: the username and password options, this node's credentials on listener %s, must both be set", p.JAASKey, p.Listener)
	}
	return user, password, nil
}

// ClientTLS is the TLS configuration of connections to p's listener: the
// peer's certificate verified against the listener's trust store (the
// system's roots without one) and, with p.VerifyHostname, against the
// host dialled (the caller sets ServerName); the listener's key store,
// when it has one, presented as this node's certificate (mutual TLS).
// Errors name the property at fault.
func ClientTLS(p config.PeerSecurity) (*tls.Config, error) {
	s := p.SSL
	src := func(key string) string {
		if n := s.Source[key]; n != "" {
			return n
		}
		return key
	}
	roots, err := loadTruststore(s)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %s: %w", p.Listener, src("ssl.truststore.location"), err)
	}
	cfg := &tls.Config{RootCAs: roots}
	if s.KeystoreLocation != "" || s.KeystoreCertificateChain != "" {
		cert, err := loadKeystore(s)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %s: %w", p.Listener, src("ssl.keystore.location"), err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	lo, hi := uint16(0), uint16(0)
	versions := map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}
	for _, v := range s.EnabledProtocols {
		if lo == 0 || versions[v] < lo {
			lo = versions[v]
		}
		hi = max(hi, versions[v])
	}
	if s.Protocol == "TLSv1.2" {
		hi = min(hi, tls.VersionTLS12)
	}
	if len(s.CipherSuites) > 0 {
		ids, with13, err := cipherSuites(s.CipherSuites)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %s: %w", p.Listener, src("ssl.cipher.suites"), err)
		}
		cfg.CipherSuites = ids
		if !with13 {
			hi = min(hi, tls.VersionTLS12)
		}
		if len(ids) == 0 {
			lo = max(lo, tls.VersionTLS13)
		}
	}
	if lo > hi {
		return nil, fmt.Errorf("listener %s: %s, %s and %s leave no TLS version to offer",
			p.Listener, src("ssl.enabled.protocols"), src("ssl.protocol"), src("ssl.cipher.suites"))
	}
	cfg.MinVersion, cfg.MaxVersion = lo, hi
	if !p.VerifyHostname {
		// ssl.endpoint.identification.algorithm is empty: the chain is
		// still verified, the host name is not.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the peer sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}
