package compat

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/compat/harness"
)

// The Java client is Apache Kafka's kafka-clients 4.4.0 (pinned by
// java/pom.xml) driven by the runner under java/src: one JVM per gregor
// target runs every scenario asked of it, one at a time over stdin, and
// answers each with the JSON line the script clients print. The JVM
// starts once per target, not once per scenario: a JVM and its clients'
// class loading cost seconds.

// javaHeap bounds the runner's heap: bulk.100k holds its 100,000 records
// twice (sent and read), a few MiB; the default would take a quarter of
// the machine's memory.
const javaHeap = "-Xmx256m"

// javaExtras are the scenarios only the Java client runs, by TestJava
// (the harness has one scenario list for every client). Their outcomes
// go in expected.txt under the client java like the shared ones.
var javaExtras = []harness.Scenario{
	{ID: "group.resume.consumer", Pass: "as group.resume with the KIP-848 consumer (group.protocol=consumer)"},
	{ID: "group.split.consumer", Pass: "as group.split with the KIP-848 consumer and its server-side assignor"},
	{ID: "group.static", Pass: "static membership (KIP-345): a member closed without leaving keeps its place (DescribeGroups shows both), comes back with its group.instance.id to the same partitions without a rebalance of the other; one leaves by instance id, Admin removes the other (removeMembersFromConsumerGroup) and the group is Empty"},
	{ID: "group.cooperative", Pass: "classic with the cooperative-sticky assignor: when a second member joins, the first revokes only the partitions that move and keeps the rest; records are read once; when it leaves, they come back without another revocation"},
	{ID: "group.session_expiry", Pass: "a classic member that vanishes without LeaveGroup is expired after its 6 s session timeout and its partitions go to the other member, which then reads every record once"},
	{ID: "group.rebalance.consumer", Pass: "as group.cooperative with the KIP-848 consumer: the broker's reassignment revokes only what moves"},
	{ID: "group.regex.consumer", Pass: "KIP-848 regex subscription resolved by the broker: the member reads the two matching topics, a matching topic created later, and not a topic that does not match"},
	{ID: "txn.eos", Pass: "consume-transform-produce with sendOffsetsToTransaction (classic group): one transaction aborted and redone; the output read_committed holds each result once and the group's offsets are the input's ends"},
	{ID: "txn.eos.consumer", Pass: "as txn.eos with a KIP-848 group (TxnOffsetCommit checked against its member epoch)"},
	{ID: "txn.v2", Pass: "transaction.version 2 is finalized; commit, abort, commit bump the producer epoch each time (the coordinator and the batches show it); read_committed sees only the committed records"},
	{ID: "txn.interleaved", Pass: "two transactional producers interleave on one partition, one commits and one aborts: read_committed returns the committed records only, read_uncommitted all of them in offset order"},
	{ID: "txn.timeout", Pass: "a transaction left open past transaction.timeout.ms (3 s) is aborted by the coordinator: the last stable offset moves past it, read_committed reads none of it, and the producer cannot commit it"},
	{ID: "produce.record_shapes", Pass: "null key, null value, empty value, a null header value and repeated header keys round-trip; a LogAppendTime topic stamps the broker's time, shown by the acknowledgement and the consumer"},
	{ID: "streams.wordcount", Pass: "a Kafka Streams 4.4.0 word count (at least once): Streams creates its repartition and compacted changelog topics, the counts on the output topic reach the expected ones, and the app's group commits the input's ends"},
	{ID: "streams.eos_v2", Pass: "as streams.wordcount with processing.guarantee=exactly_once_v2, the output read committed"},
	{ID: "streams.protocol", Pass: "as streams.wordcount with group.protocol=streams (KIP-1071 streams groups, StreamsGroupHeartbeat)"},
	{ID: "share.consume", Pass: "a share group (KIP-932) through KafkaShareConsumer: the group's share.auto.offset.reset set to earliest (a GROUP config), every record delivered once, acknowledged and committed; describeShareGroups and listGroups show the group"},
	{ID: "admin.topics", Pass: "createTopics (validateOnly, then two topics: partitions, replication, topic id, configs answered; again: TOPIC_ALREADY_EXISTS), listTopics, describeTopics one partition per response and by topic id, deleteTopics by name and by id"},
	{ID: "admin.cluster", Pass: "describeCluster (cluster id, node 1, controller), describeFeatures (transaction.version, group.version finalized and supported), describeMetadataQuorum (leader 1 among the voters), describeConfigs of broker 1 (auto.create.topics.enable as each target was started)"},
	{ID: "admin.groups.classic", Pass: "a classic group live (listGroups, describeConsumerGroups: Stable, the member and its partitions) and empty (listConsumerGroupOffsets, alterConsumerGroupOffsets, deleteConsumerGroupOffsets, deleteConsumerGroups), each read back"},
	{ID: "admin.groups.consumer", Pass: "as admin.groups.classic for a KIP-848 group (ConsumerGroupDescribe: member and group epochs)"},
	{ID: "admin.listoffsets", Pass: "listOffsets for the highest timestamp (not the last record's), the latest of two partitions in one call, and earliest and earliest-local after DeleteRecords"},
	{ID: "admin.configs", Pass: "DescribeConfigs with synonyms, types and documentation; IncrementalAlterConfigs validate-only (nothing changes), APPEND and SUBTRACT on a list, DELETE back to the default, and an invalid value and an unknown name refused with INVALID_CONFIG"},
	{ID: "consumer.offsets", Pass: "the consumer's beginningOffsets, endOffsets, offsetsForTimes (and none past the last record), seek, position, currentLag, commitSync and committed, each read back"},
	{ID: "admin.errors", Pass: "the Admin calls' refusals carry Kafka's errors: DeleteRecords past the high watermark, replication factor 2 on one broker, an invalid topic name, fewer partitions, a missing topic's configs and deletion, a missing group's deletion (and no offsets listed), a missing partition's election, a missing transactional id"},
	{ID: "admin.reassign", Pass: "alterPartitionReassignments onto the partition's replica completes (listPartitionReassignments), onto a missing broker fails, a cancel without one fails; electLeaders preferred and unclean answer ELECTION_NOT_NEEDED"},
	{ID: "admin.logdirs", Pass: "describeLogDirs of broker 1 shows the partition in one log dir with its bytes, no lag, and the dir's total and usable bytes"},
	{ID: "admin.producers", Pass: "describeProducers shows an idempotent producer's id, epoch 0 and last sequence, and no producer for a plain producer's partition"},
	{ID: "admin.transactions", Pass: "an open transaction in listTransactions (also by producer id) and describeTransactions, its start offset in describeProducers and the last stable offset; abortTransaction moves the LSO past its marker; fenceProducers bumps the epoch and fences the producer; read_committed reads nothing"},
	{ID: "telemetry.first_send", Pass: "KafkaProducer construction to the first acknowledged send under 2 s (the JVM's first producer under 5 s), and KafkaConsumer construction to the first record under 5 s, whatever the KIP-714 telemetry handshake does"},
}

func javaClient() clientImpl {
	s := map[string]scenarioFunc{}
	for _, sc := range harness.Scenarios {
		id := sc.ID
		last := id == harness.Scenarios[len(harness.Scenarios)-1].ID
		s[id] = func(ctx context.Context, e *env) (string, error) {
			note, err := javaScenario(ctx, e, id)
			if last {
				// The target's last scenario: its JVM is done (under a
				// -run filter that skips this one, it ends with the
				// test binary instead).
				closeJava(e.addr)
			}
			return note, err
		}
	}
	return clientImpl{name: "java", available: javaAvailable, scenarios: s}
}

// javaBuilt is the runner compiled once per test binary.
var javaBuilt struct {
	once sync.Once
	cp   string // the runner's classes and Kafka's jars
	err  error
}

func javaAvailable() error {
	javaBuilt.once.Do(func() { javaBuilt.cp, javaBuilt.err = buildJava() })
	return javaBuilt.err
}

// buildJava compiles java/src with javac against classpath.sh's jars into
// java/target/runner, unless the stamp there says the same sources were
// compiled against the same jars; it returns the runner's classpath.
func buildJava() (string, error) {
	for _, tool := range []string{"java", "javac"} {
		if err := needTool(tool); err != nil {
			return "", fmt.Errorf("java client: %w (Debian openjdk-17-jdk-headless, maven)", err)
		}
	}
	root, err := filepath.Abs("java")
	if err != nil {
		return "", fmt.Errorf("java client: %w", err)
	}
	out, err := exec.Command("bash", filepath.Join(root, "classpath.sh")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, lastLines(ee.Stderr, 6))
		}
		return "", fmt.Errorf("java client: resolve Kafka's jars (java/classpath.sh): %w", err)
	}
	jars := strings.TrimSpace(string(out))
	var sources []string
	err = filepath.WalkDir(filepath.Join(root, "src", "main", "java"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".java") {
			sources = append(sources, p)
		}
		return err
	})
	if err != nil || len(sources) == 0 {
		return "", fmt.Errorf("java client: no sources under java/src/main/java (%v)", err)
	}
	sort.Strings(sources)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", jars)
	for _, p := range sources {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("java client: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
	}
	stamp := hex.EncodeToString(h.Sum(nil))
	dir := filepath.Join(root, "target", "runner")
	classes := filepath.Join(dir, "classes")
	cp := classes + string(os.PathListSeparator) + jars
	if b, err := os.ReadFile(filepath.Join(dir, "stamp")); err == nil && strings.TrimSpace(string(b)) == stamp {
		return cp, nil
	}
	// A fresh directory renamed into place: a concurrent run never sees
	// half-written classes under a stamp that claims them.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("java client: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "classes-")
	if err != nil {
		return "", fmt.Errorf("java client: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := append([]string{"-encoding", "UTF-8", "--release", "17", "-Xlint:all", "-Xlint:-processing", "-d", tmp, "-cp", jars}, sources...)
	if b, err := exec.Command("javac", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("java client: javac: %w\n%s", err, b)
	}
	os.RemoveAll(classes)
	if err := os.Rename(tmp, classes); err != nil {
		return "", fmt.Errorf("java client: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stamp"), []byte(stamp+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("java client: %w", err)
	}
	return cp, nil
}

// javaJVM is one runner process for one gregor target.
type javaJVM struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string // result lines; closed when stdout ends
	logPath string      // the JVM's stderr
	done    chan struct{}
}

// javaJVMs are the running JVMs by target (the auto-create-on address).
var javaJVMs = struct {
	sync.Mutex
	m map[string]*javaJVM
}{m: map[string]*javaJVM{}}

func startJava(e *env) (*javaJVM, error) {
	if err := javaAvailable(); err != nil {
		return nil, err
	}
	logFile, err := os.CreateTemp(workDir, "java-*.log")
	if err != nil {
		return nil, fmt.Errorf("start the java runner: %w", err)
	}
	cmd := exec.Command("java", javaHeap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-cp", javaBuilt.cp, "io.gregor.compat.Runner", "--bootstrap", e.addr, "--strict", e.strict)
	// The JVM dies with the test binary; it also exits at the end of its
	// stdin, which the binary's exit closes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start the java runner: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start the java runner: %w", err)
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start the java runner: %w", err)
	}
	j := &javaJVM{cmd: cmd, stdin: stdin, lines: make(chan string, 4), logPath: logFile.Name(), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			j.lines <- sc.Text()
		}
		close(j.lines)
		cmd.Wait()
		logFile.Close()
		close(j.done)
	}()
	return j, nil
}

// close ends the JVM: end of stdin, then SIGKILL if it lingers.
func (j *javaJVM) close() {
	j.stdin.Close()
	select {
	case <-j.done:
	case <-time.After(5 * time.Second):
		j.cmd.Process.Kill()
		<-j.done
	}
}

// kill ends a JVM stuck in a scenario.
func (j *javaJVM) kill() {
	j.cmd.Process.Kill()
	<-j.done
}

func (j *javaJVM) logTail(n int) string {
	b, _ := os.ReadFile(j.logPath)
	return lastLines(b, n)
}

// javaFor returns the target's JVM, starting it on first use.
func javaFor(e *env) (*javaJVM, error) {
	javaJVMs.Lock()
	defer javaJVMs.Unlock()
	if j := javaJVMs.m[e.addr]; j != nil {
		return j, nil
	}
	j, err := startJava(e)
	if err != nil {
		return nil, err
	}
	javaJVMs.m[e.addr] = j
	return j, nil
}

// forgetJava drops j from the pool (a JVM that died or was killed).
func forgetJava(addr string, j *javaJVM) {
	javaJVMs.Lock()
	defer javaJVMs.Unlock()
	if javaJVMs.m[addr] == j {
		delete(javaJVMs.m, addr)
	}
}

// closeJava ends the target's JVM, if one runs.
func closeJava(addr string) {
	javaJVMs.Lock()
	j := javaJVMs.m[addr]
	delete(javaJVMs.m, addr)
	javaJVMs.Unlock()
	if j != nil {
		j.close()
	}
}

type javaResult struct {
	Scenario string  `json:"scenario"`
	Status   string  `json:"status"`
	Reason   string  `json:"reason"`
	Seconds  float64 `json:"seconds"`
}

// javaScenario runs id in the target's JVM. A JVM that outlives ctx is
// killed (the next scenario starts another), so one hung scenario does
// not take the rest with it.
func javaScenario(ctx context.Context, e *env, id string) (string, error) {
	j, err := javaFor(e)
	if err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(j.stdin, "%s %s\n", id, e.topic(id)); err != nil {
		forgetJava(e.addr, j)
		j.kill()
		return "", fmt.Errorf("java runner: send %s: %w: %s", id, err, j.logTail(6))
	}
	for {
		select {
		case line, ok := <-j.lines:
			if !ok {
				forgetJava(e.addr, j)
				<-j.done
				return "", fmt.Errorf("java runner exited during %s (%v): %s", id, j.cmd.ProcessState, j.logTail(8))
			}
			var res javaResult
			if !strings.HasPrefix(line, `{"scenario":`) {
				// The runner sends everything but results to stderr; a
				// library that wrote to the process's stdout directly
				// is not an answer.
				continue
			}
			if err := json.Unmarshal([]byte(line), &res); err != nil || res.Scenario != id {
				forgetJava(e.addr, j)
				j.kill()
				return "", fmt.Errorf("java runner answered %q to %s (%v)", harness.OneLine(line, 200), id, err)
			}
			switch res.Status {
			case "pass":
				return res.Reason, nil
			case "n/a":
				return "", notApplicable(res.Reason)
			}
			return "", errors.New(res.Reason)
		case <-ctx.Done():
			forgetJava(e.addr, j)
			j.kill()
			return "", fmt.Errorf("java runner still in %s at the deadline (%w), killed: %s", id, ctx.Err(), j.logTail(6))
		}
	}
}

func javaExtraTimeout(id string) time.Duration {
	switch id {
	case "group.split.consumer", "group.static", "group.cooperative", "group.rebalance.consumer", "group.session_expiry", "txn.timeout", "streams.wordcount", "streams.eos_v2", "streams.protocol", "share.consume":
		return 2 * time.Minute
	}
	return 90 * time.Second
}

// TestJava runs the scenarios only the Java client has (javaExtras)
// through the same runner as TestClients' java client: against its own
// pair of gregor processes, with expected.txt judging the outcomes as it
// does the shared ones, and (unless -compat.kafka=false) against the
// Apache Kafka reference too, where every scenario must pass: a scenario
// that fails on Kafka asserts something Kafka does not do.
func TestJava(t *testing.T) {
	if testing.Short() {
		t.Skip("the Java client's extra scenarios run in the full suite only")
	}
	if err := javaAvailable(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	exp, err := harness.ReadExpectedFile("expected.txt")
	if err != nil {
		t.Fatal(err)
	}
	targets := []string{harness.TargetGregor}
	if useKafka() {
		startKafkaRefs()
		targets = append(targets, harness.TargetKafka)
	}
	got := map[string]map[string]harness.Result{} // target, then scenario
	ran := map[string]bool{}                      // scenarios -run selected on gregor, for the missing check
	for _, tg := range targets {
		got[tg] = map[string]harness.Result{}
		t.Run(tg, func(t *testing.T) {
			e := &env{client: "java", target: tg}
			logTail := func(int) string { return "" }
			switch tg {
			case harness.TargetKafka:
				refs := kafkaReference(t)
				e.addr, e.strict, logTail = refs.main.Addr, refs.strict.Addr, refs.main.Tail
			default:
				main := startGregor(t, nil)
				strict := startGregor(t, map[string]string{"auto.create.topics.enable": "false"})
				e.addr, e.strict, logTail = main.Addr, strict.Addr, main.Tail
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			e.adm = kadm.NewClient(cl)
			// Registered after startGregor's cleanups, so it runs before
			// them: the JVM ends before the brokers it talks to.
			t.Cleanup(func() { closeJava(e.addr) })
			for _, s := range javaExtras {
				t.Run(s.ID, func(t *testing.T) {
					res := runJavaExtra(e, s.ID)
					got[tg][s.ID] = res
					t.Logf("RESULT %s %s %s %s %.1fs %s", tg, res.Client, res.Scenario, res.Status, res.Duration.Seconds(), res.Reason)
					switch {
					case tg == harness.TargetKafka && res.Status != harness.Pass:
						t.Errorf("%s fails on Kafka itself, so it asserts what Kafka does not do: %s\nKafka log tail:\n%s",
							s.ID, res.Reason, logTail(1500))
					case tg == harness.TargetGregor:
						ran[s.ID] = true
						if exp[res.Key()] == harness.Pass && res.Status != harness.Pass {
							t.Errorf("regression: %s %s passed before, now %s: %s\ngregor log tail:\n%s",
								res.Client, res.Scenario, res.Status, res.Reason, logTail(1500))
						}
					}
				})
			}
		})
	}
	for id, k := range got[harness.TargetKafka] {
		if g, ok := got[harness.TargetGregor][id]; ok && k.Status == harness.Pass && g.Status != harness.Pass {
			t.Logf("gregor differs from Kafka: java %s passes on Kafka, is %s on gregor: %s", id, g.Status, g.Reason)
		}
	}
	statuses := map[string]harness.Status{}
	for _, r := range got[harness.TargetGregor] {
		statuses[r.Key()] = r.Status
	}
	d := harness.Compare(exp, statuses, func(key string) bool {
		client, scenario, _ := strings.Cut(key, " ")
		return client == "java" && ran[scenario]
	})
	for _, k := range d.Improved {
		t.Logf("newly passing (run with -compat.update to record): %s", k)
	}
	for _, k := range d.Changed {
		t.Logf("changed: %s", k)
	}
	for _, k := range d.Missing {
		t.Errorf("expected to pass but did not run: %s", k)
	}
	if *flagUpdate {
		if err := harness.WriteExpectedFile("expected.txt", expectedHeader, harness.Merge(exp, statuses)); err != nil {
			t.Fatal(err)
		}
	}
}

// runJavaExtra runs one of javaExtras in e's JVM, then its out-of-band
// check.
func runJavaExtra(e *env, id string) harness.Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), javaExtraTimeout(id))
	defer cancel()
	note, err := javaScenario(ctx, e, id)
	if err == nil {
		var more string
		more, err = javaExtraCheck(ctx, e, id)
		note += more
	}
	res := harness.Result{Target: e.target, Client: "java", Scenario: id, Status: harness.Pass, Reason: note}
	var na notApplicableError
	switch {
	case errors.As(err, &na):
		res.Status, res.Reason = harness.NotApplicable, na.why
	case err != nil:
		res.Status, res.Reason = harness.Fail, err.Error()
	}
	res.Duration = time.Since(start)
	return res
}

// javaExtraCheck verifies out of band what the Java client cannot see.
func javaExtraCheck(parent context.Context, e *env, id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 60*time.Second)
	defer cancel()
	topic := e.topic(id)
	switch id {
	case "admin.topics":
		// Kafka's Admin pages describeTopics through DescribeTopicPartitions
		// (75) when the broker advertises it, and uses Metadata otherwise.
		return advertisedNote(ctx, e.addr, 75, "describeTopics")
	case "telemetry.first_send":
		// KIP-714: the client asks for subscriptions only when the broker
		// advertises GetTelemetrySubscriptions (71).
		return advertisedNote(ctx, e.addr, 71, "the telemetry handshake")
	case "group.split.consumer":
		if err := splitPostCheck(ctx, e, topic); err != nil {
			return "", fmt.Errorf("post-check: %w", err)
		}
	case "txn.v2":
		// Under transaction.version 2 the epoch is bumped at every
		// EndTxn, so each transaction's batches carry a higher one.
		recs, err := readUncommitted(ctx, e.addr, topic, 30)
		if err != nil {
			return "", fmt.Errorf("post-check: %w", err)
		}
		epochs := map[string]int16{}
		for _, r := range recs {
			txn, _, _ := strings.Cut(string(r.Value), "-")
			if ep, ok := epochs[txn]; ok && ep != r.ProducerEpoch {
				return "", fmt.Errorf("post-check: transaction %s's batches carry epochs %d and %d", txn, ep, r.ProducerEpoch)
			}
			epochs[txn] = r.ProducerEpoch
		}
		if len(recs) != 30 || !(epochs["t0"] < epochs["t1"] && epochs["t1"] < epochs["t2"]) {
			return "", fmt.Errorf("post-check: %d records, epochs by transaction %v: want 30 records and a higher epoch for each transaction", len(recs), epochs)
		}
		return fmt.Sprintf("; batch epochs %d, %d, %d", epochs["t0"], epochs["t1"], epochs["t2"]), nil
	}
	return "", nil
}

// readUncommitted reads the first n records of topic, aborted ones
// included, with franz-go. consumeAll cannot: it reads up to the high
// watermark, and a transactional partition ends in a control record that
// no fetch returns.
func readUncommitted(ctx context.Context, addr, topic string, n int) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("consume %s: read %d of %d records: %w", topic, len(out), n, err)
		}
		for _, fe := range fs.Errors() {
			return out, fmt.Errorf("consume %s partition %d: %w", topic, fe.Partition, fe.Err)
		}
		out = append(out, fs.Records()...)
	}
	return out, nil
}

// advertisedNote says whether addr advertises key, and so which path the
// Java client took for what.
func advertisedNote(ctx context.Context, addr string, key int16, what string) (string, error) {
	vs, err := harness.QueryVersions(ctx, addr)
	if err != nil {
		return "", fmt.Errorf("post-check: %w", err)
	}
	for _, v := range vs {
		if v.Key == key && v.Advertised() {
			return fmt.Sprintf("; %s: %s %s advertised", what, v.Name, v.Range()), nil
		}
	}
	return fmt.Sprintf("; %s: API key %d not advertised", what, key), nil
}
