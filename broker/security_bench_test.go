package broker

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// BenchmarkSecureListeners produces and then consumes 1 KiB records
// through a PLAINTEXT, an SSL and a SASL_SSL (PLAIN) listener of one
// server, for the cost of TLS (SASL costs only at connection time).
func BenchmarkSecureListeners(b *testing.B) {
	ca := newTestCA(b)
	srvCert, srvKey := ca.issue(b, pkix.Name{CommonName: "broker"}, true)
	s := startSecureServer(b, map[string]string{
		"listeners":                                     "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type":                             "PEM",
		"ssl.keystore.certificate.chain":                certPEM(srvCert),
		"ssl.keystore.key":                              keyPEM(b, srvKey),
		"sasl.enabled.mechanisms":                       "PLAIN",
		"listener.name.sasl_ssl.plain.sasl.jaas.config": plainJAAS,
	}, Options{})
	value := make([]byte, 1024)
	for _, l := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"PLAINTEXT", nil},
		{"SSL", []kgo.Opt{kgo.DialTLSConfig(ca.clientTLS(b, nil, nil))}},
		{"SASL_SSL", []kgo.Opt{kgo.DialTLSConfig(ca.clientTLS(b, nil, nil)), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}},
	} {
		b.Run(l.name, func(b *testing.B) {
			topic := fmt.Sprintf("bench-%s-%d", l.name, b.N)
			cl := newClient(b, s.addr(b, l.name), append(l.opts, kgo.ProducerLinger(0), kgo.ConsumeTopics(topic))...)
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			var wg sync.WaitGroup
			var errOnce sync.Once
			var perr error
			for range b.N {
				wg.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						errOnce.Do(func() { perr = err })
					}
					wg.Done()
				})
			}
			wg.Wait()
			if perr != nil {
				b.Fatal(perr)
			}
			for n := 0; n < b.N; {
				fs := cl.PollFetches(context.Background())
				if errs := fs.Errors(); len(errs) > 0 {
					b.Fatal(errs[0].Err)
				}
				n += fs.NumRecords()
			}
		})
	}
}
