package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
)

func TestPrincipalMapper(t *testing.T) {
	m, err := NewPrincipalMapper(strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := m.Name(dn); err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}

	// An escaped comma inside a value, and a back reference past the
	// groups staying literal.
	m, err = NewPrincipalMapper(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); got != `Tkac\, Adam` {
		t.Errorf("escaped comma: %q", got)
	}
	m, _ = NewPrincipalMapper(`RULE:^CN=(.*)$/$1-$2-$12/`)
	if got, _ := m.Name("CN=x"); got != "x-$2-x2" {
		t.Errorf("back references beyond the groups: %q", got)
	}

	// No rule matches: no principal.
	m, _ = NewPrincipalMapper(`RULE:^CN=(.*),OU=ops$/$1/`)
	if _, err := m.Name("CN=x,OU=dev"); err == nil || !strings.Contains(err.Error(), "no rules apply") {
		t.Errorf("no rule matching: %v", err)
	}

	for _, bad := range []string{
		"default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
	} {
		if _, err := NewPrincipalMapper(bad); err == nil {
			t.Errorf("rule %q accepted", bad)
		}
	}
	for rules, n := range map[string]int{
		"": 0, "DEFAULT": 1, ",   , , ,      , , ,   ": 0, ",,RULE://,,,DEFAULT,,": 2,
		"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ": 3,
	} {
		m, err := NewPrincipalMapper(rules)
		if err != nil || len(m.rules) != n {
			t.Errorf("rules %q: %v, %d rules, want %d", rules, err, len(m.rules), n)
		}
	}
}

func TestSubjectDN(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	subject := pkix.Name{
		Country: []string{"US"}, Organization: []string{"Acme, Inc."}, OrganizationalUnit: []string{"eng"},
		CommonName: " alice+bob ", SerialNumber: "42",
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: subject, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	dn, err := SubjectDN(cert)
	if err != nil {
		t.Fatal(err)
	}
	// Most specific first; serialNumber (2.5.4.5) has no RFC 2253
	// keyword, so Java writes its OID and DER in hex: PrintableString "42".
	want := `2.5.4.5=#13023432,CN=\ alice\+bob\ ,OU=eng,O=Acme\, Inc.,C=US`
	if dn != want {
		t.Fatalf("SubjectDN = %s, want %s", dn, want)
	}
}

func TestParseJAAS(t *testing.T) {
	e, err := ParseJAAS(`
	// the broker's own and its users
	org.apache.kafka.common.security.plain.PlainLoginModule Required
		username="admin" /* inline */ password='admin-secret'
		user_admin="admin-secret"
		user_alice="a\"b\\c"
		unquoted=some.word-$_;`)
	if err != nil {
		t.Fatal(err)
	}
	if e.LoginModule != plainModule || e.ControlFlag != "REQUIRED" || e.Options["password"] != "admin-secret" ||
		e.Options["user_alice"] != `a"b\c` || e.Options["unquoted"] != "some.word-$_" || len(e.Options) != 5 {
		t.Fatalf("entry = %+v", e)
	}
	for text, msg := range map[string]string{
		"":                             "does not contain any login modules",
		"a.B required;  c.D required;": "contains 2 login modules",
		"a.B mandatory;":               "invalid login module control flag",
		"a.B required x=\"y\"":         "not terminated by semi-colon",
		"a.B required x=;":             "value not specified for key 'x'",
		"a.B required x=123;":          "value not specified for key 'x'",
		"a.B":                          "control flag not specified",
	} {
		if _, err := ParseJAAS(text); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseJAAS(%q) = %v, want %q", text, err, msg)
		}
	}
}

func TestPlain(t *testing.T) {
	p, err := NewPlain(`org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="s3cret";`)
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]string{
		"\x00alice\x00wrong":     "Authentication failed: Invalid username or password",
		"\x00eve\x00s3cret":      "Authentication failed: Invalid username or password",
		"\x00\x00s3cret":         "Authentication failed: username not specified",
		"\x00alice\x00":          "Authentication failed: password not specified",
		"bob\x00alice\x00s3cret": "Authentication failed: Client requested an authorization id that is different from username",
		"alice\x00s3cret":        "Invalid SASL/PLAIN response: expected 3 tokens, got 2",
		"a\x00b\x00c\x00d\x00e":  "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
	} {
		_, _, err := p.Start().Step([]byte(token))
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Msg != want {
			t.Errorf("token %q: %v, want %q", token, err, want)
		}
	}
	s := p.Start()
	reply, done, err := s.Step([]byte("alice\x00alice\x00s3cret"))
	if err != nil || !done || len(reply) != 0 || s.Principal().String() != "User:alice" {
		t.Fatalf("good token: %q %v %v %v", reply, done, err, s.Principal())
	}
	if _, err := NewPlain(`com.example.Other required user_a="b";`); err == nil {
		t.Fatal("a JAAS config of another login module was accepted for PLAIN")
	}
}

type oneUser struct {
	mech, user string
	cred       ScramCredential
}

func (o oneUser) ScramCredential(mech, user string) (ScramCredential, bool, error) {
	return o.cred, mech == o.mech && user == o.user, nil
}

// TestScramRFC7677 replays the SCRAM-SHA-256 example of RFC 7677 section 3.
func TestScramRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred, err := NewScramCredential(config.MechanismScramSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewScram(config.MechanismScramSHA256, oneUser{config.MechanismScramSHA256, "user", cred})
	if err != nil {
		t.Fatal(err)
	}
	m.serverNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
	s := m.Start()
	first, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatal(done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(first) != want {
		t.Fatalf("server-first %s, want %s", first, want)
	}
	final, done, err := s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatal(done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(final) != want {
		t.Fatalf("server-final %s, want %s", final, want)
	}
	if s.Principal().String() != "User:user" {
		t.Fatalf("principal %v", s.Principal())
	}

	// A wrong proof, a changed nonce, an unknown user, a mismatched
	// authzid: each fails, only the last with its own message.
	for _, tc := range []struct{ first, final, msg string }{
		{"n,,n=user,r=abc", "c=biws,r=abc%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "invalid credentials"},
		{"n,,n=user,r=abc", "c=biws,r=abcX,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "invalid credentials"},
		{"n,,n=nobody,r=abc", "", "invalid credentials"},
		{"n,a=other,n=user,r=abc", "", "Client requested an authorization id that is different from username"},
		{"y,,n=user,r=abc", "", "invalid credentials"},
	} {
		s := m.Start()
		_, _, err := s.Step([]byte(tc.first))
		if err == nil && tc.final != "" {
			_, _, err = s.Step([]byte(tc.final))
		}
		var ae *AuthError
		if !errors.As(err, &ae) || !strings.Contains(ae.Msg, tc.msg) {
			t.Errorf("%q / %q: %v, want %q", tc.first, tc.final, err, tc.msg)
		}
	}
}

// TestEncryptedPEMKey reads a PKCS#8 key encrypted by openssl (PBES2,
// PBKDF2, AES-256-CBC), as Kafka's PEM key stores allow.
func TestEncryptedPEMKey(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	dir := t.TempDir()
	plainPath := filepath.Join(dir, "key.pem")
	os.WriteFile(plainPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	for _, prf := range []string{"hmacWithSHA256", "hmacWithSHA1"} {
		out, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes256", "-v2prf", prf, "-in", plainPath, "-passout", "pass:k3y").Output()
		if err != nil {
			t.Fatalf("openssl: %v", err)
		}
		b, _ := pem.Decode(out)
		if b == nil || b.Type != "ENCRYPTED PRIVATE KEY" {
			t.Fatalf("openssl wrote %q", out)
		}
		got, err := decryptPKCS8(b.Bytes, "k3y")
		if err != nil {
			t.Fatalf("%s: %v", prf, err)
		}
		if !key.Equal(got) {
			t.Fatalf("%s: decrypted another key", prf)
		}
		if _, err := decryptPKCS8(b.Bytes, "wrong"); err == nil {
			t.Fatalf("%s: a wrong password decrypted the key", prf)
		}
	}
}

// TestOpenSSLTrustStore: a PKCS12 trust store made by openssl has plain
// certificate bags, without the trust attribute keytool writes; it is
// refused with a message saying so rather than trusted by guess.
func TestOpenSSLTrustStore(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "openssl CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	dir := t.TempDir()
	pemPath, p12Path := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "trust.p12")
	os.WriteFile(pemPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	if out, err := exec.Command("openssl", "pkcs12", "-export", "-nokeys", "-in", pemPath, "-out", p12Path, "-passout", "pass:tp").CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	_, err := loadTruststore(config.SSLSettings{TruststoreType: config.StoreTypePKCS12, TruststoreLocation: p12Path, TruststorePassword: "tp"})
	if err == nil || !strings.Contains(err.Error(), "keytool -importcert") {
		t.Fatalf("openssl trust store: %v", err)
	}
	// The same certificate as PEM is a trust store.
	pool, err := loadTruststore(config.SSLSettings{TruststoreType: config.StoreTypePEM, TruststoreLocation: pemPath})
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Fatalf("the PEM store does not trust its certificate: %v", err)
	}
}

// TestOpenSSLKeyStore: a PKCS12 key store written by openssl 3 (PBES2,
// AES-256, SHA-256 MAC) loads, and a wrong password does not.
func TestOpenSSLKeyStore(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	dir := t.TempDir()
	certPath, keyPath, p12Path := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem"), filepath.Join(dir, "ks.p12")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	if out, err := exec.Command("openssl", "pkcs12", "-export", "-in", certPath, "-inkey", keyPath, "-out", p12Path, "-passout", "pass:sp").CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, out)
	}
	c, err := loadKeystore(config.SSLSettings{KeystoreType: config.StoreTypePKCS12, KeystoreLocation: p12Path, KeystorePassword: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Leaf.Raw) != string(der) {
		t.Fatal("another certificate loaded")
	}
	if _, err := loadKeystore(config.SSLSettings{KeystoreType: config.StoreTypePKCS12, KeystoreLocation: p12Path, KeystorePassword: "no"}); err == nil {
		t.Fatal("a wrong key store password was accepted")
	}
}
