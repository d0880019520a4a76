package compat

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testToolConsole: kafka-console-producer parses keys and headers from
// its input lines and kafka-console-consumer prints them back, as a
// group member that commits what it read.
func testToolConsole(t *testing.T, e *ktEnv) {
	const topic, group = "tools-console", "tools-console-group"
	e.createTopic(t, topic, 2, nil)
	type rec struct{ headers, key, value string }
	input := []rec{
		{"h1:v1,h2:v2", "k1", "val1"},
		{"h1:x", "k2", "val2"},
		{"h3:y", "k1", "val3"},
		{"h4:z", "k3", "val4"},
	}
	var in strings.Builder
	for _, r := range input {
		fmt.Fprintf(&in, "%s\t%s\t%s\n", r.headers, r.key, r.value)
	}
	e.k.must(t, in.String(), classConsoleProducer, e.args("--topic", topic,
		"--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
		"--reader-property", "key.separator=\t")...)

	got := e.consumeAll(t, topic, kgo.ReadUncommitted())
	if len(got) != len(input) {
		t.Fatalf("topic holds %d records after the console producer, want %d", len(got), len(input))
	}
	// The console producer's default partitioner is Kafka's: murmur2 of
	// the key. franz-go's sticky key partitioner hashes the same way.
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	byValue := map[string]*kgo.Record{}
	for _, r := range got {
		byValue[string(r.Value)] = r
	}
	for _, w := range input {
		r := byValue[w.value]
		if r == nil {
			t.Errorf("record %q not in the topic", w.value)
			continue
		}
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+":"+string(h.Value))
		}
		if string(r.Key) != w.key || strings.Join(hs, ",") != w.headers {
			t.Errorf("record %q stored with key %q headers %q, want %q %q", w.value, r.Key, hs, w.key, w.headers)
		}
		if want := int32(part.Partition(&kgo.Record{Key: []byte(w.key)}, 2)); r.Partition != want {
			t.Errorf("record %q (key %s) in partition %d, want %d (murmur2)", w.value, w.key, r.Partition, want)
		}
	}

	r := e.k.run(t, "", classConsoleConsumer, e.args("--topic", topic, "--from-beginning",
		"--max-messages", strconv.Itoa(len(input)), "--group", group, "--timeout-ms", "30000",
		"--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
		"--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
		"--formatter-property", "key.separator=|")...)
	if r.err != nil {
		t.Fatalf("console consumer: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("Processed a total of %d messages", len(input))) {
		t.Errorf("console consumer's summary missing from stderr:\n%s", r.stderr)
	}
	printed := outLines(r.stdout)
	if len(printed) != len(input) {
		t.Fatalf("console consumer printed %d lines, want %d:\n%s", len(printed), len(input), r.stdout)
	}
	seen := map[string]bool{}
	for _, l := range printed {
		f := strings.Split(l, "|")
		if len(f) != 5 {
			t.Errorf("line %q is not Partition:p|Offset:o|headers|key|value", l)
			continue
		}
		rec := byValue[f[4]]
		if rec == nil {
			t.Errorf("line %q: no such record", l)
			continue
		}
		seen[f[4]] = true
		want := fmt.Sprintf("Partition:%d|Offset:%d|%s|%s|%s", rec.Partition, rec.Offset, f[2], rec.Key, rec.Value)
		var hs []string
		for _, h := range rec.Headers {
			hs = append(hs, h.Key+":"+string(h.Value))
		}
		if l != want || f[2] != strings.Join(hs, ",") {
			t.Errorf("console consumer printed %q, want %q with headers %q", l, want, strings.Join(hs, ","))
		}
	}
	if len(seen) != len(input) {
		t.Errorf("console consumer printed %d distinct records, want %d", len(seen), len(input))
	}
	// Closing, the consumer commits its position: the group is at the end.
	if c, ends := e.committed(t, group, topic), e.endOffsets(t, topic); !mapsEqualInt(c, ends) {
		t.Errorf("group %s committed %v, want the end offsets %v", group, c, ends)
	}
}

func mapsEqualInt[K comparable](a, b map[K]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// testToolConsumerGroups: kafka-consumer-groups lists a group, describes
// its lag, resets its offsets every way --reset-offsets knows, deletes
// one partition's offset and then the group.
func testToolConsumerGroups(t *testing.T, e *ktEnv) {
	const topic, group = "tools-groups", "tools-groups-group"
	e.createTopic(t, topic, 2, nil)
	// Five records per partition, timestamps a second apart from base, so
	// that --to-datetime has an answer to find.
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for p := range int32(2) {
		var rs []*kgo.Record
		for i := range 5 {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i),
				Timestamp: base.Add(time.Duration(i) * time.Second)})
		}
		e.produceTo(t, rs...)
	}
	commit := func(offsets map[int32]int64) {
		t.Helper()
		var os kadm.Offsets
		for p, o := range offsets {
			os.AddOffset(topic, p, o, -1)
		}
		resp, err := e.adm.CommitOffsets(ktCtx(t), group, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %v for %s: %v", offsets, group, err)
		}
	}
	commit(map[int32]int64{0: 2, 1: 5})

	out := e.k.must(t, "", classConsumerGroups, e.args("--list")...)
	if !slices.Contains(outLines(out), group) {
		t.Errorf("--list does not list %s:\n%s", group, out)
	}

	r := e.k.run(t, "", classConsumerGroups, e.args("--describe", "--group", group)...)
	if r.err != nil {
		t.Fatalf("--describe: %v\n%s", r.err, r.stderr)
	}
	out = r.stdout
	rows := parseTable(out, "GROUP")
	lags, err := e.adm.Lag(ktCtx(t), group)
	if err != nil {
		t.Fatalf("lag of %s: %v", group, err)
	}
	lag := lags[group]
	if err := lag.Error(); err != nil {
		t.Fatalf("lag of %s: %v", group, err)
	}
	if len(rows) != 2 {
		t.Fatalf("--describe printed %d partition rows, want 2:\n%s", len(rows), out)
	}
	for _, row := range rows {
		p := int32(atoi64(t, "PARTITION", row["PARTITION"]))
		l, ok := lag.Lag.Lookup(topic, p)
		if !ok {
			t.Fatalf("no lag for partition %d", p)
		}
		want := map[string]string{"GROUP": group, "TOPIC": topic,
			"CURRENT-OFFSET": strconv.FormatInt(l.Commit.At, 10), "LOG-END-OFFSET": strconv.FormatInt(l.End.Offset, 10),
			"LAG": strconv.FormatInt(l.Lag, 10), "CONSUMER-ID": "-", "HOST": "-", "CLIENT-ID": "-"}
		for k, v := range want {
			if row[k] != v {
				t.Errorf("--describe partition %d: %s = %q, want %q", p, k, row[k], v)
			}
		}
	}
	if !strings.Contains(r.stderr+r.stdout, "Consumer group '"+group+"' has no active members.") {
		t.Errorf("--describe of an empty group does not say it has no active members:\n%s\n%s", out, r.stderr)
	}

	// Each reset: the tool's arguments, the offsets it must print and
	// commit.
	resets := []struct {
		name string
		args []string
		want map[int32]int64
	}{
		{"to-earliest", []string{"--topic", topic, "--to-earliest"}, map[int32]int64{0: 0, 1: 0}},
		{"to-latest", []string{"--topic", topic, "--to-latest"}, map[int32]int64{0: 5, 1: 5}},
		{"to-offset", []string{"--topic", topic + ":0", "--to-offset", "3"}, map[int32]int64{0: 3, 1: 5}},
		{"shift-by", []string{"--topic", topic, "--shift-by", "-2"}, map[int32]int64{0: 1, 1: 3}},
		// The first record at or after base+2.5s is the fourth (offset 3).
		{"to-datetime", []string{"--topic", topic, "--to-datetime", base.Add(2500 * time.Millisecond).Format("2006-01-02T15:04:05.000Z")},
			map[int32]int64{0: 3, 1: 3}},
	}
	for _, rs := range resets {
		out := e.k.must(t, "", classConsumerGroups, e.args(append([]string{"--reset-offsets", "--group", group, "--execute"}, rs.args...)...)...)
		printed := map[int32]int64{}
		for _, row := range parseTable(out, "GROUP") {
			printed[int32(atoi64(t, "PARTITION", row["PARTITION"]))] = atoi64(t, "NEW-OFFSET", row["NEW-OFFSET"])
		}
		wantPrinted := rs.want
		if rs.name == "to-offset" {
			wantPrinted = map[int32]int64{0: 3} // only the partition named
		}
		if !mapsEqualInt(printed, wantPrinted) {
			t.Errorf("--reset-offsets --%s printed %v, want %v:\n%s", rs.name, printed, wantPrinted, out)
		}
		if c := e.committed(t, group, topic); !mapsEqualInt(c, rs.want) {
			t.Errorf("after --reset-offsets --%s the group is at %v, want %v", rs.name, c, rs.want)
		}
	}

	out = e.k.must(t, "", classConsumerGroups, e.args("--delete-offsets", "--group", group, "--topic", topic+":0")...)
	if !strings.Contains(out, "Request succeeded for deleting offsets from group "+group+".") {
		t.Errorf("--delete-offsets printed:\n%s", out)
	}
	if rows := parseTable(out, "TOPIC"); len(rows) != 1 || rows[0]["PARTITION"] != "0" || rows[0]["STATUS"] != "Successful" {
		t.Errorf("--delete-offsets table: %v", rows)
	}
	if c := e.committed(t, group, topic); !mapsEqualInt(c, map[int32]int64{1: 3}) {
		t.Errorf("after --delete-offsets of partition 0 the group holds %v, want only partition 1 at 3", c)
	}

	out = e.k.must(t, "", classConsumerGroups, e.args("--delete", "--group", group)...)
	if strings.TrimSpace(out) != "Deletion of requested consumer groups ('"+group+"') was successful." {
		t.Errorf("--delete printed %q", out)
	}
	groups, err := e.adm.ListGroups(ktCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups[group]; ok {
		t.Errorf("group %s still listed after --delete", group)
	}
}

// produceTo writes records to the partitions they name, with the
// test's one idempotent producer.
func (e *ktEnv) produceTo(t *testing.T, rs ...*kgo.Record) {
	t.Helper()
	if err := e.pcl.ProduceSync(ktCtx(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// testToolGetOffsets: kafka-get-offsets for the latest offsets, the
// offset of the largest timestamp (-3) and by timestamp.
func testToolGetOffsets(t *testing.T, e *ktEnv) {
	const topic = "tools-offsets"
	e.createTopic(t, topic, 2, nil)
	// Partition 0: timestamps 1000, 3000, 2000; partition 1 stays empty.
	for i, ts := range []int64{1000, 3000, 2000} {
		e.produceTo(t, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i), Timestamp: time.UnixMilli(ts)})
	}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--topic", topic}, []string{topic + ":0:3", topic + ":1:0"}},
		{[]string{"--topic-partitions", topic + ":0", "--time", "-3"}, []string{topic + ":0:1"}},
		{[]string{"--topic", topic, "--partitions", "0", "--time", "2500"}, []string{topic + ":0:1"}},
	}
	for _, c := range cases {
		out := e.k.must(t, "", classGetOffsets, e.args(c.args...)...)
		if got := outLines(out); !slices.Equal(got, c.want) {
			t.Errorf("kafka-get-offsets %s printed %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}
	// The same answers from franz-go.
	ctx := ktCtx(t)
	maxTS, err := e.adm.ListMaxTimestampOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := maxTS.Lookup(topic, 0); o.Offset != 1 {
		t.Errorf("ListOffsets(max timestamp) of partition 0 = %d, want 1", o.Offset)
	}
	after, err := e.adm.ListOffsetsAfterMilli(ctx, 2500, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup(topic, 0); o.Offset != 1 {
		t.Errorf("ListOffsets(2500) of partition 0 = %d, want 1", o.Offset)
	}
}

// testToolDeleteRecords: kafka-delete-records with an offset JSON file
// moves the partition's log start offset.
func testToolDeleteRecords(t *testing.T, e *ktEnv) {
	const topic = "tools-delete-records"
	e.createTopic(t, topic, 1, nil)
	for i := range 10 {
		e.produceTo(t, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i)})
	}
	path := e.k.writeFile(t, "delete-records.json",
		`{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"offset":4}]}`)
	out := e.k.must(t, "", classDeleteRecords, e.args("--offset-json-file", path)...)
	want := []string{"Executing records delete operation", "Records delete operation completed:",
		"partition: " + topic + "-0\tlow_watermark: 4"}
	if got := outLines(out); !slices.Equal(got, want) {
		t.Errorf("kafka-delete-records printed %q, want %q", got, want)
	}
	starts, err := e.adm.ListStartOffsets(ktCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Offset != 4 {
		t.Errorf("log start offset after kafka-delete-records = %d, want 4", o.Offset)
	}
	if got := e.consumeAll(t, topic, kgo.ReadUncommitted()); len(got) != 6 || string(got[0].Value) != "v4" {
		t.Errorf("after deleting below 4 the partition holds %d records, first %q; want 6 from v4", len(got), firstValue(got))
	}
}

func firstValue(rs []*kgo.Record) string {
	if len(rs) == 0 {
		return ""
	}
	return string(rs[0].Value)
}

// testToolLogDirs: kafka-log-dirs --describe reports the data directory
// and each partition's size, which must be the size of its segment files
// on disk.
func testToolLogDirs(t *testing.T, e *ktEnv) {
	const topic = "tools-log-dirs"
	e.createTopic(t, topic, 2, nil)
	for i := range 7 {
		e.produceTo(t, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "value-%d", i)})
	}
	out := e.k.must(t, "", classLogDirs, e.args("--describe", "--topic-list", topic)...)
	var js string
	for _, l := range outLines(out) {
		if strings.HasPrefix(l, "{") {
			js = l
		}
	}
	var got struct {
		Version int `json:"version"`
		Brokers []struct {
			Broker  int32 `json:"broker"`
			LogDirs []struct {
				LogDir     string  `json:"logDir"`
				Error      *string `json:"error"`
				Partitions []struct {
					Partition string `json:"partition"`
					Size      int64  `json:"size"`
					OffsetLag int64  `json:"offsetLag"`
					IsFuture  bool   `json:"isFuture"`
				} `json:"partitions"`
			} `json:"logDirs"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(js), &got); err != nil {
		t.Fatalf("kafka-log-dirs printed no JSON line (%v):\n%s", err, out)
	}
	dataDir := e.dataDir
	if len(got.Brokers) != 1 || got.Brokers[0].Broker != 1 || len(got.Brokers[0].LogDirs) != 1 {
		t.Fatalf("kafka-log-dirs: want broker 1 with one log dir: %s", js)
	}
	ld := got.Brokers[0].LogDirs[0]
	if ld.LogDir != dataDir || ld.Error != nil {
		t.Errorf("log dir %q (error %v), want %q", ld.LogDir, ld.Error, dataDir)
	}
	if len(ld.Partitions) != 2 {
		t.Fatalf("kafka-log-dirs lists %d partitions of %s, want 2: %s", len(ld.Partitions), topic, js)
	}
	for _, p := range ld.Partitions {
		onDisk := segmentBytes(t, filepath.Join(dataDir, p.Partition))
		if p.Size != onDisk || p.Size == 0 || p.OffsetLag != 0 || p.IsFuture {
			t.Errorf("partition %s: size %d, offsetLag %d, isFuture %v; want the %d bytes of its .log files, 0, false",
				p.Partition, p.Size, p.OffsetLag, p.IsFuture, onDisk)
		}
	}
}

// gregorDataDir is the data directory of a harness gregor: "data" next to
// its log file (harness.Start's layout).
func gregorDataDir(logPath string) string { return filepath.Join(filepath.Dir(logPath), "data") }

// segmentBytes sums the sizes of a partition directory's .log files.
func segmentBytes(t *testing.T, dir string) int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, de := range es {
		if strings.HasSuffix(de.Name(), ".log") {
			fi, err := de.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
	}
	return n
}

// testToolTransactions: kafka-transactions lists and describes an open
// transaction and its producer, finds no hanging one, and aborts it.
func testToolTransactions(t *testing.T, e *ktEnv) {
	const topic, txnID = "tools-transactions", "tools-txn"
	e.createTopic(t, topic, 1, nil)
	e.produceTo(t, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("before")})
	// A transaction timeout that outlasts the tools' runs: the
	// coordinator must not abort it before the tool does.
	tx, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.addr, ",")...), kgo.TransactionalID(txnID),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	ctx := ktCtx(t)
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("open-1")}, &kgo.Record{Value: []byte("open-2")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	pid, epoch, err := tx.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const startOffset = 1 // after "before"

	out := e.k.must(t, "", classTransactions, e.args("list")...)
	rows := parseTable(out, "TransactionalId")
	found := false
	for _, r := range rows {
		if r["TransactionalId"] == txnID {
			found = true
			if r["Coordinator"] != "1" || r["ProducerId"] != strconv.FormatInt(pid, 10) || r["TransactionState"] != "Ongoing" {
				t.Errorf("list: %v, want coordinator 1, producer %d, Ongoing", r, pid)
			}
		}
	}
	if !found {
		t.Errorf("list does not show %s:\n%s", txnID, out)
	}

	out = e.k.must(t, "", classTransactions, e.args("describe", "--transactional-id", txnID)...)
	rows = parseTable(out, "CoordinatorId")
	if len(rows) != 1 {
		t.Fatalf("describe printed\n%s", out)
	}
	d := rows[0]
	want := map[string]string{"CoordinatorId": "1", "TransactionalId": txnID, "ProducerId": strconv.FormatInt(pid, 10),
		"ProducerEpoch": strconv.Itoa(int(epoch)), "TransactionState": "Ongoing", "TopicPartitions": topic + "-0"}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("describe: %s = %q, want %q", k, d[k], v)
		}
	}
	if dts, err := e.adm.DescribeTransactions(ctx, txnID); err != nil {
		t.Error(err)
	} else if dt := dts[txnID]; d["TransactionTimeoutMs"] != strconv.Itoa(int(dt.TimeoutMillis)) ||
		d["CurrentTransactionStartTimeMs"] != strconv.FormatInt(dt.StartTimestamp, 10) {
		t.Errorf("describe: timeout %s start %s; DescribeTransactions says %d, %d",
			d["TransactionTimeoutMs"], d["CurrentTransactionStartTimeMs"], dt.TimeoutMillis, dt.StartTimestamp)
	}

	out = e.k.must(t, "", classTransactions, e.args("describe-producers", "--topic", topic, "--partition", "0")...)
	rows = parseTable(out, "ProducerId")
	var prod map[string]string
	for _, r := range rows {
		if r["ProducerId"] == strconv.FormatInt(pid, 10) {
			prod = r
		}
	}
	if prod == nil {
		t.Fatalf("describe-producers does not list producer %d:\n%s", pid, out)
	}
	if prod["ProducerEpoch"] != strconv.Itoa(int(epoch)) || prod["LastSequence"] != "1" ||
		prod["CurrentTransactionStartOffset"] != strconv.Itoa(startOffset) {
		t.Errorf("describe-producers: %v; want epoch %d, last sequence 1, transaction from offset %d", prod, epoch, startOffset)
	}

	out = e.k.must(t, "", classTransactions, e.args("find-hanging", "--broker-id", "1")...)
	if ls := outLines(out); len(ls) != 1 || !strings.HasPrefix(ls[0], "Topic") {
		t.Errorf("find-hanging: want only the table's header (the open transaction is live):\n%s", out)
	}

	// An operator's abort: markers written for the producer's open
	// transaction without its coordinator.
	e.k.must(t, "", classTransactions, e.args("abort", "--topic", topic, "--partition", "0",
		"--start-offset", strconv.Itoa(startOffset))...)
	ps, err := e.adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ps.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID == pid && p.CurrentTxnStartOffset != -1 {
			t.Errorf("after abort, producer %d still has a transaction from offset %d", pid, p.CurrentTxnStartOffset)
		}
	})
	// Read committed, the partition is stable past the abort marker and
	// holds only "before".
	stable, err := e.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := stable.Lookup(topic, 0); o.Offset != 4 {
		t.Errorf("last stable offset after abort = %d, want 4 (before, 2 aborted, marker)", o.Offset)
	}
	var vals []string
	for _, r := range e.consumeAll(t, topic, kgo.ReadCommitted()) {
		if !r.Attrs.IsControl() {
			vals = append(vals, string(r.Value))
		}
	}
	if !slices.Equal(vals, []string{"before"}) {
		t.Errorf("read committed after abort: %q, want [before]", vals)
	}
}

// testToolFeatures: kafka-features describe prints the features the
// broker's ApiVersions response carries, metadata.version (by release
// name) and kraft.version among them.
func testToolFeatures(t *testing.T, e *ktEnv) {
	out := e.k.must(t, "", classFeatures, e.args("describe")...)
	got := map[string]map[string]string{}
	for _, l := range outLines(out) {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "Feature:" || len(f)%2 != 0 {
			t.Fatalf("describe line %q is not Feature: name key: value...", l)
		}
		kv := map[string]string{}
		for i := 2; i+1 < len(f); i += 2 {
			kv[strings.TrimSuffix(f[i], ":")] = f[i+1]
		}
		got[f[1]] = kv
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "gregor-compat", "1"
	resp, err := req.RequestWith(ktCtx(t), e.cl)
	if err != nil {
		t.Fatal(err)
	}
	finalized := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		finalized[f.Name] = f.MaxVersionLevel
	}
	for _, f := range resp.SupportedFeatures {
		kv, ok := got[f.Name]
		if !ok {
			t.Errorf("feature %s (in ApiVersions) not described", f.Name)
			continue
		}
		if f.Name == "metadata.version" {
			continue // printed by release name (3.3-IV3 ...), not level
		}
		want := map[string]string{"SupportedMinVersion": strconv.Itoa(int(f.MinVersion)),
			"SupportedMaxVersion": strconv.Itoa(int(f.MaxVersion)), "FinalizedVersionLevel": strconv.Itoa(int(finalized[f.Name]))}
		for k, v := range want {
			if kv[k] != v {
				t.Errorf("feature %s: %s = %q, want %q", f.Name, k, kv[k], v)
			}
		}
		// Kafka's epoch is the metadata offset of the features seen, so
		// it may have moved on since the tool ran.
		if ep, err := strconv.ParseInt(kv["Epoch"], 10, 64); err != nil || ep < 0 || ep > resp.FinalizedFeaturesEpoch {
			t.Errorf("feature %s: Epoch = %q, want at most %d (ApiVersions, read after)", f.Name, kv["Epoch"], resp.FinalizedFeaturesEpoch)
		}
	}
	if len(got) != len(resp.SupportedFeatures) {
		t.Errorf("described %d features, ApiVersions carries %d", len(got), len(resp.SupportedFeatures))
	}
	for _, name := range []string{"group.version", "transaction.version"} {
		if _, ok := got[name]; !ok {
			t.Errorf("feature %s not described", name)
		}
	}
	// metadata.version is printed by release name: Kafka 4.4 runs at
	// 4.4-IV2 and supports from 3.3-IV3; Gregor runs at Kafka 4.0's level,
	// 4.0-IV3, its only one.
	mv, ok := got["metadata.version"]
	if !ok {
		t.Fatalf("no metadata.version line (a Kafka 4 broker always has one):\n%s", out)
	}
	release := regexp.MustCompile(`^[0-9]+\.[0-9]+-IV[0-9]+$`)
	for _, k := range []string{"SupportedMinVersion", "SupportedMaxVersion", "FinalizedVersionLevel"} {
		if !release.MatchString(mv[k]) {
			t.Errorf("metadata.version %s = %q, not a release name", k, mv[k])
		}
	}
	if mv["FinalizedVersionLevel"] != mv["SupportedMaxVersion"] {
		t.Errorf("metadata.version finalized at %s, supported up to %s; a new cluster runs at its highest", mv["FinalizedVersionLevel"], mv["SupportedMaxVersion"])
	}
	if e.ours && (mv["SupportedMinVersion"] != "4.0-IV3" || mv["FinalizedVersionLevel"] != "4.0-IV3") {
		t.Errorf("gregor's metadata.version: %v, want 4.0-IV3 supported and finalized", mv)
	}
	// kraft.version: Kafka finalizes 1 (KIP-853, a dynamic quorum);
	// Gregor's static quorum is at 0, supported only.
	if kv, ok := got["kraft.version"]; !ok {
		t.Errorf("kraft.version not described")
	} else if e.ours && (kv["SupportedMaxVersion"] != "0" || kv["FinalizedVersionLevel"] != "0") {
		t.Errorf("gregor's kraft.version: %v, want supported up to 0 and finalized at 0", kv)
	}
}

// testToolPerf: kafka-producer-perf-test writes its records and
// kafka-consumer-perf-test reads them all back.
func testToolPerf(t *testing.T, e *ktEnv) {
	const topic, n, size = "tools-perf", 500, 100
	e.createTopic(t, topic, 2, nil)
	out := e.k.must(t, "", classProducerPerf, e.args("--topic", topic, "--num-records", strconv.Itoa(n),
		"--record-size", strconv.Itoa(size), "--throughput", "-1", "--command-property", "acks=all")...)
	ls := outLines(out)
	if len(ls) == 0 || !strings.HasPrefix(ls[len(ls)-1], fmt.Sprintf("%d records sent, ", n)) {
		t.Errorf("producer perf test's summary is not \"%d records sent, ...\":\n%s", n, out)
	}
	var total int64
	for _, o := range e.endOffsets(t, topic) {
		total += o
	}
	if total != n {
		t.Errorf("after the producer perf test the topic holds %d records, want %d", total, n)
	}

	out = e.k.must(t, "", classConsumerPerf, e.args("--topic", topic, "--num-records", strconv.Itoa(n), "--timeout", "30000")...)
	ls = outLines(out)
	if len(ls) != 2 {
		t.Fatalf("consumer perf test printed\n%s\nwant a header and one line", out)
	}
	head, vals := strings.Split(ls[0], ", "), strings.Split(ls[1], ", ")
	if len(head) != len(vals) {
		t.Fatalf("consumer perf test: %d columns, %d values", len(head), len(vals))
	}
	row := map[string]string{}
	for i, h := range head {
		row[h] = vals[i]
	}
	if row["data.consumed.in.nMsg"] != strconv.Itoa(n) {
		t.Errorf("consumer perf test consumed %s records, want %d", row["data.consumed.in.nMsg"], n)
	}
	if mb, err := strconv.ParseFloat(row["data.consumed.in.MB"], 64); err != nil || fmt.Sprintf("%.4f", mb) != fmt.Sprintf("%.4f", float64(n*size)/(1<<20)) {
		t.Errorf("consumer perf test consumed %s MB, want %.4f", row["data.consumed.in.MB"], float64(n*size)/(1<<20))
	}
}

// verifiableEvent is one JSON line of kafka-verifiable-producer or
// kafka-verifiable-consumer.
type verifiableEvent struct {
	Name       string `json:"name"`
	Key        *string
	Value      string `json:"value"`
	Offset     int64  `json:"offset"`
	Partition  int32  `json:"partition"`
	Sent       int    `json:"sent"`
	Acked      int    `json:"acked"`
	Count      int    `json:"count"`
	Success    bool   `json:"success"`
	Partitions []struct {
		Partition int32 `json:"partition"`
		Count     int   `json:"count"`
		MinOffset int64 `json:"minOffset"`
		MaxOffset int64 `json:"maxOffset"`
	} `json:"partitions"`
	Offsets []struct {
		Partition int32 `json:"partition"`
		Offset    int64 `json:"offset"`
	} `json:"offsets"`
}

func parseEvents(t *testing.T, out string) []verifiableEvent {
	t.Helper()
	var evs []verifiableEvent
	for _, l := range outLines(out) {
		var ev verifiableEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// testToolVerifiable: kafka-verifiable-producer's acknowledgements match
// the log, and kafka-verifiable-consumer reads and commits them all.
func testToolVerifiable(t *testing.T, e *ktEnv) {
	const topic, group, n = "tools-verifiable", "tools-verifiable-group", 30
	e.createTopic(t, topic, 2, nil)
	out := e.k.must(t, "", classVerifiableProd, e.args("--topic", topic, "--max-messages", strconv.Itoa(n), "--acks", "-1")...)
	acked := map[int32]map[int64]string{0: {}, 1: {}}
	var summary *verifiableEvent
	for _, ev := range parseEvents(t, out) {
		switch ev.Name {
		case "producer_send_success":
			acked[ev.Partition][ev.Offset] = ev.Value
		case "producer_send_error":
			t.Errorf("verifiable producer: send error %+v", ev)
		case "tool_data":
			summary = &ev
		}
	}
	if summary == nil || summary.Sent != n || summary.Acked != n {
		t.Errorf("verifiable producer's tool_data: %+v, want %d sent and acked", summary, n)
	}
	for _, r := range e.consumeAll(t, topic, kgo.ReadUncommitted()) {
		if v, ok := acked[r.Partition][r.Offset]; !ok || v != string(r.Value) {
			t.Errorf("record %d/%d = %q; acknowledged as %q (%v)", r.Partition, r.Offset, r.Value, v, ok)
		}
		delete(acked[r.Partition], r.Offset)
	}
	for p, m := range acked {
		if len(m) > 0 {
			t.Errorf("partition %d: %d acknowledged records not in the log", p, len(m))
		}
	}

	out = e.k.must(t, "", classVerifiableCons, e.args("--topic", topic, "--group-id", group,
		"--max-messages", strconv.Itoa(n), "--reset-policy", "earliest")...)
	consumed := 0
	committed := map[int32]int64{}
	for _, ev := range parseEvents(t, out) {
		switch ev.Name {
		case "records_consumed":
			consumed += ev.Count
		case "offsets_committed":
			if !ev.Success {
				t.Errorf("verifiable consumer: commit failed: %+v", ev)
			}
			for _, o := range ev.Offsets {
				committed[o.Partition] = max(committed[o.Partition], o.Offset)
			}
		}
	}
	// The consumer commits the partitions it read from: the producer's
	// sticky partitioner may have left one empty.
	ends := e.endOffsets(t, topic)
	for p, o := range ends {
		if o == 0 {
			delete(ends, p)
		}
	}
	if consumed != n || !mapsEqualInt(committed, ends) {
		t.Errorf("verifiable consumer consumed %d records and committed %v; want %d and the end offsets %v", consumed, committed, n, ends)
	}
	if c := e.committed(t, group, topic); !mapsEqualInt(c, ends) {
		t.Errorf("group %s is at %v, want the end offsets %v", group, c, ends)
	}
}
