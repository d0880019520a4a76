package raftnode

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSigned is a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "controller"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestTransportSecureHooks: with SecureAccept and SecureDial, the
// handshake and every frame after it travel over what the hooks return
// (here TLS, then a one-byte password standing for the SASL exchange);
// a peer dialling in plaintext, or failing the hook, is refused and its
// calls fail.
func TestTransportSecureHooks(t *testing.T) {
	cert, pool := selfSigned(t)
	accepted := make(chan error, 16)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}}
	srv, err := NewTCPTransport(TransportConfig{NodeID: 1, ClusterID: "a", Logger: discardLogger(),
		SecureAccept: func(ctx context.Context, c net.Conn) (net.Conn, error) {
			tc := tls.Server(c, serverTLS)
			if err := tc.HandshakeContext(ctx); err != nil {
				accepted <- err
				return nil, err
			}
			var pw [1]byte
			if _, err := io.ReadFull(tc, pw[:]); err != nil || pw[0] != 'k' {
				err = errors.New("wrong password")
				accepted <- err
				return nil, err
			}
			accepted <- nil
			return tc, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	echo := func(ctx context.Context, from uint64, body []byte) []byte {
		return append(AppendCallError(nil, 0, nil), append([]byte{byte(from)}, body...)...)
	}
	n := startNode(t, t.TempDir(), func(c *Config) { c.ClusterID = "a"; c.Transport = srv; c.Handlers = map[byte]RPCHandler{1: echo} })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		n.Close()
		srv.Close()
		<-done
	})
	addr := ln.Addr().String()

	dialer := func(pw byte) func(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
		return func(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: host})
			if err := tc.HandshakeContext(ctx); err != nil {
				return nil, err
			}
			if _, err := tc.Write([]byte{pw}); err != nil {
				return nil, err
			}
			return tc, nil
		}
	}
	call := func(id uint64, dial func(context.Context, net.Conn, string) (net.Conn, error)) ([]byte, error) {
		peer, err := NewTCPTransport(TransportConfig{NodeID: id, ClusterID: "a", Logger: discardLogger(),
			Peers: map[uint64]string{1: addr}, SecureDial: dial, RequestTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		ctx, cancel := context.WithTimeout(ctxT(t), 3*time.Second)
		defer cancel()
		body, _, err := peer.Call(ctx, 1, 1, []byte("hi"))
		return body, err
	}

	body, err := call(2, dialer('k'))
	if err != nil || !bytes.Equal(body, []byte{0, 2, 'h', 'i'}) {
		t.Fatalf("call over the secured connection: %q %v", body, err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept: %v", err)
	}
	if body, err := call(3, dialer('x')); err == nil {
		t.Fatalf("a wrong password was served: %q", body)
	}
	if body, err := call(4, nil); err == nil {
		t.Fatalf("a plaintext peer was served: %q", body)
	}
	var refused int
	for len(accepted) > 0 {
		if <-accepted != nil {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("the refused peers never reached SecureAccept")
	}
}
