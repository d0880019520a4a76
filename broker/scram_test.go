package broker

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestScramCredentialsInMetadataLog: users created with
// AlterUserScramCredentials over a PLAINTEXT listener authenticate with
// SCRAM on a SASL_PLAINTEXT listener; a wrong password, an unknown user,
// a deleted credential and a mechanism the user has no credential for
// fail with Kafka's error and message. The store is the broker's own
// (no Options.ScramCredentials): the credentials of the metadata log.
func TestScramCredentialsInMetadataLog(t *testing.T) {
	s := startSecureServer(t, map[string]string{
		"listeners":                                 "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":                   "SCRAM-SHA-256,SCRAM-SHA-512",
		"connection.failed.authentication.delay.ms": "50",
	}, Options{})
	sp := s.addr(t, "SASL_PLAINTEXT")
	adm := kadm.NewClient(newClient(t, s.addr(t, "PLAINTEXT")))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	sha256 := func(user, pass string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
	}
	sha512 := func(user, pass string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
	}
	wantAuthFailed := func(what string, opt kgo.Opt, mechanism string) {
		t.Helper()
		err := pingErr(newClient(t, sp, opt))
		want := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanism
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED: %s", what, err, want)
		}
	}

	wantAuthFailed("before the user exists", sha512("alice", "alice-secret"), "SCRAM-SHA-512")
	if d, err := adm.DescribeUserSCRAMs(ctx); err != nil || len(d) != 0 {
		t.Fatalf("describe with no users: %v %v", d, err)
	}

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if a, ok := altered[u]; !ok || a.Err != nil {
			t.Fatalf("alter %s: %+v (present %v)", u, a, ok)
		}
	}

	// Authenticated, the client is served.
	roundTrip(t, newClient(t, sp, sha512("alice", "alice-secret")), "scram-alice")
	s.log.waitLog(t, "connection authenticated", "listener=SASL_PLAINTEXT", "principal=User:alice", "mechanism=SCRAM-SHA-512")
	roundTrip(t, newClient(t, sp, sha256("bob", "bob-secret")), "scram-bob")
	s.log.waitLog(t, "connection authenticated", "principal=User:bob", "mechanism=SCRAM-SHA-256")

	wantAuthFailed("wrong password", sha512("alice", "wrong"), "SCRAM-SHA-512")
	wantAuthFailed("mechanism without a credential", sha256("alice", "alice-secret"), "SCRAM-SHA-256")
	wantAuthFailed("unknown user", sha256("carol", "bob-secret"), "SCRAM-SHA-256")

	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := described["alice"].CredInfos; len(described) != 2 || len(got) != 1 || got[0].Mechanism != kadm.ScramSha512 || got[0].Iterations != 8192 {
		t.Fatalf("describe all: %+v", described)
	}
	if got := described["bob"].CredInfos; len(got) != 1 || got[0].Mechanism != kadm.ScramSha256 || got[0].Iterations != 4096 {
		t.Fatalf("describe all, bob: %+v", described["bob"])
	}

	// Errors per user, with Kafka's codes and messages, over the wire.
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"bob", "nobody", "alice", "bob"} {
		n := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		n.Name = u
		dreq.Users = append(dreq.Users, n)
	}
	dresp, err := dreq.RequestWith(ctx, newClient(t, s.addr(t, "PLAINTEXT")))
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, r := range dresp.Results {
		users = append(users, r.User)
		var want int16
		msg := ""
		switch r.User {
		case "bob":
			want, msg = kerr.DuplicateResource.Code, "Cannot describe SCRAM credentials for the same user twice in a single request: bob"
		case "nobody":
			want, msg = kerr.ResourceNotFound.Code, "Attempt to describe a user credential that does not exist: nobody"
		}
		if r.ErrorCode != want || (msg != "" && (r.ErrorMessage == nil || *r.ErrorMessage != msg)) {
			t.Errorf("describe %s: code %d message %v, want %d %q", r.User, r.ErrorCode, r.ErrorMessage, want, msg)
		}
	}
	if slices.Sort(users); !slices.Equal(users, []string{"alice", "bob", "nobody"}) {
		t.Errorf("described users %v", users)
	}

	areq := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, u := range []struct {
		name       string
		mechanism  int8
		iterations int32
	}{{"few", 1, 4095}, {"many", 2, 16385}, {"md5", 3, 4096}} {
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = u.name, u.mechanism, u.iterations, []byte("salt"), []byte("salted")
		areq.Upsertions = append(areq.Upsertions, up)
	}
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "bob", 2 // bob has SCRAM-SHA-256 only
	areq.Deletions = append(areq.Deletions, del)
	aresp, err := areq.RequestWith(ctx, newClient(t, s.addr(t, "PLAINTEXT")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		code int16
		msg  string
	}{
		"few":  {kerr.UnacceptableCredential.Code, "Too few iterations"},
		"many": {kerr.UnacceptableCredential.Code, "Too many iterations"},
		"md5":  {kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism"},
		"bob":  {kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist"},
	}
	if len(aresp.Results) != len(want) {
		t.Fatalf("alter results %+v", aresp.Results)
	}
	for _, r := range aresp.Results {
		w := want[r.User]
		if r.ErrorCode != w.code || r.ErrorMessage == nil || *r.ErrorMessage != w.msg {
			t.Errorf("alter %s: code %d message %v, want %d %q", r.User, r.ErrorCode, r.ErrorMessage, w.code, w.msg)
		}
	}

	// A new password replaces the old one; a deleted credential no longer
	// authenticates, on a new connection.
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "new-secret"}}); err != nil {
		t.Fatal(err)
	}
	wantAuthFailed("old password", sha512("alice", "alice-secret"), "SCRAM-SHA-512")
	if err := pingErr(newClient(t, sp, sha512("alice", "new-secret"))); err != nil {
		t.Fatalf("new password: %v", err)
	}
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || altered["alice"].Err != nil {
		t.Fatalf("delete alice: %+v %v", altered, err)
	}
	wantAuthFailed("deleted user", sha512("alice", "new-secret"), "SCRAM-SHA-512")
	described, err = adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(described["alice"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe deleted alice: %+v", described["alice"])
	}
}

// TestScramSASLSSLRestart: a SCRAM-SHA-512 user created over PLAINTEXT
// authenticates on a SASL_SSL listener, and still does (with the same
// password only) after the server restarts from its data directory, the
// credential read back from the metadata log.
func TestScramSASLSSLRestart(t *testing.T) {
	ca := newTestCA(t)
	srvCert, srvKey := ca.issue(t, pkix.Name{CommonName: "broker"}, true)
	props := map[string]string{
		"listeners":                                 "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":            "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":                   "SCRAM-SHA-512",
		"ssl.keystore.type":                         "PEM",
		"ssl.keystore.certificate.chain":            certPEM(srvCert),
		"ssl.keystore.key":                          keyPEM(t, srvKey),
		"log.dirs":                                  t.TempDir(),
		"connection.failed.authentication.delay.ms": "50",
	}
	s := startSecureServer(t, props, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, s.addr(t, "PLAINTEXT")))
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dora", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "dora-secret"}})
	if err != nil || altered["dora"].Err != nil {
		t.Fatalf("create dora: %+v %v", altered, err)
	}
	saslSSL := func(s *secureServer, pass string) *kgo.Client {
		return newClient(t, s.addr(t, "SASL_SSL"), kgo.DialTLSConfig(ca.clientTLS(t, nil, nil)),
			kgo.SASL(scram.Auth{User: "dora", Pass: pass}.AsSha512Mechanism()))
	}
	roundTrip(t, saslSSL(s, "dora-secret"), "scram-ssl")
	s.log.waitLog(t, "connection authenticated", "listener=SASL_SSL", "principal=User:dora", "mechanism=SCRAM-SHA-512")
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	s = startSecureServer(t, props, Options{})
	if err := pingErr(saslSSL(s, "dora-secret")); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := pingErr(saslSSL(s, "wrong")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password after restart: %v", err)
	}
	d, err := kadm.NewClient(newClient(t, s.addr(t, "PLAINTEXT"))).DescribeUserSCRAMs(ctx)
	if ci := d["dora"].CredInfos; err != nil || len(d) != 1 || len(ci) != 1 || ci[0].Mechanism != kadm.ScramSha512 || ci[0].Iterations != 4096 {
		t.Fatalf("described after restart: %+v %v", d, err)
	}
}

// TestScramCredentialsCluster: AlterUserScramCredentials sent to any node
// of a three-node cluster reaches the active controller, and every
// node's image (what its SCRAM exchanges read) and its
// DescribeUserScramCredentials then hold the credential.
func TestScramCredentialsCluster(t *testing.T) {
	nodes := startTestCluster(t)
	cl := clusterClient(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range nodes {
		user := fmt.Sprintf("user-via-%d", n.id)
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = user, 2, 4096, []byte("salt"), []byte("salted")
		req.Upsertions = append(req.Upsertions, up)
		kresp, err := cl.Broker(int(n.id)).Request(ctx, req)
		if err != nil {
			t.Fatalf("alter via node %d: %v", n.id, err)
		}
		resp := kresp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		if len(resp.Results) != 1 || resp.Results[0].User != user || resp.Results[0].ErrorCode != 0 {
			t.Fatalf("alter via node %d (leader %v): %+v", n.id, n.meta.IsLeader(), resp.Results)
		}
	}
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d's image to hold the three users", n.id), func() bool {
			return len(n.meta.Image().ScramUsers()) == 3
		})
		for _, m := range nodes {
			c, ok := n.meta.Image().ScramCredential(fmt.Sprintf("user-via-%d", m.id), 2)
			if !ok || c.Iterations != 4096 || string(c.Salt) != "salt" {
				t.Fatalf("node %d's credential of user-via-%d: %+v %v", n.id, m.id, c, ok)
			}
		}
		kresp, err := cl.Broker(int(n.id)).Request(ctx, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
		if err != nil {
			t.Fatal(err)
		}
		if rs := kresp.(*kmsg.DescribeUserSCRAMCredentialsResponse).Results; len(rs) != 3 {
			t.Fatalf("node %d describes %+v", n.id, rs)
		}
	}
}
