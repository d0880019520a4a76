package config

import (
	"errors"
	"strings"
	"testing"
)

func TestUnservedSecurityProtocolRefused(t *testing.T) {
	tests := []struct {
		props          map[string]string
		listener, prot string
	}{
		{map[string]string{"listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"}, "PLAINTEXT", "SASL_PLAINTEXT"},
		{map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}, "CONTROLLER", "SSL"},
		{map[string]string{
			"listeners":                      "CLIENT://:9092,INTERNAL://:9094,CONTROLLER://:9093",
			"advertised.listeners":           "CLIENT://h:9092,INTERNAL://h:9094",
			"listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
			"inter.broker.listener.name":     "CLIENT",
		}, "INTERNAL", "SASL_SSL"},
		{map[string]string{
			"listeners":                      "PLAINTEXT://:9092,SSL://:9094,CONTROLLER://:9093",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
			"security.inter.broker.protocol": "SSL",
		}, "SSL", "SSL"},
	}
	for _, tt := range tests {
		_, _, err := Parse(tt.props)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Name != "listener.security.protocol.map" {
			t.Errorf("Parse(%v) = %v, want listener.security.protocol.map refused", tt.props, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "listener "+tt.listener+" ") || !strings.Contains(msg, tt.prot) {
			t.Errorf("Parse(%v): %q does not name listener %s and protocol %s", tt.props, msg, tt.listener, tt.prot)
		}
	}

	// A protocol in the map that no listener uses is no reason to refuse:
	// Kafka's default map names all four.
	b, _, err := Parse(map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SPARE:SASL_SSL"})
	if err != nil {
		t.Fatalf("an unused SASL_SSL entry: %v", err)
	}
	if b.ListenerSecurityProtocolMap["SPARE"] != "SASL_SSL" {
		t.Fatalf("map = %v", b.ListenerSecurityProtocolMap)
	}
}
