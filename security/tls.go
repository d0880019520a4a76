// Package security is what Gregor's SSL and SASL listeners need besides
// the wire: TLS server configurations built from Kafka's ssl.* settings
// (PEM and PKCS12 stores), the principal of a client certificate under
// ssl.principal.mapping.rules, JAAS configs, and the server side of the
// SASL mechanisms PLAIN and SCRAM-SHA-256/512.
//
// It knows nothing of connections or requests: the broker runs the Kafka
// framing (SaslHandshake, SaslAuthenticate) and asks a Session for each
// step.
package security

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/gregorbroker/gregor/config"
)

// tls13Suites are the TLS 1.3 cipher suites by their IANA names. Go
// always enables all of them when TLS 1.3 is, so a list naming only some
// cannot be honoured.
var tls13Suites = []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}

// ServerTLS builds the TLS configuration of a listener from its ssl.*
// settings: the key store, the trust store client certificates are
// checked against, ssl.client.auth, the TLS versions and the cipher
// suites. Errors name the property at fault.
func ServerTLS(ls config.ListenerSecurity) (*tls.Config, error) {
	s := ls.SSL
	src := func(key string) string {
		if n := s.Source[key]; n != "" {
			return n
		}
		return key
	}
	cert, err := loadKeystore(s)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %s: %w", ls.Listener, src("ssl.keystore.location"), err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}

	roots, err := loadTruststore(s)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %s: %w", ls.Listener, src("ssl.truststore.location"), err)
	}
	cfg.ClientCAs = roots
	switch s.ClientAuth {
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		cfg.ClientAuth = tls.NoClientCert
	}

	versions := map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}
	var lo, hi uint16
	for _, p := range s.EnabledProtocols {
		v := versions[p]
		if lo == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	if s.Protocol == "TLSv1.2" {
		// The context is a TLS 1.2 one: nothing above it, as in Java.
		hi = min(hi, tls.VersionTLS12)
	}

	if len(s.CipherSuites) > 0 {
		ids, with13, err := cipherSuites(s.CipherSuites)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %s: %w", ls.Listener, src("ssl.cipher.suites"), err)
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
			ls.Listener, src("ssl.enabled.protocols"), src("ssl.protocol"), src("ssl.cipher.suites"))
	}
	cfg.MinVersion, cfg.MaxVersion = lo, hi
	return cfg, nil
}

// cipherSuites maps IANA suite names to Go's ids. TLS 1.3 suites are all
// listed or none; with13 says they are.
func cipherSuites(names []string) (ids []uint16, with13 bool, err error) {
	byName := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		byName[cs.Name] = cs.ID
	}
	n13 := 0
	for _, n := range names {
		if slices.Contains(tls13Suites, n) {
			n13++
			continue
		}
		id, ok := byName[n]
		if !ok {
			return nil, false, fmt.Errorf("cipher suite %s is not one Go's crypto/tls offers as secure", n)
		}
		ids = append(ids, id)
	}
	if n13 != 0 && n13 != len(tls13Suites) {
		return nil, false, fmt.Errorf("the TLS 1.3 suites cannot be chosen one by one: list all of %s or none", strings.Join(tls13Suites, ", "))
	}
	return ids, n13 > 0, nil
}

// loadKeystore reads the broker's certificate chain and private key.
func loadKeystore(s config.SSLSettings) (tls.Certificate, error) {
	if s.KeystoreType == config.StoreTypePKCS12 {
		data, err := os.ReadFile(s.KeystoreLocation)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("read key store: %w", err)
		}
		if s.KeyPassword != "" && s.KeyPassword != s.KeystorePassword {
			return tls.Certificate{}, errors.New("a PKCS12 key store whose key password (ssl.key.password) differs from the store's (ssl.keystore.password) is not supported")
		}
		key, leaf, chain, err := pkcs12.DecodeChain(data, s.KeystorePassword)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("decode PKCS12 key store (is ssl.keystore.password right?): %w", err)
		}
		c := tls.Certificate{PrivateKey: key, Leaf: leaf, Certificate: [][]byte{leaf.Raw}}
		for _, ca := range chain {
			c.Certificate = append(c.Certificate, ca.Raw)
		}
		return c, checkKeyMatches(c)
	}
	// PEM: a file holding the chain and the key, or both inline.
	chainPEM, keyPEM := []byte(s.KeystoreCertificateChain), []byte(s.KeystoreKey)
	if s.KeystoreLocation != "" {
		data, err := os.ReadFile(s.KeystoreLocation)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("read key store: %w", err)
		}
		chainPEM, keyPEM = data, data
	}
	var c tls.Certificate
	for rest := chainPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			c.Certificate = append(c.Certificate, b.Bytes)
		}
	}
	if len(c.Certificate) == 0 {
		return c, errors.New("no CERTIFICATE in the PEM key store")
	}
	key, err := pemPrivateKey(keyPEM, s)
	if err != nil {
		return c, err
	}
	c.PrivateKey = key
	if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
		return c, fmt.Errorf("parse the key store's certificate: %w", err)
	}
	return c, checkKeyMatches(c)
}

// pemPrivateKey finds the private key of a PEM key store: PKCS#8, as
// Kafka requires ("PRIVATE KEY"), or the older RSA and EC forms.
func pemPrivateKey(data []byte, s config.SSLSettings) (crypto.PrivateKey, error) {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PRIVATE KEY in the PEM key store")
		}
		switch b.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse PKCS#8 private key: %w", err)
			}
			return k, nil
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return decryptPKCS8(b.Bytes, s.KeyPassword)
		}
	}
}

// checkKeyMatches fails when the private key is not the leaf's.
func checkKeyMatches(c tls.Certificate) error {
	type publicKeyer interface{ Public() crypto.PublicKey }
	pk, ok := c.PrivateKey.(publicKeyer)
	if !ok || c.Leaf == nil {
		return errors.New("the key store's private key is of an unsupported kind")
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if e, ok := pk.Public().(equaler); !ok || !e.Equal(c.Leaf.PublicKey) {
		return errors.New("the key store's private key does not match its certificate")
	}
	return nil
}

// loadTruststore reads the certificates client certificates must chain
// to; nil when there is no trust store.
func loadTruststore(s config.SSLSettings) (*x509.CertPool, error) {
	var certs []*x509.Certificate
	switch {
	case s.TruststoreCertificates != "":
		cs, err := pemCertificates([]byte(s.TruststoreCertificates))
		if err != nil {
			return nil, err
		}
		certs = cs
	case s.TruststoreLocation == "":
		return nil, nil
	default:
		data, err := os.ReadFile(s.TruststoreLocation)
		if err != nil {
			return nil, fmt.Errorf("read trust store: %w", err)
		}
		if s.TruststoreType == config.StoreTypePEM {
			if certs, err = pemCertificates(data); err != nil {
				return nil, err
			}
			break
		}
		// keytool marks trusted entries with Java's trust attribute; a
		// store without it (openssl pkcs12 -export -nokeys) holds
		// certificates nobody said to trust.
		certs, err = pkcs12.DecodeTrustStore(data, s.TruststorePassword)
		if err != nil {
			return nil, fmt.Errorf("decode PKCS12 trust store (its password, ssl.truststore.password, must be right, and its certificates marked trusted as keytool -importcert does; or use a PEM trust store): %w", err)
		}
	}
	if len(certs) == 0 {
		return nil, errors.New("the trust store holds no certificate")
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func pemCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse trusted certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no CERTIFICATE in the PEM trust store")
	}
	return out, nil
}
