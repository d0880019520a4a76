package controller

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha512"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

func scramUpsert(user string, mechanism int8, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mechanism, iterations
	u.Salt, u.SaltedPassword = []byte(user+"-salt"), []byte(user+"-salted-password")
	return u
}

func scramDelete(user string, mechanism int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mechanism
	return d
}

// scramResults maps each user of an answer to its error code, failing on
// a user answered twice.
func scramResults(t *testing.T, resp *kmsg.AlterUserSCRAMCredentialsResponse) map[string]int16 {
	t.Helper()
	out := map[string]int16{}
	for _, r := range resp.Results {
		if _, dup := out[r.User]; dup {
			t.Fatalf("user %q answered twice: %+v", r.User, resp.Results)
		}
		out[r.User] = r.ErrorCode
	}
	return out
}

func TestAlterUserScramCredentials(t *testing.T) {
	n, c := startController(t, t.TempDir())
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		scramUpsert("alice", image.ScramSHA512, 8192),
		scramUpsert("bob", image.ScramSHA256, 4096),
		scramUpsert("few", image.ScramSHA256, 4095),
		scramUpsert("many", image.ScramSHA256, 16385),
		scramUpsert("", image.ScramSHA256, 4096),
		scramUpsert("md5", 3, 4096),
		scramUpsert("twice", image.ScramSHA256, 4096),
		scramUpsert("twice", image.ScramSHA512, 4096),
	}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDelete("nobody", image.ScramSHA256)}
	got := scramResults(t, c.AlterUserScramCredentials(ctxT(t), req))
	want := map[string]int16{
		"alice": 0, "bob": 0,
		"few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code,
		"": kerr.UnacceptableCredential.Code, "md5": kerr.UnsupportedSaslMechanism.Code,
		"twice": kerr.DuplicateResource.Code, "nobody": kerr.ResourceNotFound.Code,
	}
	if len(got) != len(want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	for u, code := range want {
		if got[u] != code {
			t.Errorf("user %q: code %d, want %d", u, got[u], code)
		}
	}

	img := n.Image()
	cred, ok := img.ScramCredential("alice", image.ScramSHA512)
	if !ok || cred.Iterations != 8192 || string(cred.Salt) != "alice-salt" {
		t.Fatalf("alice's credential %+v %v", cred, ok)
	}
	// The server key is HMAC(SaltedPassword, "Server Key"): the salted
	// password itself is kept nowhere.
	mac := hmac.New(sha512.New, []byte("alice-salted-password"))
	mac.Write([]byte("Server Key"))
	if !bytes.Equal(cred.ServerKey, mac.Sum(nil)) || len(cred.StoredKey) != sha512.Size {
		t.Fatalf("alice's keys: server %x stored %x", cred.ServerKey, cred.StoredKey)
	}
	if users := img.ScramUsers(); len(users) != 2 {
		t.Fatalf("users %v, want alice and bob only", users)
	}

	// A deletion and an upsertion of one user in one request is a
	// duplicate; deleting bob's credential works once.
	req = kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDelete("alice", image.ScramSHA512), scramDelete("bob", image.ScramSHA256)}
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{scramUpsert("alice", image.ScramSHA256, 4096)}
	got = scramResults(t, c.AlterUserScramCredentials(ctxT(t), req))
	if got["alice"] != kerr.DuplicateResource.Code || got["bob"] != 0 {
		t.Fatalf("results %v", got)
	}
	if _, ok := n.Image().ScramCredential("alice", image.ScramSHA512); !ok {
		t.Fatal("a duplicate deletion removed alice's credential")
	}
	if _, ok := n.Image().ScramCredential("bob", image.ScramSHA256); ok {
		t.Fatal("bob's credential is still there")
	}
	got = scramResults(t, c.AlterUserScramCredentials(ctxT(t), &kmsg.AlterUserSCRAMCredentialsRequest{
		Deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDelete("bob", image.ScramSHA256)}}))
	if got["bob"] != kerr.ResourceNotFound.Code {
		t.Fatalf("second deletion: %v", got)
	}
}

// A broker's request reaches the active controller over the rpc, as
// Kafka's own message, and comes back with its results.
func TestAlterUserScramCredentialsRPC(t *testing.T) {
	n, addr := serveOne(t)
	peer, err := raftnode.NewTCPTransport(raftnode.TransportConfig{NodeID: 2, ClusterID: "a", Logger: discardLogger(), Peers: map[uint64]string{1: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{scramUpsert("carol", image.ScramSHA256, 4096), scramUpsert("x", image.ScramSHA256, 1)}
	callErr, body, _ := callRaw(t, peer, apiAlterUserScramCredentials, alterUserScramCredentialsRPC.body().encodeReq(req))
	if callErr != nil {
		t.Fatal(callErr)
	}
	resp, err := alterUserScramCredentialsRPC.body().decodeResp(body)
	if err != nil {
		t.Fatal(err)
	}
	got := scramResults(t, resp)
	if got["carol"] != 0 || got["x"] != kerr.UnacceptableCredential.Code {
		t.Fatalf("results %+v", resp.Results)
	}
	for _, r := range resp.Results {
		if r.User == "x" && (r.ErrorMessage == nil || *r.ErrorMessage != "Too few iterations") {
			t.Fatalf("x's message %v, want Kafka's", r.ErrorMessage)
		}
	}
	if _, ok := n.Image().ScramCredential("carol", image.ScramSHA256); !ok {
		t.Fatal("carol's credential not in the image")
	}
}
