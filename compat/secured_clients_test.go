package compat

import (
	"bytes"
	"context"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"
)

// secListener is one of TestSecuredClients' two secured listeners and
// what a client needs to reach it.
type secListener struct {
	name     string // "SASL_SSL" or "mTLS", the matrix's column
	protocol string // security.protocol: SASL_SSL or SSL
	addr     string
	ca       string // the CA's PEM certificate
	user     string // SASL_SSL: the SCRAM-SHA-512 user and password
	password string
	cert     string // mTLS: the client's PEM certificate, key and keystore
	key      string
	keystore string
}

// refusedVariant is the listener as a client the broker must refuse sees
// it: a wrong password on SASL_SSL, no client certificate on mTLS.
func (l secListener) refusedVariant() secListener {
	if l.protocol == "SASL_SSL" {
		l.password = "not-" + l.password
	} else {
		l.cert, l.key, l.keystore = "", "", ""
	}
	return l
}

// securedClient runs one client over one listener: roundTrip produces
// k0=v0 .. k9=v9 to topic and returns the key=value pairs it reads back;
// reach talks to the broker once and returns its error (nil when it got
// through). na says why the client cannot use the listener at all.
type securedClient struct {
	name      string
	available func() error
	na        func(l secListener) string
	roundTrip func(ctx context.Context, l secListener, topic string) ([]string, error)
	reach     func(ctx context.Context, l secListener, topic string) error
}

// TestSecuredClients runs every client over a SASL_SSL listener
// (SCRAM-SHA-512) and an SSL listener requiring client certificates
// (mTLS) of one gregor: each produces 10 keyed records and reads the
// same 10 back, and is refused with a wrong password (SASL_SSL) or
// without a client certificate (mTLS). The certificates are gregor
// cert's; the SCRAM user is created with AlterUserScramCredentials over a
// PLAINTEXT listener. It logs a client × listener matrix and fails on any
// cell that fails (n/a cells say why the client cannot do it).
func TestSecuredClients(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every client's process; not under -short")
	}
	start := time.Now()
	certs := filepath.Join(t.TempDir(), "certs")
	if out, err := exec.Command(gregorBin, "cert", "--dir", certs, "--client", "alice").CombinedOutput(); err != nil {
		t.Fatalf("gregor cert: %v\n%s", err, out)
	}
	ports := freePorts(t, 4)
	ca := filepath.Join(certs, "ca.crt")
	g := startGregor(t, map[string]string{
		"listeners": fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d,SSL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d",
			ports[0], ports[1], ports[2], ports[3]),
		"listener.security.protocol.map":           "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":                  "SCRAM-SHA-512",
		"ssl.keystore.type":                        "PEM",
		"ssl.keystore.location":                    filepath.Join(certs, "broker.keystore.pem"),
		"ssl.truststore.type":                      "PEM",
		"ssl.truststore.location":                  ca,
		"listener.name.ssl.ssl.client.auth":        "required",
		"group.initial.rebalance.delay.ms":         "0",
		"offsets.topic.replication.factor":         "1",
		"offsets.topic.num.partitions":             "4",
		"auto.create.topics.enable":                "false",
		"transaction.state.log.min.isr":            "1",
		"transaction.state.log.replication.factor": "1",
	})
	listeners := []secListener{
		{name: "SASL_SSL", protocol: "SASL_SSL", addr: fmt.Sprintf("127.0.0.1:%d", ports[1]), ca: ca,
			user: "alice", password: "alice-secret"},
		{name: "mTLS", protocol: "SSL", addr: fmt.Sprintf("127.0.0.1:%d", ports[2]), ca: ca,
			cert: filepath.Join(certs, "alice.crt"), key: filepath.Join(certs, "alice.key"),
			keystore: filepath.Join(certs, "alice.keystore.pem")},
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(g.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("AlterUserScramCredentials alice: %v", err)
	}

	clients := securedClients()
	var topics []string
	for _, c := range clients {
		for _, l := range listeners {
			topics = append(topics, securedTopic(c.name, l.name))
		}
	}
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, topics...); err != nil {
		t.Fatalf("create topics: %v", err)
	}

	// Clients run three at a time (the Java client, the slowest, first),
	// each over its two listeners in turn: one at a time would take
	// longer than the two minutes the test is allowed.
	type cell struct{ status, reason string }
	var mu sync.Mutex
	matrix := map[string]cell{}
	sem := make(chan struct{}, 3)
	var wg sync.WaitGroup
	for _, c := range slices.Backward(clients) {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			avail := c.available()
			for _, l := range listeners {
				x := securedCell(ctx, t, g.Addr, c, l, avail)
				mu.Lock()
				matrix[c.name+" "+l.name] = cell{x.status, x.reason}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	var b strings.Builder
	fmt.Fprintf(&b, "secured clients on gregor (%v):\n%-16s %-10s %-10s\n", time.Since(start).Round(time.Second), "client", "SASL_SSL", "mTLS")
	var notes []string
	for _, c := range clients {
		fmt.Fprintf(&b, "%-16s", c.name)
		for _, l := range listeners {
			x := matrix[c.name+" "+l.name]
			fmt.Fprintf(&b, " %-10s", x.status)
			if x.status != "pass" {
				notes = append(notes, fmt.Sprintf("  %s %s: %s: %s", c.name, l.name, x.status, x.reason))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(strings.Join(notes, "\n"))
	t.Log(strings.TrimRight(b.String(), "\n"))
	for k, x := range matrix {
		if x.status == "fail" {
			t.Errorf("%s: %s", k, x.reason)
		}
	}
}

type securedResult struct{ status, reason string }

// securedCell runs client c over listener l: the round trip, the records
// as franz-go reads them over PLAINTEXT, and the refusal.
func securedCell(ctx context.Context, t *testing.T, plain string, c securedClient, l secListener, avail error) securedResult {
	if avail != nil {
		return securedResult{"n/a", "not installed: " + avail.Error()}
	}
	if c.na != nil {
		if why := c.na(l); why != "" {
			return securedResult{"n/a", why}
		}
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	topic := securedTopic(c.name, l.name)
	keys, values := securedRecords()
	var want []string
	for i := range keys {
		want = append(want, keys[i]+"="+values[i])
	}
	r := func() securedResult {
		read, err := c.roundTrip(ctx, l, topic)
		if err != nil {
			return securedResult{"fail", "round trip: " + err.Error()}
		}
		if !slices.Equal(read, want) {
			return securedResult{"fail", fmt.Sprintf("read back %q, want %q", read, want)}
		}
		// Where the records went is checked by franz-go over PLAINTEXT,
		// independently of the client.
		if got, err := securedReadPlain(ctx, plain, topic); err != nil || !slices.Equal(got, want) {
			return securedResult{"fail", fmt.Sprintf("franz-go over PLAINTEXT read %q (%v), want %q", got, err, want)}
		}
		err = c.reach(ctx, l.refusedVariant(), topic)
		if err == nil {
			return securedResult{"fail", "got through with " + refusedWhat(l)}
		}
		// The refusal must be the one asked for, not any failure.
		why := regexp.MustCompile(`(?i)certificate|handshake|tls|ssl`)
		if l.protocol == "SASL_SSL" {
			// "authenticating": kafka-python, whose raw SASL tokens
			// leave the broker no way to answer but closing the connection.
			why = regexp.MustCompile(`(?i)authenticat|credentials`)
		}
		if !why.MatchString(err.Error()) {
			return securedResult{"fail", fmt.Sprintf("with %s: an error that does not say so: %v", refusedWhat(l), err)}
		}
		return securedResult{"pass", fmt.Sprintf("refused %s: %s", refusedWhat(l), oneLine(err.Error(), 160))}
	}()
	t.Logf("%s over %s: %s in %v: %s", c.name, l.name, r.status, time.Since(t0).Round(time.Millisecond), r.reason)
	return r
}

func securedTopic(client, listener string) string {
	return "secured-" + client + "-" + strings.ToLower(strings.ReplaceAll(listener, "_", "-"))
}

func refusedWhat(l secListener) string {
	if l.protocol == "SASL_SSL" {
		return "a wrong password"
	}
	return "no client certificate"
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// securedReadPlain reads topic's partition 0 from the start with franz-go
// over the PLAINTEXT listener, as key=value pairs.
func securedReadPlain(ctx context.Context, addr, topic string) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []string
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(out) < 10 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, err
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Key)+"="+string(r.Value)) })
	}
	return out, nil
}

// goTLS is the tls.Config of a Go client for l.
func goTLS(l secListener) (*tls.Config, error) {
	pem, err := os.ReadFile(l.ca)
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", l.ca)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if l.cert != "" {
		c, err := tls.LoadX509KeyPair(l.cert, l.key)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// securedWant is the values every round trip produces.
func securedRecords() (keys, values []string) {
	for i := range 10 {
		keys, values = append(keys, fmt.Sprintf("k%d", i)), append(values, fmt.Sprintf("v%d", i))
	}
	return keys, values
}

func securedClients() []securedClient {
	always := func() error { return nil }
	script := func(name string, argv []string, available func() error) securedClient {
		return securedClient{
			name:      name,
			available: available,
			roundTrip: func(ctx context.Context, l secListener, topic string) ([]string, error) {
				return runSecuredScript(ctx, argv, l, topic, "roundtrip")
			},
			reach: func(ctx context.Context, l secListener, topic string) error {
				_, err := runSecuredScript(ctx, argv, l, topic, "refused")
				return err
			},
		}
	}
	py := func(name, interp string, available func() error) securedClient {
		return script(name, []string{interp, "python/secured_roundtrip.py", "--client", name}, available)
	}
	return []securedClient{
		{name: "kcat", available: func() error { return needTool("kcat") }, roundTrip: kcatRoundTrip, reach: kcatReach},
		py("confluent-kafka", pyVenv, func() error {
			return exec.Command(pyVenv, "-c", "import confluent_kafka").Run()
		}),
		py("kafka-python", systemPython, func() error {
			return exec.Command(systemPython, "-c", "import kafka").Run()
		}),
		{name: "franz-go", available: always, roundTrip: franzRoundTrip, reach: franzReach},
		{name: "sarama", available: always, roundTrip: saramaRoundTrip, reach: saramaReach},
		{name: "kafka-go", available: always, roundTrip: kafkaGoRoundTrip, reach: kafkaGoReach},
		script("kafkajs", []string{"node", "node/secured_roundtrip.js"}, func() error {
			if err := needTool("node"); err != nil {
				return err
			}
			_, err := os.Stat("node/node_modules/kafkajs/package.json")
			return err
		}),
		javaSecuredClient(),
	}
}

// runSecuredScript runs one script cell; it prints {"read": [...]} or
// {"error": "..."} as its last line.
func runSecuredScript(ctx context.Context, argv []string, l secListener, topic, mode string) ([]string, error) {
	args := append(append([]string(nil), argv[1:]...), "--bootstrap", l.addr, "--protocol", l.protocol, "--ca", l.ca,
		"--topic", topic, "--mode", mode)
	if l.user != "" {
		args = append(args, "--user", l.user, "--password", l.password)
	}
	if l.cert != "" {
		// The Java client reads key and chain from the one PEM keystore.
		args = append(args, "--cert", l.cert, "--key", l.key, "--keystore", l.keystore)
	}
	cmd := exec.CommandContext(ctx, argv[0], args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res struct {
		Read  []string `json:"read"`
		Error *string  `json:"error"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return nil, fmt.Errorf("%s printed no result (%v, exit %v): %s", filepath.Base(argv[len(argv)-1]), err, runErr, lastLines(stderr.Bytes(), 4))
	}
	if res.Error != nil {
		return nil, errors.New(*res.Error)
	}
	return res.Read, nil
}

func javaSecuredClient() securedClient {
	c := securedClient{name: "java"}
	var cp string
	c.available = func() error {
		if cp != "" {
			return nil
		}
		if err := needTool("java"); err != nil {
			return err
		}
		root, err := filepath.Abs("java")
		if err != nil {
			return err
		}
		out, err := exec.Command("bash", filepath.Join(root, "classpath.sh")).Output()
		if err != nil {
			return fmt.Errorf("resolve Kafka's jars (java/classpath.sh): %w", err)
		}
		jars := strings.TrimSpace(string(out))
		classes, err := os.MkdirTemp(workDir, "secured-java-")
		if err != nil {
			return err
		}
		// Compiled once: the source launcher would compile per run.
		if b, err := exec.Command("javac", "-d", classes, "-cp", jars, "java/secured/SecuredRoundTrip.java").CombinedOutput(); err != nil {
			return fmt.Errorf("javac SecuredRoundTrip.java: %w: %s", err, lastLines(b, 6))
		}
		cp = classes + string(os.PathListSeparator) + jars
		return nil
	}
	argv := func() []string {
		return []string{"java", javaHeap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", cp, "SecuredRoundTrip"}
	}
	c.roundTrip = func(ctx context.Context, l secListener, topic string) ([]string, error) {
		return runSecuredScript(ctx, argv(), l, topic, "roundtrip")
	}
	c.reach = func(ctx context.Context, l secListener, topic string) error {
		_, err := runSecuredScript(ctx, argv(), l, topic, "refused")
		return err
	}
	return c
}

func kcatArgs(l secListener) []string {
	args := []string{"-b", l.addr, "-X", "security.protocol=" + l.protocol, "-X", "ssl.ca.location=" + l.ca}
	if l.protocol == "SASL_SSL" {
		args = append(args, "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username="+l.user, "-X", "sasl.password="+l.password)
	} else if l.cert != "" {
		args = append(args, "-X", "ssl.certificate.location="+l.cert, "-X", "ssl.key.location="+l.key)
	}
	return args
}

func kcatRoundTrip(ctx context.Context, l secListener, topic string) ([]string, error) {
	keys, values := securedRecords()
	var in strings.Builder
	for i := range keys {
		fmt.Fprintf(&in, "%s:%s\n", keys[i], values[i])
	}
	p := exec.CommandContext(ctx, "kcat", append(kcatArgs(l), "-P", "-t", topic, "-p", "0", "-K", ":", "-X", "acks=all")...)
	p.Stdin = strings.NewReader(in.String())
	if out, err := p.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kcat -P: %v: %s", err, lastLines(out, 4))
	}
	c := exec.CommandContext(ctx, "kcat", append(kcatArgs(l), "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", "10", "-e", "-f", "%k=%s\n")...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("kcat -C: %v: %s", err, lastLines(stderr.Bytes(), 4))
	}
	return strings.Fields(string(out)), nil
}

func kcatReach(ctx context.Context, l secListener, topic string) error {
	out, err := exec.CommandContext(ctx, "kcat", append(kcatArgs(l), "-L", "-t", topic, "-m", "5")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kcat -L: %v: %s", err, lastLines(out, 3))
	}
	return nil
}

func franzOpts(l secListener) ([]kgo.Opt, error) {
	tc, err := goTLS(l)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(l.addr), kgo.DialTLSConfig(tc)}
	if l.protocol == "SASL_SSL" {
		opts = append(opts, kgo.SASL(scram.Auth{User: l.user, Pass: l.password}.AsSha512Mechanism()))
	}
	return opts, nil
}

func franzRoundTrip(ctx context.Context, l secListener, topic string) ([]string, error) {
	opts, err := franzOpts(l)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	keys, values := securedRecords()
	for i := range keys {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(keys[i]), Value: []byte(values[i])}).FirstErr(); err != nil {
			return nil, fmt.Errorf("produce: %w", err)
		}
	}
	var out []string
	for len(out) < 10 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("fetch: %w", err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return out, fmt.Errorf("fetch: %w", errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Key)+"="+string(r.Value)) })
	}
	return out, nil
}

func franzReach(ctx context.Context, l secListener, topic string) error {
	opts, err := franzOpts(l)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListTopics(ctx, topic)
	return err
}

// saramaScram is sarama's SCRAM client, on xdg-go/scram (sarama leaves
// the SCRAM implementation to the application).
type saramaScram struct {
	conv *xscram.ClientConversation
}

func (s *saramaScram) Begin(user, password, authzID string) error {
	c, err := xscram.HashGeneratorFcn(sha512.New).NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *saramaScram) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaScram) Done() bool                            { return s.conv.Done() }

func securedSaramaConfig(l secListener) (*sarama.Config, error) {
	tc, err := goTLS(l)
	if err != nil {
		return nil, err
	}
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tc
	cfg.Net.DialTimeout = 8 * time.Second
	cfg.Metadata.Retry.Max = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	if l.protocol == "SASL_SSL" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.User, cfg.Net.SASL.Password = l.user, l.password
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaScram{} }
	}
	return cfg, nil
}

func saramaRoundTrip(ctx context.Context, l secListener, topic string) ([]string, error) {
	cfg, err := securedSaramaConfig(l)
	if err != nil {
		return nil, err
	}
	p, err := sarama.NewSyncProducer([]string{l.addr}, cfg)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	keys, values := securedRecords()
	for i := range keys {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(keys[i]), Value: sarama.StringEncoder(values[i])}); err != nil {
			p.Close()
			return nil, fmt.Errorf("produce: %w", err)
		}
	}
	p.Close()
	c, err := sarama.NewConsumer([]string{l.addr}, cfg)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	defer pc.Close()
	var out []string
	for len(out) < 10 {
		select {
		case m := <-pc.Messages():
			out = append(out, string(m.Key)+"="+string(m.Value))
		case e := <-pc.Errors():
			return out, fmt.Errorf("consume: %w", e)
		case <-ctx.Done():
			return out, fmt.Errorf("consume: %w", ctx.Err())
		}
	}
	return out, nil
}

func saramaReach(ctx context.Context, l secListener, topic string) error {
	cfg, err := securedSaramaConfig(l)
	if err != nil {
		return err
	}
	c, err := sarama.NewClient([]string{l.addr}, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Partitions(topic)
	return err
}

func kafkaGoDialer(l secListener) (*kafkago.Dialer, *kafkago.Transport, error) {
	tc, err := goTLS(l)
	if err != nil {
		return nil, nil, err
	}
	d := &kafkago.Dialer{Timeout: 8 * time.Second, TLS: tc}
	tr := &kafkago.Transport{TLS: tc, DialTimeout: 8 * time.Second}
	if l.protocol == "SASL_SSL" {
		m, err := kgscram.Mechanism(kgscram.SHA512, l.user, l.password)
		if err != nil {
			return nil, nil, err
		}
		d.SASLMechanism, tr.SASL = m, m
	}
	return d, tr, nil
}

func kafkaGoRoundTrip(ctx context.Context, l secListener, topic string) ([]string, error) {
	d, tr, err := kafkaGoDialer(l)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{Addr: kafkago.TCP(l.addr), Topic: topic, Transport: tr, RequiredAcks: kafkago.RequireAll, Balancer: &kafkago.Hash{}}
	keys, values := securedRecords()
	var msgs []kafkago.Message
	for i := range keys {
		msgs = append(msgs, kafkago.Message{Key: []byte(keys[i]), Value: []byte(values[i])})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		w.Close()
		return nil, fmt.Errorf("write: %w", err)
	}
	w.Close()
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{l.addr}, Topic: topic, Partition: 0, Dialer: d, MaxWait: 500 * time.Millisecond})
	defer r.Close()
	var out []string
	for len(out) < 10 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return out, fmt.Errorf("read: %w", err)
		}
		out = append(out, string(m.Key)+"="+string(m.Value))
	}
	return out, nil
}

func kafkaGoReach(ctx context.Context, l secListener, topic string) error {
	d, _, err := kafkaGoDialer(l)
	if err != nil {
		return err
	}
	conn, err := d.DialContext(ctx, "tcp", l.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.ReadPartitions(topic)
	return err
}
