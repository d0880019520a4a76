package config

import (
	"errors"
	"maps"
	"testing"
)

func TestConnectionOverridesAndBuffers(t *testing.T) {
	b, _, err := Parse(map[string]string{"max.connections.per.ip.overrides": "10.0.0.1:5, broker-2.example.com:7,::1:9"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"10.0.0.1": 5, "broker-2.example.com": 7, "::1": 9}
	if !maps.Equal(b.MaxConnectionsPerIPOverrides, want) {
		t.Fatalf("overrides = %v, want %v", b.MaxConnectionsPerIPOverrides, want)
	}
	for _, tt := range []struct {
		props map[string]string
		name  string
	}{
		{map[string]string{"max.connections.per.ip.overrides": "10.0.0.1"}, "max.connections.per.ip.overrides"},
		{map[string]string{"max.connections.per.ip.overrides": "10.0.0.1:x"}, "max.connections.per.ip.overrides"},
		{map[string]string{"max.connections.per.ip.overrides": "bad host!:3"}, "max.connections.per.ip.overrides"},
		{map[string]string{"max.connections.per.ip": "0"}, "max.connections.per.ip"},
		{map[string]string{"socket.send.buffer.bytes": "0"}, "socket.send.buffer.bytes"},
		{map[string]string{"socket.receive.buffer.bytes": "-2"}, "socket.receive.buffer.bytes"},
	} {
		_, _, err := Parse(tt.props)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Name != tt.name {
			t.Errorf("Parse(%v) = %v, want %s refused", tt.props, err, tt.name)
		}
	}
	if _, _, err := Parse(map[string]string{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:2",
		"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1"}); err != nil {
		t.Fatalf("per-ip 0 with an override, OS-default buffers: %v", err)
	}
}

// TestConnectionCreationRateKeys: max.connection.creation.rate and a
// listener's prefixed one are read (not left as unknown names), and a
// negative rate is refused.
func TestConnectionCreationRateKeys(t *testing.T) {
	b, unknown, err := Parse(map[string]string{
		"max.connection.creation.rate":                         "50",
		"listener.name.plaintext.max.connection.creation.rate": "7",
		"listener.name.plaintext.max.connections":              "9",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.MaxConnectionCreationRate != 50 || b.ListenerMaxConnectionCreationRate["PLAINTEXT"] != 7 {
		t.Fatalf("rates %d and %v, want 50 and PLAINTEXT:7", b.MaxConnectionCreationRate, b.ListenerMaxConnectionCreationRate)
	}
	if b.ListenerMaxConnections["PLAINTEXT"] != 9 {
		t.Fatalf("listener max.connections %v, want PLAINTEXT:9", b.ListenerMaxConnections)
	}
	if len(unknown) != 0 {
		t.Fatalf("unknown names %v, want none", unknown)
	}
	if _, _, err := Parse(map[string]string{"listener.name.plaintext.max.connection.creation.rate": "-1"}); err == nil {
		t.Fatal("a negative listener rate was accepted")
	}
}
