package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// saslExchange runs SaslHandshake v1 and one SaslAuthenticate v2 on c.
func saslExchange(t *testing.T, c *frameConn, mechanism string, auth []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mechanism
	hsResp := &kmsg.SASLHandshakeResponse{Version: 1}
	c.roundTrip(t, hs, hsResp)
	if hsResp.ErrorCode != 0 {
		t.Fatalf("SaslHandshake %s: error %d", mechanism, hsResp.ErrorCode)
	}
	ar := kmsg.NewPtrSASLAuthenticateRequest()
	ar.Version, ar.SASLAuthBytes = 2, auth
	resp := &kmsg.SASLAuthenticateResponse{Version: 2}
	c.roundTrip(t, ar, resp)
	return resp
}

func plainBytes(user string) []byte { return []byte("\x00" + user + "\x00" + user + "-secret") }

func metadataOK(t *testing.T, c *frameConn) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	c.roundTrip(t, req, &kmsg.MetadataResponse{Version: 12})
}

// TestSASLReauthentication: KIP-368 on the wire, with a client that
// drives it by hand. The session lifetime in SaslAuthenticate v1+ is
// connections.max.reauth.ms for the mechanism (listener.name.<l>.plain.
// overriding the broker's), or an OAUTHBEARER token's remaining life when
// shorter; a SaslHandshake re-authenticates the connection with the same
// principal, not with another or with another mechanism; a request after
// the session ended closes the connection; and frames of a
// re-authentication are bounded by sasl.server.max.receive.size.
//
// GREGOR_REAUTH_REFERENCE=host:port runs it against another broker's
// listener set up the same way (the Kafka reference: PLAIN users admin
// and alice, OAUTHBEARER with the unsecured validator), without the
// checks of Gregor's log.
func TestSASLReauthentication(t *testing.T) {
	addr := os.Getenv("GREGOR_REAUTH_REFERENCE")
	waitLog := func(t *testing.T, parts ...string) {}
	if addr == "" {
		s := startSecureServer(t, map[string]string{
			"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
			"sasl.enabled.mechanisms":        "PLAIN,OAUTHBEARER",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config":          plainJAAS,
			"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":    `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`,
			"connections.max.reauth.ms":                                    "60000",
			"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "1500",
			"listener.name.sasl_plaintext.sasl.server.max.receive.size":    "4096",
		}, Options{})
		addr = s.addr(t, "SASL_PLAINTEXT")
		waitLog = func(t *testing.T, parts ...string) { t.Helper(); s.log.waitLog(t, parts...) }
	}

	t.Run("lifetime and re-authentication", func(t *testing.T) {
		c := dialFrames(t, addr)
		if r := saslExchange(t, c, "PLAIN", plainBytes("alice")); r.ErrorCode != 0 || r.SessionLifetimeMillis != 1500 {
			t.Fatalf("PLAIN: error %d lifetime %d, want 0 and 1500", r.ErrorCode, r.SessionLifetimeMillis)
		}
		metadataOK(t, c)
		if r := saslExchange(t, c, "PLAIN", plainBytes("alice")); r.ErrorCode != 0 || r.SessionLifetimeMillis != 1500 {
			t.Fatalf("re-authentication: error %d %v lifetime %d", r.ErrorCode, r.ErrorMessage, r.SessionLifetimeMillis)
		}
		waitLog(t, "connection re-authenticated", "principal=User:alice")
		// Within a second of the last re-authentication a SaslHandshake
		// is an ordinary request, which Kafka answers ILLEGAL_SASL_STATE.
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		hsResp := &kmsg.SASLHandshakeResponse{Version: 1}
		c.roundTrip(t, hs, hsResp)
		if hsResp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("SaslHandshake right after re-authenticating: error %d, want ILLEGAL_SASL_STATE", hsResp.ErrorCode)
		}
		// Past the session's end, re-authentication is still taken...
		time.Sleep(1600 * time.Millisecond)
		if r := saslExchange(t, c, "PLAIN", plainBytes("alice")); r.ErrorCode != 0 {
			t.Fatalf("re-authentication after the session ended: error %d %v", r.ErrorCode, r.ErrorMessage)
		}
		metadataOK(t, c)
		// ...but not as someone else.
		time.Sleep(1100 * time.Millisecond)
		r := saslExchange(t, c, "PLAIN", plainBytes("admin"))
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil ||
			*r.ErrorMessage != "Cannot change principals during re-authentication from User.alice: User.admin" {
			t.Fatalf("re-authentication as admin: error %d %v", r.ErrorCode, r.ErrorMessage)
		}
		c.expectClosed(t)
	})

	t.Run("expired session closed", func(t *testing.T) {
		c := dialFrames(t, addr)
		if r := saslExchange(t, c, "PLAIN", plainBytes("alice")); r.ErrorCode != 0 {
			t.Fatalf("PLAIN: %d", r.ErrorCode)
		}
		metadataOK(t, c)
		time.Sleep(1600 * time.Millisecond)
		// A client that does not re-authenticate is cut off at its next
		// request, unanswered.
		if err := c.send(kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(t)
		waitLog(t, "closing connection: SASL session expired", "principal=User:alice")
	})

	t.Run("another mechanism", func(t *testing.T) {
		c := dialFrames(t, addr)
		if r := saslExchange(t, c, "PLAIN", plainBytes("alice")); r.ErrorCode != 0 {
			t.Fatalf("PLAIN: %d", r.ErrorCode)
		}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "OAUTHBEARER"
		hsResp := &kmsg.SASLHandshakeResponse{Version: 1}
		c.roundTrip(t, hs, hsResp)
		if hsResp.ErrorCode != 0 {
			t.Fatalf("handshake: %d", hsResp.ErrorCode)
		}
		// Kafka fails the exchange at the first token, unanswered.
		ar := kmsg.NewPtrSASLAuthenticateRequest()
		ar.Version = 2
		ar.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + unsecuredToken(t, map[string]any{"sub": "alice", "exp": time.Now().Unix() + 60}) + "\x01\x01")
		if err := c.send(ar); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(t)
		waitLog(t, "failed re-authentication", "SASL mechanism 'OAUTHBEARER' requested by client is not supported for re-authentication of mechanism 'PLAIN'")
	})

	t.Run("token expiry bounds the session", func(t *testing.T) {
		c := dialFrames(t, addr)
		exp := time.Now().Add(5 * time.Second)
		token := unsecuredToken(t, map[string]any{"sub": "alice", "exp": exp.Unix()})
		r := saslExchange(t, c, "OAUTHBEARER", []byte("n,,\x01auth=Bearer "+token+"\x01\x01"))
		want := time.Until(time.Unix(exp.Unix(), 0)).Milliseconds()
		if r.ErrorCode != 0 || r.SessionLifetimeMillis > want+100 || r.SessionLifetimeMillis < want-1000 {
			t.Fatalf("OAUTHBEARER: error %d lifetime %d, want about %d (the token's, under connections.max.reauth.ms 60000)", r.ErrorCode, r.SessionLifetimeMillis, want)
		}
	})

	t.Run("frame limit during re-authentication", func(t *testing.T) {
		c := dialFrames(t, addr)
		if r := saslExchange(t, c, "PLAIN", plainBytes("alice")); r.ErrorCode != 0 {
			t.Fatalf("PLAIN: %d", r.ErrorCode)
		}
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		c.roundTrip(t, hs, &kmsg.SASLHandshakeResponse{Version: 1})
		big := binary.BigEndian.AppendUint32(nil, 5000)
		c.nc.Write(append(big, make([]byte, 5000)...))
		c.expectClosed(t)
		waitLog(t, "failed re-authentication", "invalid receive size")
	})

	t.Run("frame limit before authentication", func(t *testing.T) {
		// A SaslHandshake just under the listener's 4096 is read and
		// answered; one just over it closes the connection.
		c := dialFrames(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, strings.Repeat("M", 4000)
		hsResp := &kmsg.SASLHandshakeResponse{Version: 1}
		c.roundTrip(t, hs, hsResp)
		if hsResp.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
			t.Fatalf("a 4 KB handshake: error %d, want UNSUPPORTED_SASL_MECHANISM", hsResp.ErrorCode)
		}
		c = dialFrames(t, addr)
		hs.Mechanism = strings.Repeat("M", 4100)
		if err := c.send(hs); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(t)
		waitLog(t, "failed authentication", "invalid receive size", "sasl.server.max.receive.size 4096")
	})
}

// TestSASLReauthenticationClient: franz-go re-authenticates on its own
// when the broker gives its session a lifetime; a producer keeps
// producing across several lifetimes with every record acknowledged,
// and the connection is never cut for an expired session.
func TestSASLReauthenticationClient(t *testing.T) {
	s := startSecureServer(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		// franz-go re-authenticates a second before the lifetime ends
		// (or at 95-98% of it), and Kafka takes a SaslHandshake as a
		// re-authentication at most once a second: with 1 s lifetimes it
		// would try before every request and be refused.
		"connections.max.reauth.ms": "2500",
	}, Options{})
	cl := newClient(t, s.addr(t, "SASL_PLAINTEXT"), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	end := time.Now().Add(7 * time.Second)
	n := 0
	for time.Now().Before(end) {
		st := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte(fmt.Sprint(n))}).FirstErr(); err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		if d := time.Since(st); d > time.Second {
			t.Fatalf("record %d took %v", n, d)
		}
		n++
		time.Sleep(50 * time.Millisecond)
	}
	reauths := strings.Count(s.log.String(), "connection re-authenticated")
	t.Logf("%d records produced in 7 s, %d re-authentications", n, reauths)
	if reauths < 3 {
		t.Fatalf("%d re-authentications in 7 s with 2.5 s sessions", reauths)
	}
	if strings.Contains(s.log.String(), "SASL session expired") {
		t.Fatal("a connection was closed for an expired session")
	}
}
