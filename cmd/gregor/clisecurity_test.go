package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadCommandConfig: what a Kafka client properties file gives, and
// the keys and values it refuses rather than ignores.
func TestReadCommandConfig(t *testing.T) {
	dir := t.TempDir()
	read := func(text string) (commandConfig, error) {
		p := filepath.Join(dir, "c.properties")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return readCommandConfig(p)
	}
	cc, err := read(`security.protocol=sasl_ssl
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
  username="bob" password="p\\\"w=1";
ssl.truststore.type=PEM
ssl.truststore.location=/ca.pem
ssl.endpoint.identification.algorithm=https
`)
	if err != nil {
		t.Fatal(err)
	}
	want := commandConfig{protocol: "SASL_SSL", mechanism: "SCRAM-SHA-512", user: "bob", password: `p"w=1`, trustPEM: "/ca.pem"}
	if !reflect.DeepEqual(cc, want) {
		t.Fatalf("got %+v, want %+v", cc, want)
	}
	var s clientSecurity
	cc.merge(&s, map[string]bool{"sasl-user": true})
	if !s.tls || s.mechanism != "SCRAM-SHA-512" || s.user != "" || s.password != `p"w=1` || s.tlsCA != "/ca.pem" {
		t.Fatalf("merged %+v (a --sasl-user given wins over the file)", s)
	}
	// SASL without sasl.mechanism is GSSAPI, as in Kafka: refused later by
	// saslMechanism, never turned into PLAIN.
	if cc, err := read("security.protocol=SASL_PLAINTEXT\n"); err != nil || cc.mechanism != "GSSAPI" {
		t.Fatalf("SASL without mechanism: %+v %v", cc, err)
	}
	if _, err := saslMechanism("GSSAPI", "u", "p"); err == nil {
		t.Fatal("GSSAPI accepted")
	}
	for text, msg := range map[string]string{
		"ssl.keystore.password=x\n":                                                                    "ssl.keystore.password is not a key gregor applies",
		"security.protocol=SASL_SSLX\n":                                                                "is not PLAINTEXT, SSL",
		"ssl.keystore.type=PKCS12\nssl.keystore.location=/k.p12\n":                                     "only PEM stores",
		"ssl.endpoint.identification.algorithm=\n":                                                     "only https",
		"sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=\"true\";\n": "Krb5LoginModule is not supported",
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\" tokenauth=\"true\";\n": "option tokenauth is not supported",
		"security.protocol=SSL\nsasl.mechanism=PLAIN\n":                                                                           "has no SASL",
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\"\n":       "cannot read",
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\\\"c\";\n": "cannot read",
	} {
		if _, err := read(text); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", text, err, msg)
		}
	}
}
