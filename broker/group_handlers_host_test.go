package broker

import (
	"net"
	"testing"
)

// TestClientHost holds clientHost to what splitting the address's
// host:port string gives, Kafka's "/" and host, for the peers a listener
// sees: IPv4, IPv6, IPv4 mapped into IPv6, a zone, and a non-TCP address.
func TestClientHost(t *testing.T) {
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092},
		&net.TCPAddr{IP: net.ParseIP("10.1.2.3").To4(), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 9092},
		&net.TCPAddr{IP: net.ParseIP("2001:db8::17"), Port: 40000},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 5, Zone: "eth0"},
		&net.UnixAddr{Name: "/tmp/sock", Net: "unix"},
	} {
		want := ""
		if host, _, err := net.SplitHostPort(a.String()); err == nil {
			want = "/" + host
		}
		if got := clientHost(a); got != want {
			t.Errorf("clientHost(%v) = %q, want %q", a, got, want)
		}
	}
	if got := clientHost(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092}); got != "/127.0.0.1" {
		t.Errorf("clientHost of 127.0.0.1:9092 = %q, want /127.0.0.1", got)
	}
}
