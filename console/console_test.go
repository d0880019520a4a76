package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/brokertest"
	"github.com/gregorbroker/gregor/config"
)

// start runs a real gregor and a console connected to it, served by an
// httptest server; it returns the console's URL and a kadm client of the
// same broker.
func start(t *testing.T, cfg Config) (string, *kadm.Client, *kgo.Client) {
	t.Helper()
	addr := brokertest.Start(t)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	con := New(cfg)
	if err := con.Start(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(srv.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return srv.URL, kadm.NewClient(cl), cl
}

func getJSON(t *testing.T, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

func post(t *testing.T, url, contentType, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func createTopic(t *testing.T, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := adm.CreateTopic(ctx, partitions, 1, configs, name)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// TestConsoleProduceAndBrowse produces through the API and reads the
// record back by offset, by time and as the live tail would.
func TestConsoleProduceAndBrowse(t *testing.T) {
	url, adm, _ := start(t, Config{})
	createTopic(t, adm, "orders", 3, nil)

	code, got := post(t, url+"/api/topics/orders/records", "application/json",
		`{"partition":2,"key":"order-7","value":"{\"total\":12.5}","headers":[{"key":"trace","value":"abc"},{"key":"bin","value":"x"}]}`)
	if code != 200 || got["partition"] != 2.0 || got["offset"] != 0.0 {
		t.Fatalf("produce: %d %v", code, got)
	}
	// A second record, after a moment, to seek to by time.
	time.Sleep(30 * time.Millisecond)
	between := time.Now().UnixMilli()
	time.Sleep(30 * time.Millisecond)
	if code, got = post(t, url+"/api/topics/orders/records", "application/json; charset=utf-8", `{"partition":2,"key":null,"value":"second"}`); code != 200 || got["offset"] != 1.0 {
		t.Fatalf("produce 2: %d %v", code, got)
	}

	var recs recordsJSON
	if code := getJSON(t, url+"/api/topics/orders/records?partition=2&offset=0", &recs); code != 200 {
		t.Fatalf("records: %d", code)
	}
	if len(recs.Records) != 2 || recs.Next != 2 || recs.EndOffset != 2 {
		t.Fatalf("records: %+v", recs)
	}
	r := recs.Records[0]
	if r.Offset != 0 || r.Key.Text != "order-7" || !r.Key.UTF8 || r.Key.JSON || r.Value.Text != `{"total":12.5}` || !r.Value.JSON ||
		r.Value.Hex != fmt.Sprintf("%x", `{"total":12.5}`) {
		t.Fatalf("record 0: %+v", r)
	}
	if len(r.Headers) != 2 || r.Headers[0].Key != "trace" || r.Headers[0].Value.Text != "abc" || r.Headers[1].Key != "bin" {
		t.Fatalf("headers: %+v", r.Headers)
	}
	if r2 := recs.Records[1]; !r2.Key.Null || r2.Value.Text != "second" || r2.Offset != 1 {
		t.Fatalf("record 1: %+v", r2)
	}

	// By time: the first record at or after `between` is offset 1.
	if getJSON(t, fmt.Sprintf("%s/api/topics/orders/records?partition=2&time=%d", url, between), &recs); len(recs.Records) != 1 || recs.From != 1 || recs.Records[0].Value.Text != "second" {
		t.Fatalf("by time: %+v", recs)
	}
	// By offset from the middle, and "end" (the newest 1).
	if getJSON(t, url+"/api/topics/orders/records?partition=2&offset=1", &recs); len(recs.Records) != 1 || recs.Records[0].Offset != 1 {
		t.Fatalf("offset 1: %+v", recs)
	}
	if getJSON(t, url+"/api/topics/orders/records?partition=2&offset=end&limit=1", &recs); len(recs.Records) != 1 || recs.Records[0].Offset != 1 {
		t.Fatalf("end: %+v", recs)
	}
	// At the end without wait: nothing, next stays.
	if getJSON(t, url+"/api/topics/orders/records?partition=2&offset=2", &recs); len(recs.Records) != 0 || recs.Next != 2 {
		t.Fatalf("at end: %+v", recs)
	}

	// The tail: a wait at the end returns the record produced meanwhile.
	done := make(chan recordsJSON, 1)
	go func() {
		var tail recordsJSON
		getJSON(t, url+"/api/topics/orders/records?partition=2&offset=2&wait=5000", &tail)
		done <- tail
	}()
	time.Sleep(300 * time.Millisecond)
	post(t, url+"/api/topics/orders/records", "application/json", `{"partition":2,"value":"\u0000\u00ff"}`)
	select {
	case tail := <-done:
		if len(tail.Records) != 1 || tail.Records[0].Offset != 2 || tail.Next != 3 || tail.Records[0].Value.Hex != "00c3bf" {
			t.Fatalf("tail: %+v", tail)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tail did not return")
	}

	// The three records came from one producer (one producer id).
	var tx struct {
		Producers []producerJSON `json:"producers"`
	}
	getJSON(t, url+"/api/transactions", &tx)
	if len(tx.Producers) != 1 || tx.Producers[0].Partition != 2 || tx.Producers[0].LastSequence != 2 {
		t.Fatalf("producers: %+v", tx.Producers)
	}
	// A keyed record without a partition goes where the key hashes.
	if code, got = post(t, url+"/api/topics/orders/records", "application/json", `{"key":"k","value":"v"}`); code != 200 {
		t.Fatalf("keyed produce: %d %v", code, got)
	}
	if want := kgo.KafkaHasher(murmur2)([]byte("k"), 3); got["partition"] != float64(want) {
		t.Fatalf("key k went to %v, want %d", got["partition"], want)
	}
	if code, got = post(t, url+"/api/topics/orders/records", "application/json", `{"partition":3,"value":"v"}`); code != 400 {
		t.Fatalf("partition 3 of 3: %d %v", code, got)
	}
	if code, got = post(t, url+"/api/topics/nope/records", "application/json", `{"value":"v"}`); code != 404 {
		t.Fatalf("unknown topic: %d %v", code, got)
	}

	// Bad requests are the caller's: 400 and 404.
	var e map[string]string
	if code := getJSON(t, url+"/api/topics/orders/records?partition=9", &e); code != 404 {
		t.Fatalf("partition 9: %d %v", code, e)
	}
	if code := getJSON(t, url+"/api/topics/orders/records?offset=x", &e); code != 400 {
		t.Fatalf("offset x: %d %v", code, e)
	}
}

// TestConsoleProduceRefused: a read-only console, a form post (not JSON)
// and a request from another origin are refused, and nothing is written.
func TestConsoleProduceRefused(t *testing.T) {
	url, adm, _ := start(t, Config{ReadOnly: true})
	createTopic(t, adm, "t", 1, nil)
	if code, got := post(t, url+"/api/topics/t/records", "application/json", `{"value":"x"}`); code != 403 || !strings.Contains(fmt.Sprint(got["error"]), "read-only") {
		t.Fatalf("read-only: %d %v", code, got)
	}

	url2, adm2, _ := start(t, Config{})
	createTopic(t, adm2, "t", 1, nil)
	if code, _ := post(t, url2+"/api/topics/t/records", "text/plain", `{"value":"x"}`); code != 415 {
		t.Fatalf("text/plain: %d", code)
	}
	if code, _ := post(t, url2+"/api/topics/t/records", "application/json", `{"value":"x"}`, "Origin", "http://evil.example"); code != 403 {
		t.Fatalf("foreign origin: %d", code)
	}
	for _, a := range []*kadm.Client{adm, adm2} {
		ends, err := a.ListEndOffsets(context.Background(), "t")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := ends.Lookup("t", 0); o.Offset != 0 {
			t.Fatalf("a refused produce wrote: end offset %d", o.Offset)
		}
	}
}

// TestConsoleTopicAndCluster checks a topic's partitions, offsets, size
// and config sources, and the cluster page's brokers and quorum.
func TestConsoleTopicAndCluster(t *testing.T) {
	url, adm, cl := start(t, Config{})
	retention := "3600000"
	createTopic(t, adm, "events", 2, map[string]*string{"retention.ms": &retention})
	for i := range 5 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "events", Partition: 0, Value: []byte(fmt.Sprint("v", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var tj struct {
		topicJSON
		PartitionList []partitionJSON `json:"partition_list"`
		Configs       []configJSON    `json:"configs"`
		Errors        []string        `json:"errors"`
	}
	if code := getJSON(t, url+"/api/topics/events", &tj); code != 200 {
		t.Fatalf("topic: %d", code)
	}
	if tj.Partitions != 2 || tj.Records != 5 || len(tj.Errors) != 0 || tj.Size <= 0 {
		t.Fatalf("topic: %+v", tj.topicJSON)
	}
	// The default partitioner chose; count what is where.
	var total int64
	for _, p := range tj.PartitionList {
		if p.Leader != 1 || len(p.ISR) != 1 || p.StartOffset != 0 {
			t.Fatalf("partition: %+v", p)
		}
		total += p.EndOffset
	}
	if total != 5 {
		t.Fatalf("end offsets add to %d, want 5", total)
	}
	src := make(map[string]configJSON)
	for _, c := range tj.Configs {
		src[c.Name] = c
	}
	if c := src["retention.ms"]; c.Source != "DYNAMIC_TOPIC_CONFIG" || c.Value == nil || *c.Value != retention {
		t.Fatalf("retention.ms: %+v", c)
	}
	if c := src["cleanup.policy"]; c.Source != "DEFAULT_CONFIG" || c.Value == nil || *c.Value != "delete" {
		t.Fatalf("cleanup.policy: %+v", c)
	}

	var list struct{ Topics []topicJSON }
	getJSON(t, url+"/api/topics", &list)
	found := false
	for _, x := range list.Topics {
		if x.Name == "events" {
			found = x.Records == 5 && x.Partitions == 2 && x.Size == tj.Size
		}
	}
	if !found {
		t.Fatalf("topics list: %+v", list)
	}
	var e map[string]string
	if code := getJSON(t, url+"/api/topics/nope", &e); code != 404 {
		t.Fatalf("unknown topic: %d %v", code, e)
	}

	var c struct {
		ClusterID    string       `json:"cluster_id"`
		ControllerID int32        `json:"controller_id"`
		Brokers      []brokerJSON `json:"brokers"`
		Quorum       quorumJSON   `json:"quorum"`
	}
	getJSON(t, url+"/api/cluster", &c)
	if c.ClusterID == "" || len(c.Brokers) != 1 || c.Brokers[0].NodeID != 1 || c.Quorum.LeaderID != 1 || c.Quorum.Error != "" ||
		len(c.Quorum.Replicas) != 1 || c.Quorum.Replicas[0].Role != "Leader" || c.Quorum.HighWatermark <= 0 {
		t.Fatalf("cluster: %+v", c)
	}
}

// TestConsoleGroupLag commits offsets behind the end and checks the lag
// per partition, in total, in the list, and in the sampled history.
func TestConsoleGroupLag(t *testing.T) {
	url, adm, cl := start(t, Config{SampleEvery: 100 * time.Millisecond})
	createTopic(t, adm, "work", 2, nil)
	ctx := context.Background()
	for i := range 7 {
		p := int32(i % 2) // 4 records to partition 0, 3 to partition 1
		cl2, _ := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := cl2.ProduceSync(ctx, &kgo.Record{Topic: "work", Partition: p, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cl2.Close()
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "work", Partition: 0, At: 1, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "work", Partition: 1, At: 3, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "billing", offs); err != nil {
		t.Fatal(err)
	}

	var g struct {
		groupJSON
		Members []memberJSON  `json:"members"`
		Lags    []partLagJSON `json:"partitions"`
		Total   int64         `json:"total_lag"`
		History []sample      `json:"history"`
	}
	if code := getJSON(t, url+"/api/groups/billing", &g); code != 200 {
		t.Fatalf("group: %d", code)
	}
	if g.Type != "classic" || g.State != "Empty" || g.Total != 3 || len(g.Lags) != 2 || len(g.Members) != 0 {
		t.Fatalf("group: %+v", g)
	}
	if p := g.Lags[0]; p.Topic != "work" || p.Partition != 0 || p.Committed != 1 || p.End != 4 || p.Lag != 3 {
		t.Fatalf("partition 0: %+v", p)
	}
	if p := g.Lags[1]; p.Partition != 1 || p.Committed != 3 || p.End != 3 || p.Lag != 0 {
		t.Fatalf("partition 1: %+v", p)
	}

	// The sampler records the total; consuming moves it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		getJSON(t, url+"/api/groups/billing", &g)
		if n := len(g.History); n > 0 && g.History[n-1].Lag == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample of lag 3: %+v", g.History)
		}
		time.Sleep(50 * time.Millisecond)
	}
	offs.Add(kadm.Offset{Topic: "work", Partition: 0, At: 4, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "billing", offs); err != nil {
		t.Fatal(err)
	}
	for {
		var list struct{ Groups []groupJSON }
		getJSON(t, url+"/api/groups", &list)
		if len(list.Groups) == 1 && list.Groups[0].Lag != nil && *list.Groups[0].Lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("groups list never sampled lag 0: %+v", list.Groups)
		}
		time.Sleep(50 * time.Millisecond)
	}
	getJSON(t, url+"/api/groups/billing", &g)
	// Oldest first: a sample of 3, later the newest of 0.
	seen3 := -1
	for i, s := range g.History {
		if s.Lag == 3 && seen3 < 0 {
			seen3 = i
		}
		if i > 0 && s.T < g.History[i-1].T {
			t.Fatalf("history out of order: %+v", g.History)
		}
	}
	if n := len(g.History); n < 2 || seen3 < 0 || seen3 == n-1 || g.History[n-1].Lag != 0 {
		t.Fatalf("history: %+v", g.History)
	}
}

// TestConsoleGroupMembersAndTransactions: a live consumer group member
// with its assignment, and a committed transaction's id.
func TestConsoleGroupMembersAndTransactions(t *testing.T) {
	url, adm, cl := start(t, Config{})
	createTopic(t, adm, "in", 1, nil)
	seeds := cl.OptValue(kgo.SeedBrokers).([]string)
	ctx := context.Background()

	txn, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("console-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("t")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("in"), kgo.ClientID("reader-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if fs := cons.PollFetches(pctx); fs.NumRecords() == 0 {
		t.Fatalf("consumer read nothing: %v", fs.Errors())
	}

	var g struct {
		groupJSON
		Members []memberJSON `json:"members"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		getJSON(t, url+"/api/groups/readers", &g)
		if g.State == "Stable" && len(g.Members) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group: %+v", g)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m := g.Members[0]; m.ClientID != "reader-1" || len(m.Assigned) != 1 || m.Assigned[0] != "in-0" {
		t.Fatalf("member: %+v", m)
	}

	var tx struct {
		Transactions []listedTxnJSON `json:"transactions"`
		Producers    []producerJSON  `json:"producers"`
	}
	getJSON(t, url+"/api/transactions", &tx)
	if len(tx.Transactions) != 1 || tx.Transactions[0].TxnID != "console-txn" || tx.Transactions[0].State != "CompleteCommit" || tx.Transactions[0].ProducerID < 0 {
		t.Fatalf("transactions: %+v", tx.Transactions)
	}
	found := false
	for _, p := range tx.Producers {
		found = found || (p.Topic == "in" && p.ProducerID == tx.Transactions[0].ProducerID)
	}
	if !found {
		t.Fatalf("producers: %+v", tx.Producers)
	}
}

// TestConsoleOffAndPages: before Start (or when cmd/gregor finds no
// listener it may use) the API says why, and the pages still load.
func TestConsoleOffAndPages(t *testing.T) {
	con := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	con.Off("no PLAINTEXT listener")
	srv := httptest.NewServer(con.Handler())
	defer srv.Close()
	var e map[string]string
	if code := getJSON(t, srv.URL+"/api/topics", &e); code != 503 || !strings.Contains(e["error"], "no PLAINTEXT listener") {
		t.Fatalf("off: %d %v", code, e)
	}
	var st map[string]any
	getJSON(t, srv.URL+"/api/status", &st)
	if st["on"] != false || st["off"] != "no PLAINTEXT listener" {
		t.Fatalf("status: %v", st)
	}
	for _, path := range []string{"/", "/app.js", "/style.css"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) < 500 {
			t.Fatalf("%s: %d, %d bytes", path, resp.StatusCode, len(b))
		}
		if path == "/" && !bytes.Contains(b, []byte("<nav")) {
			t.Fatalf("index has no nav")
		}
	}
}

// TestLagHistoryBounded: the ring keeps the newest samples in order and
// a bounded number of groups.
func TestLagHistoryBounded(t *testing.T) {
	h := newLagHistory(3, 2)
	for i := range 5 {
		h.add("a", sample{T: int64(i), Lag: int64(10 * i)})
	}
	got := h.history("a")
	if len(got) != 3 || got[0].T != 2 || got[2].T != 4 {
		t.Fatalf("history: %+v", got)
	}
	if s, ok := h.latest("a"); !ok || s.Lag != 40 {
		t.Fatalf("latest: %+v %v", s, ok)
	}
	h.add("b", sample{T: 1})
	h.add("c", sample{T: 1}) // over maxGroups: not kept
	if len(h.history("c")) != 0 || len(h.history("b")) != 1 {
		t.Fatal("maxGroups not kept")
	}
	h.keepOnly(map[string]bool{"b": true})
	if _, ok := h.latest("a"); ok {
		t.Fatal("a kept after it was gone")
	}
}

// TestConsoleConsumerAndShareGroups: a KIP-848 consumer group and a
// KIP-932 share group, each with one live member, described by the
// call of their type, with their assignments and lag.
func TestConsoleConsumerAndShareGroups(t *testing.T) {
	addr := brokertest.Start(t, func(c *config.Broker) {
		c.ShareCoordinatorStateTopicNumPartitions = 1
		c.GroupShareHeartbeatIntervalMs = 500
	})
	con := New(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := con.Start(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(con.Close)
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(srv.Close)
	url := srv.URL
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	createTopic(t, adm, "q", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "q", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	type groupDetail struct {
		groupJSON
		Members []memberJSON  `json:"members"`
		Lags    []partLagJSON `json:"partitions"`
		Total   int64         `json:"total_lag"`
	}
	waitGroup := func(name string, ok func(g groupDetail) bool) groupDetail {
		t.Helper()
		var g groupDetail
		for ctx.Err() == nil {
			g = groupDetail{}
			getJSON(t, url+"/api/groups/"+name, &g)
			if ok(g) {
				return g
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("group %s never as wanted: %+v", name, g)
		return g
	}

	// A consumer group (KIP-848): reads 5, commits them.
	next, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("next"), kgo.ConsumeTopics("q"), kgo.ClientID("next-1"),
		kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	for read := 0; read < 5; {
		fs := next.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer group read %d of 5", read)
		}
		read += fs.NumRecords()
	}
	if err := next.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	g := waitGroup("next", func(g groupDetail) bool { return g.State == "Stable" && len(g.Members) == 1 && len(g.Lags) == 1 })
	if g.Type != "consumer" || g.Members[0].ClientID != "next-1" || len(g.Members[0].Assigned) != 1 || g.Members[0].Assigned[0] != "q-0" {
		t.Fatalf("consumer group: %+v", g)
	}
	if p := g.Lags[0]; p.Committed != 5 || p.End != 5 || p.Lag != 0 || p.Member != g.Members[0].MemberID || g.Total != 0 {
		t.Fatalf("consumer group lag: %+v", g.Lags)
	}

	// A share group (KIP-932) reading from the earliest: its lag falls to
	// 0 once it has acknowledged all 5.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	earliest := "earliest"
	c.Name, c.Value = "share.auto.offset.reset", &earliest
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("share.auto.offset.reset: %v %+v", err, resp)
	}
	share, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("sg"), kgo.ConsumeTopics("q"), kgo.ClientID("share-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer share.Close()
	for read := 0; read < 5; {
		fs := share.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("share group read %d of 5", read)
		}
		read += fs.NumRecords()
		share.MarkAcks(kgo.AckAccept)
	}
	if err := share.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	g = waitGroup("sg", func(g groupDetail) bool { return len(g.Members) == 1 && len(g.Lags) == 1 && g.Lags[0].Committed == 5 })
	if g.Type != "share" || g.Members[0].ClientID != "share-1" || len(g.Members[0].Assigned) != 1 || g.Members[0].Assigned[0] != "q-0" {
		t.Fatalf("share group: %+v", g)
	}
	if p := g.Lags[0]; p.End != 5 || p.Lag != 0 || g.Total != 0 {
		t.Fatalf("share group lag: %+v", g.Lags)
	}

	var list struct{ Groups []groupJSON }
	getJSON(t, url+"/api/groups", &list)
	types := map[string]string{}
	for _, x := range list.Groups {
		types[x.Group] = x.Type
	}
	if types["next"] != "consumer" || types["sg"] != "share" {
		t.Fatalf("groups list: %+v", list.Groups)
	}
}

// TestConsoleLoopbackOnly: on a listener bound to loopback, the console
// answers only requests addressed to a loopback host, so a page whose
// name was rebound to 127.0.0.1 gets nothing.
func TestConsoleLoopbackOnly(t *testing.T) {
	con := New(Config{LoopbackOnly: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	con.Off("not connected in this test")
	srv := httptest.NewServer(con.Handler())
	defer srv.Close()
	for host, want := range map[string]int{
		"localhost:9644": 200, "127.0.0.1:9644": 200, "[::1]:9644": 200, "127.1.2.3": 200, "app.localhost:9644": 200,
		"evil.example:9644": http.StatusMisdirectedRequest, "10.0.0.1:9644": http.StatusMisdirectedRequest,
		"localhost.evil.example": http.StatusMisdirectedRequest,
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/status", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// murmur2 is Kafka's hash of record keys (Utils.murmur2), written out
// here so the test checks the console against Kafka's rule, not against
// the partitioner it uses.
func murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
