package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var httpListenerRE = regexp.MustCompile(`msg="http listener" addr=(\S+)`)

// httpAddr returns the bound address of a started gregor's HTTP listener,
// from its log.
func httpAddr(t *testing.T, p *serveProcess) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := httpListenerRE.FindStringSubmatch(p.log()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no http listener in the log:\n%s", p.log())
	return ""
}

// httpGet returns the status and body of GET http://addr/path.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sampleRE is one sample of Prometheus's text format: name, labels, value.
var sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// scrape reads /metrics into name{labels} → value, the labels sorted as
// the exposition writes them.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("/metrics line not in the text format: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[m[1]+m[2]] = v
	}
	return out
}

// TestMetricsAfterWorkload: N records produced to topic T and read back
// by a consumer show on /metrics, scraped over HTTP from a real gregor,
// as exactly N records in, the bytes in equal to the log's size, the same
// bytes out to the consumer, the log end offset N, one Produce request per
// record (each produced alone) in the request counter and its latency
// histogram, and a group's lag from the offset it committed (a group id
// that is not UTF-8 left out, not failing the scrape).
func TestMetricsAfterWorkload(t *testing.T) {
	p := startServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=127.0.0.1:0")
	web := httpAddr(t, p)
	const topic, n = "metered", 200
	mustCLI(t, p.addr, "", "topic", "create", topic, "-p", "1")
	produceStrings(t, p.addr, topic, 0, n)
	if got := consumeStrings(t, p.addr, topic, n); len(got) != n {
		t.Fatalf("consumed %d of %d", len(got), n)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: n - 30, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(context.Background(), "laggard", offs); err != nil {
		t.Fatal(err)
	}
	// A group id that is not UTF-8 cannot be a label value: left out,
	// it must not fail the scrape.
	if err := adm.CommitAllOffsets(context.Background(), "bad\xffgroup", offs); err != nil {
		t.Fatal(err)
	}

	m := scrape(t, web)
	tl := fmt.Sprintf(`{topic="%s"}`, topic)
	pl := fmt.Sprintf(`{partition="0",topic="%s"}`, topic)
	want := map[string]float64{
		"kafka_server_brokertopicmetrics_messagesin_total" + tl:                                     n,
		"kafka_log_log_logendoffset" + pl:                                                           n,
		"kafka_log_log_logstartoffset" + pl:                                                         0,
		"kafka_server_replicamanager_underreplicatedpartitions":                                     0,
		"kafka_controller_kafkacontroller_activecontrollercount":                                    1,
		"kafka_controller_kafkacontroller_offlinepartitionscount":                                   0,
		"kafka_controller_kafkacontroller_activebrokercount":                                        1,
		`kafka_consumergroup_lag{consumergroup="laggard",partition="0",topic="metered"}`:            30,
		`kafka_consumergroup_current_offset{consumergroup="laggard",partition="0",topic="metered"}`: n - 30,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	size := m["kafka_log_log_size"+pl]
	if in := m["kafka_server_brokertopicmetrics_bytesin_total"+tl]; in <= 0 || in != size {
		t.Errorf("bytes in %v, log size %v: want them equal", in, size)
	}
	if out := m["kafka_server_brokertopicmetrics_bytesout_total"+tl]; out != size {
		t.Errorf("bytes out %v, want the log's %v bytes read once", out, size)
	}
	produces := m[`kafka_network_requestmetrics_requests_total{request="Produce"}`]
	if produces < n {
		t.Errorf("Produce requests %v, want at least %d", produces, n)
	}
	if c := m[`kafka_network_requestmetrics_totaltimems_count{request="Produce"}`]; c != produces {
		t.Errorf("Produce latency histogram count %v, requests %v", c, produces)
	}
	if m[`kafka_network_requestmetrics_totaltimems_bucket{request="Produce",le="+Inf"}`] != produces {
		t.Errorf("Produce latency +Inf bucket is not the request count")
	}
	// One node leads every partition it hosts, the internal topics' too.
	if lc, pc := m["kafka_server_replicamanager_leadercount"], m["kafka_server_replicamanager_partitioncount"]; lc < 1 || lc != pc {
		t.Errorf("leader count %v, partition count %v, want equal on a single node", lc, pc)
	}
	if m["kafka_server_raft_metrics_high_watermark"] < 1 {
		t.Errorf("metadata high watermark %v", m["kafka_server_raft_metrics_high_watermark"])
	}
	if m["kafka_server_socket_server_metrics_connection_count"] < 1 {
		t.Errorf("no connection counted while a client is connected")
	}
	if m["kafka_server_raft_metrics_commit_latency_ms_count"] < 1 || m["kafka_server_raft_metrics_current_leader"] != 1 {
		t.Errorf("raft metrics: commits %v, leader %v", m["kafka_server_raft_metrics_commit_latency_ms_count"], m["kafka_server_raft_metrics_current_leader"])
	}

	// A deleted topic's series go, as Kafka drops its metrics.
	mustCLI(t, p.addr, "", "topic", "delete", topic)
	deadline := time.Now().Add(20 * time.Second)
	for {
		m = scrape(t, web)
		_, in := m["kafka_server_brokertopicmetrics_messagesin_total"+tl]
		_, size := m["kafka_log_log_size"+pl]
		if !in && !size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted topic still on /metrics: messagesin %v, size %v", in, size)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHealthReadiness: a node of a two-voter quorum whose peer is not up
// yet is live (/healthz 200) but not ready (/readyz 503, saying why);
// once the peer starts, both are ready and `gregor cluster health` reads
// both nodes' probes; an invalid http.listener is refused at start.
func TestHealthReadiness(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	client, ctrl, web := freePorts(t, 2), freePorts(t, 2), freePorts(t, 2)
	voters := fmt.Sprintf("1@127.0.0.1:%d,2@127.0.0.1:%d", ctrl[0], ctrl[1])
	args := func(i int) []string {
		return []string{"--data-dir", t.TempDir(),
			"--override", fmt.Sprintf("node.id=%d", i+1),
			"--override", "controller.quorum.voters=" + voters,
			"--override", fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", client[i], ctrl[i]),
			"--override", "cluster.id=SGVhbHRoUmVhZGluZXNzMQ",
			"--override", fmt.Sprintf("http.listener=127.0.0.1:%d", web[i])}
	}
	n1 := launchServe(t, args(0)...)
	addr1 := httpAddr(t, n1)
	if code, body := httpGet(t, addr1, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz before the quorum formed: %d %s", code, body)
	}
	code, body := httpGet(t, addr1, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: ") {
		t.Fatalf("/readyz before the quorum formed: %d %s", code, body)
	}

	n2 := launchServe(t, args(1)...)
	for i, p := range []*serveProcess{n1, n2} {
		select {
		case p.addr = <-p.started:
		case <-p.done:
			t.Fatalf("node %d exited:\n%s", i+1, p.log())
		case <-time.After(60 * time.Second):
			t.Fatalf("node %d did not start:\n%s", i+1, p.log())
		}
	}
	for _, a := range []string{addr1, httpAddr(t, n2)} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			code, body := httpGet(t, a, "/readyz")
			if code == http.StatusOK && strings.TrimSpace(body) == "ready" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s /readyz after start: %d %s", a, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	r := runCLI(t, n1.addr, "", "cluster", "health", "--json", "--http-port", "1",
		"--http", fmt.Sprintf("127.0.0.1:%d", web[0]), "--http", fmt.Sprintf("127.0.0.1:%d", web[1]))
	var h clusterHealthReport
	if err := json.Unmarshal([]byte(r.out), &h); err != nil || r.code != 0 || len(h.Probes) != 2 ||
		h.Probes[0].NodeID != 1 || h.Probes[1].NodeID != 2 || !h.Probes[0].Ready || !h.Probes[1].Ready || !h.Healthy {
		t.Errorf("cluster health with probes: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}

	// Stopped, node 2's probe is gone and node 1 is no longer ready: the
	// quorum of two has lost its majority.
	n2.stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpGet(t, addr1, "/readyz")
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 /readyz with its peer down: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}

	bad := launchServe(t, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--override", "http.listener=localhost")
	if code, out := bad.waitExit(20 * time.Second); code == 0 || !strings.Contains(out, "http.listener") || !strings.Contains(out, "HOST:PORT") {
		t.Errorf("invalid http.listener: exit %d\n%s", code, out)
	}
}
