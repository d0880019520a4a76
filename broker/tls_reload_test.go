package broker

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTLSReloadDynamic changes an SSL listener's certificate at run time
// as Kafka's clients do: the file is rewritten and an
// IncrementalAlterConfigs on this broker sets
// listener.name.<l>.ssl.keystore.location (to the same path, which
// re-reads it, or to another). New handshakes see the new certificate,
// an open connection keeps being served, and a store that does not load
// is refused with INVALID_REQUEST while the current one stays.
func TestTLSReloadDynamic(t *testing.T) {
	ca := newTestCA(t)
	cert1, key1 := ca.issue(t, pkix.Name{CommonName: "broker-1"}, true)
	store := writeFile(t, "broker.pem", certPEM(cert1)+keyPEM(t, key1))
	s := startSecureServer(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.location":          store,
	}, Options{})
	sslAddr := s.addr(t, "SSL")
	node := strconv.Itoa(int(s.cfg.NodeID))

	// serial is the serial number of the certificate a new TLS
	// handshake with the SSL listener presents.
	serial := func() *big.Int {
		t.Helper()
		c, err := tls.Dial("tcp", sslAddr, ca.clientTLS(t, nil, nil))
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber
	}
	admin := dialFrames(t, s.addr(t, "PLAINTEXT"))
	// alter sets configs on the broker resource name and returns the
	// resource's error code and message.
	alter := func(name string, kv ...string) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, name
		for i := 0; i < len(kv); i += 2 {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = kv[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[i+1])
			res.Configs = append(res.Configs, c)
		}
		req.Resources = append(req.Resources, res)
		resp := &kmsg.IncrementalAlterConfigsResponse{Version: req.Version}
		admin.roundTrip(t, req, resp)
		r := resp.Resources[0]
		return r.ErrorCode, deref(r.ErrorMessage)
	}

	if got := serial(); got.Cmp(cert1.SerialNumber) != 0 {
		t.Fatalf("serial before the reload %v, want cert1's %v", got, cert1.SerialNumber)
	}
	// A connection opened before the reload, with a request served on it.
	tc, err := tls.Dial("tcp", sslAddr, ca.clientTLS(t, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	open := &frameConn{nc: tc, r: bufio.NewReaderSize(tc, 64<<10), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("open"))}
	apiVersions := func() {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := &kmsg.ApiVersionsResponse{Version: 3}
		open.roundTrip(t, req, resp)
		if resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions on the open connection: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	apiVersions()

	// The same path, rewritten with a new certificate and key.
	cert2, key2 := ca.issue(t, pkix.Name{CommonName: "broker-2"}, true)
	if err := os.WriteFile(store, []byte(certPEM(cert2)+keyPEM(t, key2)), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got.Cmp(cert1.SerialNumber) != 0 {
		t.Fatalf("the file changed without a config change and the serial is %v already", got)
	}
	if code, msg := alter(node, "listener.name.ssl.ssl.keystore.location", store); code != 0 {
		t.Fatalf("set listener.name.ssl.ssl.keystore.location: %v %s", kerr.ErrorForCode(code), msg)
	}
	if got := serial(); got.Cmp(cert2.SerialNumber) != 0 {
		t.Fatalf("serial after the reload %v, want cert2's %v", got, cert2.SerialNumber)
	}
	apiVersions()
	if got := tc.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(cert1.SerialNumber) != 0 {
		t.Fatalf("the open connection's certificate changed to %v", got)
	}
	s.log.waitLog(t, "reloaded listener key and trust stores", "listener=SSL")

	// A store that does not load is refused; the current one stays.
	if err := os.WriteFile(store, []byte("not a key store"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, msg := alter(node, "listener.name.ssl.ssl.keystore.location", store)
	if code != kerr.InvalidRequest.Code || !strings.Contains(msg, "no CERTIFICATE") {
		t.Fatalf("an invalid key store: %v %q, want INVALID_REQUEST naming the failure", kerr.ErrorForCode(code), msg)
	}
	if got := serial(); got.Cmp(cert2.SerialNumber) != 0 {
		t.Fatalf("serial after a refused reload %v, want cert2's %v", got, cert2.SerialNumber)
	}

	// Another path: kept in the metadata log as this broker's config.
	cert3, key3 := ca.issue(t, pkix.Name{CommonName: "broker-3"}, true)
	store3 := writeFile(t, "broker3.pem", certPEM(cert3)+keyPEM(t, key3))
	if code, msg := alter(node, "listener.name.ssl.ssl.keystore.location", store3); code != 0 {
		t.Fatalf("set a new key store path: %v %s", kerr.ErrorForCode(code), msg)
	}
	if got := serial(); got.Cmp(cert3.SerialNumber) != 0 {
		t.Fatalf("serial after the new path %v, want cert3's %v", got, cert3.SerialNumber)
	}
	if v := s.meta.Image().BrokerConfigs(node)["listener.name.ssl.ssl.keystore.location"]; v != store3 {
		t.Fatalf("the metadata image holds %q for the key store, want %q", v, store3)
	}
	// DescribeConfigs lists it as Kafka does.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dreq.Version = 4
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeBroker, node
	dres.ConfigNames = []string{"listener.name.ssl.ssl.keystore.location"}
	dreq.Resources = append(dreq.Resources, dres)
	dresp := &kmsg.DescribeConfigsResponse{Version: dreq.Version}
	admin.roundTrip(t, dreq, dresp)
	if cs := dresp.Resources[0].Configs; len(cs) != 1 || deref(cs[0].Value) != store3 || cs[0].Source != kmsg.ConfigSourceDynamicBrokerConfig || cs[0].IsSensitive {
		t.Fatalf("DescribeConfigs of the dynamic key store: %+v", cs)
	}

	// Kafka's refusals: without the listener prefix, and at the cluster
	// default.
	code, msg = alter(node, "ssl.keystore.location", store3)
	if code != kerr.InvalidRequest.Code || !strings.Contains(msg, "only per-listener using the listener prefix") {
		t.Fatalf("an unprefixed key store: %v %q", kerr.ErrorForCode(code), msg)
	}
	code, msg = alter("", "listener.name.ssl.ssl.keystore.location", store3)
	if code != kerr.InvalidRequest.Code || !strings.Contains(msg, "broker id must be specified") {
		t.Fatalf("a cluster-wide key store: %v %q", kerr.ErrorForCode(code), msg)
	}

	// A kgo client over the listener works with the new certificate.
	cl := newClient(t, sslAddr, kgo.DialTLSConfig(ca.clientTLS(t, nil, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}

	// After a restart on the same data, the dynamic key store (from the
	// metadata log) wins over the file's ssl.keystore.location.
	cl.Close()
	s.Close()
	s = startSecureServer(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.location":          writeFile(t, "static.pem", certPEM(cert1)+keyPEM(t, key1)),
		"log.dirs":                       s.cfg.LogDirs[0],
	}, Options{})
	sslAddr = s.addr(t, "SSL")
	if got := serial(); got.Cmp(cert3.SerialNumber) != 0 {
		t.Fatalf("serial after a restart %v, want the dynamic store's cert3 %v", got, cert3.SerialNumber)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
