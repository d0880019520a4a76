package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"
)

// debianPython is Debian's interpreter, which python3-confluent-kafka
// installs into; the python3 on PATH may be another one without it.
const debianPython = "/usr/bin/python3"

// confluentScript drives librdkafka's transactional producer and its
// consumers. "produce" commits one transaction and aborts another (whose
// records are flushed to the broker first, so they are in the log);
// "consume" reads every partition from the start at an isolation level
// until librdkafka reports the end of each, and prints the values as JSON.
const confluentScript = `
import json, sys, time
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]

if mode == "produce":
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "confluent-txn",
                  "transaction.timeout.ms": 30000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=("committed-%d" % i).encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(7):
        p.produce(topic, value=("aborted-%d" % i).encode(), partition=i % 2)
    if p.flush(30) != 0:
        sys.exit("aborted records not delivered before the abort")
    p.abort_transaction(30)
    print(json.dumps({"ok": True}))
elif mode == "consume":
    iso = sys.argv[4]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "confluent-" + iso,
                  "isolation.level": iso, "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(2)])
    eof, values = set(), []
    deadline = time.time() + 30
    while len(eof) < 2:
        if time.time() > deadline:
            sys.exit("no end of partition after 30s; read %r" % values)
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            sys.exit("consume: %s" % m.error())
        values.append(m.value().decode())
    c.close()
    print(json.dumps({"values": values}))
`

// requireConfluentKafka skips the test when Debian's python3-confluent-kafka
// is missing, and fails it instead in CI, where it must be installed.
func requireConfluentKafka(t *testing.T) {
	t.Helper()
	out, err := exec.Command(debianPython, "-c", "import confluent_kafka").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s cannot import confluent_kafka (apt-get install python3-confluent-kafka): %v %s", debianPython, err, out)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// runConfluent runs the script in one mode and decodes its JSON line.
func runConfluent(t *testing.T, script string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.CommandContext(testContext(t, 90*time.Second), debianPython, append([]string{script}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("confluent-kafka %v: %v\n%s", args, err, out)
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("confluent-kafka %v printed %q: %v", args, out, err)
	}
	return res
}

// TestTxnConfluentKafka: librdkafka's transactional producer (Debian's
// python3-confluent-kafka) commits one transaction and aborts another; a
// read_committed consumer sees exactly the committed records and a
// read_uncommitted one sees both transactions' records.
func TestTxnConfluentKafka(t *testing.T) {
	requireConfluentKafka(t)
	dir, port := t.TempDir(), freePort(t)
	p := startGregor(t, dir, port)
	createTopic(t, p.addr, "confluent-txn", 2)
	script := filepath.Join(t.TempDir(), "txn.py")
	if err := os.WriteFile(script, []byte(confluentScript), 0o644); err != nil {
		t.Fatal(err)
	}

	runConfluent(t, script, "produce", p.addr, "confluent-txn")
	// The markers are written after EndTxn answers: wait until both
	// transactions are decided everywhere.
	waitStable(t, p.addr, "confluent-txn", 15*time.Second)

	var committed, aborted []string
	for i := range 10 {
		committed = append(committed, fmt.Sprintf("committed-%d", i))
	}
	for i := range 7 {
		aborted = append(aborted, fmt.Sprintf("aborted-%d", i))
	}
	for _, tc := range []struct {
		iso  string
		want []string
	}{
		{"read_committed", committed},
		{"read_uncommitted", append(slices.Clone(committed), aborted...)},
	} {
		res := runConfluent(t, script, "consume", p.addr, "confluent-txn", tc.iso)
		var got []string
		list, _ := res["values"].([]any)
		for _, v := range list {
			s, _ := v.(string)
			got = append(got, s)
		}
		sort.Strings(got)
		want := slices.Clone(tc.want)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s consumer read %q, want %q", tc.iso, got, want)
		}
	}
}
