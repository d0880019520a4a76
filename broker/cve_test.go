package broker

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/gregorbroker/gregor/protocol"
)

// Regression tests for the published Apache Kafka CVEs that concern a
// broker and that Gregor can be tested for, each over a real socket.
// Not applicable, and so not here: CVE-2023-25194 and CVE-2024-31141
// (Kafka Connect and client config providers), CVE-2023-34455 and
// related snappy-java issues (Kafka's Java dependency; Gregor's
// decompression has its own limits, tested with produce), CVE-2024-27309
// (ACLs during a ZooKeeper to KRaft migration; Gregor has no ZooKeeper).

// heapAllocated is the bytes the process has allocated so far, after a
// collection so that what was freed is not mistaken for growth.
func heapAllocated() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// TestCVEPreAuthReceiveSize: before a connection on a SASL listener has
// authenticated, a frame larger than sasl.server.max.receive.size (512
// KiB by default) closes it as Kafka's SaslServerAuthenticator does
// (InvalidReceiveException), without reading or allocating the frame:
// the guard against unauthenticated clients making the broker allocate up
// to socket.request.max.bytes, the class of CVE-2022-34917. After
// authentication the limit is socket.request.max.bytes: a 1 MiB produce
// works.
func TestCVEPreAuthReceiveSize(t *testing.T) {
	s := startSecureServer(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"message.max.bytes": "2097152",
	}, Options{})
	addr := s.addr(t, "SASL_PLAINTEXT")
	if got := s.security["SASL_PLAINTEXT"].cfg.SASLMaxReceiveSize; got != 524288 {
		t.Fatalf("sasl.server.max.receive.size default %d, want 524288", got)
	}

	// The test's own frame is allocated before the count starts.
	frame := make([]byte, 4+1<<20)
	binary.BigEndian.PutUint32(frame, 1<<20)
	before := heapAllocated()
	c := dialFrames(t, addr)
	// The broker may close before the whole frame is written: a write
	// error is expected then.
	c.nc.Write(frame)
	c.expectClosed(t)
	s.log.waitLog(t, "failed authentication", "invalid receive size 1048576")
	frame = nil
	grown := int64(heapAllocated()) - int64(before)
	t.Logf("broker and test allocated %d bytes while refusing a 1 MiB unauthenticated frame", grown)
	if grown >= 1<<19 {
		t.Fatalf("%d bytes allocated while refusing a 1 MiB unauthenticated frame: the broker read it", grown)
	}

	cl := newClient(t, addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.ProducerBatchMaxBytes(2<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := bytes.Repeat([]byte("y"), 1<<20)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big-after-auth", Value: big}).FirstErr(); err != nil {
		t.Fatalf("1 MiB produce after authentication: %v", err)
	}
	fetched := fetchOne(ctx, t, addr, "big-after-auth")
	if !bytes.Equal(fetched, big) {
		t.Fatalf("fetched %d bytes, want the 1 MiB produced", len(fetched))
	}
}

// fetchOne consumes the first record of topic as alice.
func fetchOne(ctx context.Context, t *testing.T, addr, topic string) []byte {
	t.Helper()
	cl := newClient(t, addr, kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(4<<20))
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("fetch %s: %v", topic, err)
		}
		var v []byte
		fs.EachRecord(func(r *kgo.Record) {
			if v == nil {
				v = r.Value
			}
		})
		if v != nil {
			return v
		}
	}
}

// TestCVE2022_34917HugeLengths: CVE-2022-34917 let unauthenticated
// clients make Kafka 2.8-3.2.2 brokers allocate huge amounts of memory
// with request fields whose length prefixes claim far more than the frame
// holds; Kafka fixed it by checking lengths against the bytes left. A
// Metadata request whose topic array claims 2^31-1 entries in a 20-byte
// body must be refused without the allocation.
func TestCVE2022_34917HugeLengths(t *testing.T) {
	s := startSecureServer(t, nil, Options{})
	c := dialFrames(t, s.addr(t, "PLAINTEXT"))
	before := heapAllocated()
	// Metadata v1 (not flexible): header api key 3, version 1, correlation
	// 1, client id "x"; then the topics array length, and nothing more.
	body := binary.BigEndian.AppendUint16(nil, 3)
	body = binary.BigEndian.AppendUint16(body, 1)
	body = binary.BigEndian.AppendUint32(body, 1)
	body = binary.BigEndian.AppendUint16(body, 1)
	body = append(body, 'x')
	body = binary.BigEndian.AppendUint32(body, 0x7fffffff)
	writeRawFrame(t, c.nc, body)
	c.expectClosed(t)
	grown := int64(heapAllocated()) - int64(before)
	t.Logf("allocated %d bytes while refusing a 2^31-1 entry array", grown)
	if grown >= 8<<20 {
		t.Fatalf("%d bytes allocated for a request claiming 2^31-1 topics", grown)
	}
	// The broker still serves.
	cl := newClient(t, s.addr(t, "PLAINTEXT"))
	if err := pingErr(cl); err != nil {
		t.Fatalf("after the crafted request: %v", err)
	}
}

// saslConn is a raw connection that has sent ApiVersions-less SASL
// handshake v1 for mechanism.
func saslConn(t *testing.T, addr, mechanism string) *frameConn {
	t.Helper()
	c := dialFrames(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mechanism
	resp := &kmsg.SASLHandshakeResponse{Version: 1}
	c.roundTrip(t, hs, resp)
	if resp.ErrorCode != 0 {
		t.Fatalf("SaslHandshake %s: %s", mechanism, kerr.ErrorForCode(resp.ErrorCode))
	}
	return c
}

// saslStep sends one SaslAuthenticate and returns its answer.
func saslStep(t *testing.T, c *frameConn, token []byte) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 1, token
	resp := &kmsg.SASLAuthenticateResponse{Version: 1}
	c.roundTrip(t, req, resp)
	return resp
}

// scramFinal is the SCRAM-SHA-256 client-final message for the given
// combined nonce, with a proof computed from the password, so that
// nothing but the nonce can make the server refuse it.
func scramFinal(t *testing.T, password, clientFirstBare, serverFirst, nonce string) string {
	t.Helper()
	var salt []byte
	iter := 0
	for _, attr := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(attr, "s="):
			s, err := base64.StdEncoding.DecodeString(attr[2:])
			if err != nil {
				t.Fatal(err)
			}
			salt = s
		case strings.HasPrefix(attr, "i="):
			fmt.Sscan(attr[2:], &iter)
		}
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iter, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	withoutProof := "c=biws,r=" + nonce
	sig := mac(stored[:], clientFirstBare+","+serverFirst+","+withoutProof)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)
}

// TestCVEScramNonceAndMessages: Kafka's ScramSaslServer refuses a
// client-final message whose nonce does not end with the nonce of its
// server-first message (the client's nonce followed by the server's), so
// that a recorded exchange cannot be replayed against a new server nonce;
// and it refuses empty and malformed client-first messages. Each refusal
// is SASL_AUTHENTICATION_FAILED and the connection is closed. A final
// message with the right nonce and the same proof computation
// authenticates, so the refusals are the nonce's.
func TestCVEScramNonceAndMessages(t *testing.T) {
	s, _ := saslServer(t)
	addr := s.addr(t, "SASL_PLAINTEXT")
	const clientNonce = "fyko+d2lbbFgONRv9qkxdawL"
	clientFirstBare := "n=bob,r=" + clientNonce

	exchange := func(t *testing.T, nonceOf func(combined string) string) (*frameConn, *kmsg.SASLAuthenticateResponse) {
		c := saslConn(t, addr, "SCRAM-SHA-256")
		first := saslStep(t, c, []byte("n,,"+clientFirstBare))
		if first.ErrorCode != 0 {
			t.Fatalf("client-first: %s %v", kerr.ErrorForCode(first.ErrorCode), first.ErrorMessage)
		}
		serverFirst := string(first.SASLAuthBytes)
		combined := strings.TrimPrefix(strings.Split(serverFirst, ",")[0], "r=")
		if !strings.HasPrefix(combined, clientNonce) || len(combined) == len(clientNonce) {
			t.Fatalf("server-first nonce %q does not extend the client's %q", combined, clientNonce)
		}
		final := scramFinal(t, "bob-secret", clientFirstBare, serverFirst, nonceOf(combined))
		return c, saslStep(t, c, []byte(final))
	}

	t.Run("the right nonce authenticates", func(t *testing.T) {
		_, resp := exchange(t, func(combined string) string { return combined })
		if resp.ErrorCode != 0 || !strings.HasPrefix(string(resp.SASLAuthBytes), "v=") {
			t.Fatalf("final: %s %v %q", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, resp.SASLAuthBytes)
		}
	})
	for _, tc := range []struct {
		name    string
		nonceOf func(combined string) string
	}{
		{"the server's part alone", func(combined string) string { return combined[len(clientNonce):] }},
		{"another client nonce", func(combined string) string { return "AAAA" + combined[4:] }},
		{"the client's nonce alone", func(string) string { return clientNonce }},
		{"the combined nonce truncated", func(combined string) string { return combined[:len(combined)-1] }},
	} {
		t.Run("client-final with "+tc.name, func(t *testing.T) {
			c, resp := exchange(t, tc.nonceOf)
			if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
				t.Fatalf("final: %s, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
			}
			c.expectClosed(t)
		})
	}
	for _, first := range []string{"", "n,,", "n,,r=abc", "n,,n=bob", "x,,n=bob,r=abc", "n,,n=bob,r="} {
		t.Run(fmt.Sprintf("client-first %q", first), func(t *testing.T) {
			c := saslConn(t, addr, "SCRAM-SHA-256")
			resp := saslStep(t, c, []byte(first))
			if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
				t.Fatalf("client-first %q: %s, want SASL_AUTHENTICATION_FAILED", first, kerr.ErrorForCode(resp.ErrorCode))
			}
			c.expectClosed(t)
		})
	}
}

// TestCVE2017_12610Impersonation: CVE-2017-12610 let authenticated
// clients of Kafka 0.10.0.0-0.11.0.0 impersonate another user with
// SASL/PLAIN or SCRAM by sending an authorization id other than their
// user name; Kafka now refuses an authorization id that differs from it.
func TestCVE2017_12610Impersonation(t *testing.T) {
	s, _ := saslServer(t)
	addr := s.addr(t, "SASL_PLAINTEXT")
	t.Run("PLAIN", func(t *testing.T) {
		c := saslConn(t, addr, "PLAIN")
		resp := saslStep(t, c, []byte("admin\x00alice\x00alice-secret"))
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("alice authorizing as admin: %s, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
		}
		c.expectClosed(t)
		// Her own name as authorization id is accepted.
		c = saslConn(t, addr, "PLAIN")
		if resp := saslStep(t, c, []byte("alice\x00alice\x00alice-secret")); resp.ErrorCode != 0 {
			t.Fatalf("alice authorizing as alice: %s", kerr.ErrorForCode(resp.ErrorCode))
		}
	})
	t.Run("SCRAM", func(t *testing.T) {
		c := saslConn(t, addr, "SCRAM-SHA-256")
		resp := saslStep(t, c, []byte("n,a=admin,n=bob,r=abcdefgh"))
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("bob authorizing as admin: %s, want SASL_AUTHENTICATION_FAILED", kerr.ErrorForCode(resp.ErrorCode))
		}
		c.expectClosed(t)
	})
}

// TestCVE2018_17196TransactionalProduce: CVE-2018-17196 let clients of
// Kafka 0.11-2.1 with WRITE on a topic produce transactional records
// without WRITE on a transactional id, by crafting the Produce request;
// Kafka now authorizes the request's transactional id whenever a batch is
// transactional, and a null one never passes. alice may WRITE t and the
// transactional id tx only.
func TestCVE2018_17196TransactionalProduce(t *testing.T) {
	_, clients := aclServer(t, false)
	setUpACLs(t, clients["admin"])
	now := time.Now().UnixMilli()
	batch, err := protocol.BuildBatch(protocol.BatchHeader{FirstTimestamp: now, MaxTimestamp: now, ProducerID: 1000,
		ProducerEpoch: 0, BaseSequence: 0, Attributes: protocol.AttrTransactional},
		[]protocol.Record{{Value: []byte("smuggled")}}, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	produce := func(txnID *string) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 7, -1, 5000, txnID
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send[*kmsg.ProduceResponse](t, clients["alice"], req).Topics[0].Partitions[0].ErrorCode
	}
	for _, tc := range []struct {
		name  string
		txnID *string
	}{
		{"no transactional id", nil},
		{"a transactional id alice may not write", kmsg.StringPtr("other-tx")},
	} {
		if got := produce(tc.txnID); got != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Errorf("transactional batch with %s: %s, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", tc.name, kerr.ErrorForCode(got))
		}
	}
	// With tx, which she may write, the authorization passes (the producer
	// id was never given out, which the transaction checks then refuse).
	if got := produce(kmsg.StringPtr("tx")); got == kerr.TransactionalIDAuthorizationFailed.Code || got == 0 {
		t.Errorf("transactional batch with tx and an unknown producer id: %s", kerr.ErrorForCode(got))
	}
}

// TestCVE2018_1288FollowerFetch: CVE-2018-1288 let authenticated clients
// of Kafka before 1.0.1 send a Fetch as a follower (a replica id of a
// broker) and so interfere with replication; Kafka now requires
// CLUSTER_ACTION on the cluster of a follower's Fetch, and answers every
// partition TOPIC_AUTHORIZATION_FAILED without it. alice may READ t but
// not act as a broker; the super user admin may.
func TestCVE2018_1288FollowerFetch(t *testing.T) {
	_, clients := aclServer(t, false)
	setUpACLs(t, clients["admin"])
	fetch := func(who string, replica int32) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = 12, replica, 10, 1<<20
		// v15+ carry the replica in ReplicaState.
		req.SessionEpoch, req.ReplicaState.ID, req.ReplicaState.Epoch = -1, replica, -1
		rt := kmsg.NewFetchRequestTopic()
		// kgo sends its own version: name and id both.
		rt.Topic, rt.TopicID = "t", topicIDs["t"]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := send[*kmsg.FetchResponse](t, clients[who], req)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if got := fetch("alice", -1); got != 0 {
		t.Fatalf("alice's consumer fetch of t: %s", kerr.ErrorForCode(got))
	}
	if got := fetch("alice", 1); got != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice's follower fetch of t: %s, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(got))
	}
	if got := fetch("admin", 1); got == kerr.TopicAuthorizationFailed.Code || got == kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("the super user's follower fetch of t: %s", kerr.ErrorForCode(got))
	}
}
