package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const certUsage = `usage: gregor cert [--dir DIR] [--name NAME] [--host HOST]... [--client NAME]... [--days N]

Makes the certificates of a TLS listener as PEM files: a CA (ca.crt,
ca.key; reused when --dir has them already, so running it again adds
nodes and clients to the same CA), a node certificate NAME signed by it
for localhost, 127.0.0.1, ::1 and every --host, and a client
certificate for each --client (its subject CN=<client>, the principal
User:CN=<client> of an mTLS client). Every key is ECDSA P-256, unencrypted
PKCS#8 readable only by its owner. Each certificate comes as NAME.crt
and NAME.key, and as NAME.keystore.pem (key and chain in one file) for
ssl.keystore.type=PEM. It prints the server.properties lines and a
client's properties that use them.

examples:
  gregor cert --dir /etc/gregor/tls --host kafka1.example.com --client alice
  gregor cert --dir certs --name node2 --host 10.0.0.2 --days 30

flags:
`

// certCommand is `gregor cert`: a CA and the certificates signed by it.
func certCommand() *command {
	return &command{name: "cert", short: "make a CA and node and client certificates for TLS listeners (PEM)",
		raw: func(args []string, _ io.Reader, out, errOut io.Writer) error {
			return runCert(args, out, errOut)
		}}
}

func runCert(args []string, out, errOut io.Writer) error {
	fset := flag.NewFlagSet("cert", flag.ContinueOnError)
	fset.SetOutput(errOut)
	fset.Usage = func() {
		fmt.Fprint(errOut, certUsage)
		fset.PrintDefaults()
	}
	dir := fset.String("dir", ".", "the `directory` to write the files to (made if missing)")
	name := fset.String("name", "broker", "the node certificate's file `name` and subject CN")
	days := fset.Int("days", 365, "how many `days` the new certificates are valid")
	var hosts, clients listFlag // each may be a comma list too
	fset.Var(&hosts, "host", "a host `name or IP` the node certificate is also valid for (repeatable)")
	fset.Var(&clients, "client", "make a client certificate with subject CN=`NAME` (repeatable)")
	if err := fset.Parse(args); err != nil {
		return err
	}
	hosts, clients = splitCommas(hosts), splitCommas(clients)
	if fset.NArg() > 0 {
		return usagef("cert takes no arguments, got %q", fset.Args())
	}
	if *days < 1 {
		return usagef("cert: --days %d is not at least 1", *days)
	}
	for _, n := range append([]string{*name}, clients...) {
		if n == "ca" || strings.ContainsAny(n, `/\`) || n == "" {
			return usagef("cert: %q cannot name a certificate file", n)
		}
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("cert: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("cert: %w", err)
	}
	validity := time.Duration(*days) * 24 * time.Hour
	ca, caKey, created, err := loadOrMakeCA(abs, validity)
	if err != nil {
		return fmt.Errorf("cert: %w", err)
	}
	if created {
		fmt.Fprintf(errOut, "made CA %s\n", filepath.Join(abs, "ca.crt"))
	} else {
		fmt.Fprintf(errOut, "using CA %s\n", filepath.Join(abs, "ca.crt"))
	}
	sans := append([]string{"localhost", "127.0.0.1", "::1"}, hosts...)
	if err := issue(abs, *name, sans, true, ca, caKey, validity); err != nil {
		return fmt.Errorf("cert: %w", err)
	}
	for _, c := range clients {
		if err := issue(abs, c, nil, false, ca, caKey, validity); err != nil {
			return fmt.Errorf("cert: %w", err)
		}
	}
	p := func(f string) string { return filepath.Join(abs, f) }
	fmt.Fprintf(out, `# server.properties of a TLS listener (SSL or SASL_SSL); prefix each with
# listener.name.<listener>. to set it for one listener only.
ssl.keystore.type=PEM
ssl.keystore.location=%s
ssl.truststore.type=PEM
ssl.truststore.location=%s
# mutual TLS: clients must present a certificate signed by the CA
# ssl.client.auth=required
`, p(*name+".keystore.pem"), p("ca.crt"))
	client := "<client>"
	if len(clients) > 0 {
		client = clients[0]
	}
	fmt.Fprintf(out, `
# a client's properties (security.protocol=SASL_SSL adds sasl.* lines)
security.protocol=SSL
ssl.truststore.type=PEM
ssl.truststore.location=%s
ssl.keystore.type=PEM
ssl.keystore.location=%s
`, p("ca.crt"), p(client+".keystore.pem"))
	return nil
}

// splitCommas splits each value at commas, dropping empty ones.
func splitCommas(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// loadOrMakeCA reads dir's ca.crt and ca.key, or makes them.
func loadOrMakeCA(dir string, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, bool, error) {
	crtPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	crtPEM, err := os.ReadFile(crtPath)
	if err == nil {
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return nil, nil, false, fmt.Errorf("read the CA's key: %w", err)
		}
		ca, key, err := parseCA(crtPEM, keyPEM)
		if err != nil {
			return nil, nil, false, fmt.Errorf("%s: %w", crtPath, err)
		}
		return ca, key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, fmt.Errorf("read the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "gregor CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, false, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, false, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, false, err
	}
	if err := writePEM(keyPath, 0o600, pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}); err != nil {
		return nil, nil, false, err
	}
	if err := writePEM(crtPath, 0o644, pem.Block{Type: "CERTIFICATE", Bytes: der}); err != nil {
		return nil, nil, false, err
	}
	return ca, key, true, nil
}

func parseCA(crtPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(crtPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, errors.New("no CERTIFICATE")
	}
	ca, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !ca.IsCA {
		return nil, nil, errors.New("not a CA certificate")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, nil, errors.New("ca.key holds no PKCS#8 PRIVATE KEY")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("ca.key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, errors.New("ca.key is not the key of ca.crt")
	}
	return ca, key, nil
}

// issue writes name.crt, name.key and name.keystore.pem, a certificate
// signed by ca: a node's (server and client use, valid for sans) or a
// client's.
func issue(dir, name string, sans []string, node bool, ca *x509.Certificate, caKey *ecdsa.PrivateKey, validity time.Duration) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("%s key: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// A node's certificate also authenticates it to the others
		// (mutual TLS between brokers).
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if node {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	for _, h := range sans {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("%s certificate: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	keyBlock := pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}
	crt := pem.Block{Type: "CERTIFICATE", Bytes: der}
	caBlock := pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}
	if err := writePEM(filepath.Join(dir, name+".key"), 0o600, keyBlock); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), 0o644, crt); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".keystore.pem"), 0o600, keyBlock, crt, caBlock)
}

// serial is a random 128-bit serial number, as RFC 5280 recommends.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// writePEM writes blocks to path with mode perm, replacing it.
func writePEM(path string, perm os.FileMode, blocks ...pem.Block) error {
	var b []byte
	for _, bl := range blocks {
		b = append(b, pem.EncodeToMemory(&bl)...)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
