package config

import (
	"strings"
	"testing"
)

// TestConsoleCredentials: http.console.* name a client listener and the
// credentials it asks for; settings the console could not connect with
// are refused at start, naming the key.
func TestConsoleCredentials(t *testing.T) {
	b := mustParse(t, secureProps(map[string]string{
		"http.console.listener":                "sasl_ssl",
		"http.console.sasl.mechanism":          "scram-sha-512",
		"http.console.sasl.username":           "console",
		"http.console.sasl.password":           "secret",
		"http.console.ssl.truststore.location": "/etc/ca.pem",
	}))
	if b.HTTPConsoleListener != "SASL_SSL" || b.HTTPConsoleSASLMechanism != "SCRAM-SHA-512" || b.HTTPConsoleSASLUsername != "console" ||
		b.HTTPConsoleSASLPassword != "secret" || b.HTTPConsoleSSLTruststore != "/etc/ca.pem" {
		t.Fatalf("parsed %+v", b)
	}
	if b := mustParse(t, secureProps(nil)); b.HTTPConsoleListener != "" || b.HTTPConsoleSASLMechanism != "" {
		t.Fatalf("defaults %q %q", b.HTTPConsoleListener, b.HTTPConsoleSASLMechanism)
	}
	for _, tt := range []struct {
		props   map[string]string
		key, in string
	}{
		{map[string]string{"http.console.listener": "SASL_PLAINTEXT", "http.console.sasl.mechanism": "PLAIN", "http.console.sasl.username": "console"},
			"http.console.listener", "http.console.sasl.password"},
		{map[string]string{"http.console.listener": "SASL_PLAINTEXT"}, "http.console.listener", "http.console.sasl.mechanism"},
		{map[string]string{"http.console.listener": "PLAINTEXT", "http.console.sasl.mechanism": "PLAIN"}, "http.console.sasl.mechanism", "takes no SASL"},
		{map[string]string{"http.console.listener": "SASL_PLAINTEXT", "http.console.sasl.mechanism": "PLAIN", "http.console.sasl.username": "c",
			"http.console.sasl.password": "p", "http.console.ssl.truststore.location": "/ca.pem"}, "http.console.ssl.truststore.location", "no TLS"},
		{map[string]string{"http.console.listener": "CONTROLLER"}, "http.console.listener", "no client listener"},
		{map[string]string{"http.console.listener": "NOPE"}, "http.console.listener", "no client listener"},
		{map[string]string{"http.console.sasl.username": "console"}, "http.console.listener", "need the listener"},
		{map[string]string{"http.console.listener": "SASL_SSL", "http.console.sasl.mechanism": "GSSAPI"}, "http.console.sasl.mechanism", ""},
	} {
		_, _, err := Parse(secureProps(tt.props))
		if err == nil || !strings.Contains(err.Error(), tt.key) || !strings.Contains(err.Error(), tt.in) {
			t.Errorf("%v: %v, want an error on %s about %q", tt.props, err, tt.key, tt.in)
		}
	}
}
