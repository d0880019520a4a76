package compat

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/gregorbroker/gregor/compat/harness"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The classes behind Kafka's bin/*.sh scripts in Kafka 4.4 (kafka-configs
// and kafka-dump-log moved from kafka.admin / kafka.tools to
// org.apache.kafka.tools).
const (
	classTopics          = "org.apache.kafka.tools.TopicCommand"
	classConfigs         = "org.apache.kafka.tools.ConfigCommand"
	classConsoleProducer = "org.apache.kafka.tools.ConsoleProducer"
	classConsoleConsumer = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	classConsumerGroups  = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	classGetOffsets      = "org.apache.kafka.tools.GetOffsetShell"
	classDeleteRecords   = "org.apache.kafka.tools.DeleteRecordsCommand"
	classLeaderElection  = "org.apache.kafka.tools.LeaderElectionCommand"
	classReassign        = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
	classLogDirs         = "org.apache.kafka.tools.LogDirsCommand"
	classTransactions    = "org.apache.kafka.tools.TransactionsCommand"
	classMetadataQuorum  = "org.apache.kafka.tools.MetadataQuorumCommand"
	classFeatures        = "org.apache.kafka.tools.FeatureCommand"
	classProducerPerf    = "org.apache.kafka.tools.ProducerPerformance"
	classConsumerPerf    = "org.apache.kafka.tools.ConsumerPerformance"
	classVerifiableProd  = "org.apache.kafka.tools.VerifiableProducer"
	classVerifiableCons  = "org.apache.kafka.tools.VerifiableConsumer"
	classDumpLog         = "org.apache.kafka.tools.DumpLogSegments"
)

// kafkaTools runs Kafka's command-line tools through
// java/kafka-run-class.sh, as bin/kafka-*.sh do in a Kafka installation.
type kafkaTools struct {
	script  string        // absolute path of kafka-run-class.sh
	javaDir string        // absolute path of compat/java
	opts    string        // KAFKA_OPTS: JVM flags and the log4j2 configuration
	slots   chan struct{} // bounds the JVMs running at once
}

// toolJVMs is how many tools run at once: the subtests run in parallel,
// but a JVM's start is CPU-bound and the machine's cores are shared.
const toolJVMs = 2

// toolRun is one tool invocation's outcome.
type toolRun struct {
	stdout, stderr string
	err            error // non-nil when the tool exited non-zero or timed out
}

// newKafkaTools resolves Kafka's classpath once (the first run downloads
// the jars through Maven), so that no tool invocation pays for it.
func newKafkaTools(t *testing.T) *kafkaTools {
	t.Helper()
	javaDir, err := filepath.Abs("java")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(javaDir, "classpath.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		t.Fatalf("resolve Kafka's classpath (java/classpath.sh): %v\n%s", err, stderr.String())
	}
	return &kafkaTools{
		script:  filepath.Join(javaDir, "kafka-run-class.sh"),
		javaDir: javaDir,
		// C1 only and the serial collector: every JVM here lives for a
		// few seconds. The JVM's own warnings go to stderr, never among
		// the output the tests parse.
		opts: "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xlog:disable -Xlog:all=warning:stderr" +
			" -Dlog4j2.configurationFile=" + filepath.Join(javaDir, "tools", "log4j2.properties"),
		slots: make(chan struct{}, toolJVMs),
	}
}

// useClassArchive makes every later tool start from a class-data-sharing
// archive of Kafka's classes, which halves a tool's start-up CPU (most of
// it is loading and verifying the same client classes from a hundred
// jars). The archive is dumped once, at the exit of a kafka-topics --list
// against addr, and kept in java/target until the classpath changes. A
// failure only costs speed.
func (k *kafkaTools) useClassArchive(t *testing.T, addr string) {
	t.Helper()
	archive := filepath.Join(k.javaDir, "target", "kafka-tools.jsa")
	cp, errCP := os.Stat(filepath.Join(k.javaDir, "target", "classpath.txt"))
	if fi, err := os.Stat(archive); err != nil || errCP != nil || fi.ModTime().Before(cp.ModTime()) {
		tmp := fmt.Sprintf("%s.%d.tmp", archive, os.Getpid())
		dump := k.opts + " -XX:ArchiveClassesAtExit=" + tmp
		r := k.runOpts(t, dump, "", classTopics, "--bootstrap-server", addr, "--list")
		if r.err != nil {
			os.Remove(tmp)
			t.Logf("no class archive (tools start slower): %v\n%s", r.err, r.stderr)
			return
		}
		if err := os.Rename(tmp, archive); err != nil {
			t.Logf("no class archive (tools start slower): %v", err)
			return
		}
	}
	k.opts += " -XX:SharedArchiveFile=" + archive
}

// run runs class with args, stdin fed from stdin, and returns what it
// printed. Every run is logged with its duration, so a slow tool shows.
func (k *kafkaTools) run(t *testing.T, stdin, class string, args ...string) toolRun {
	t.Helper()
	return k.runOpts(t, k.opts, stdin, class, args...)
}

// runOpts is run with the JVM options opts.
func (k *kafkaTools) runOpts(t *testing.T, opts, stdin, class string, args ...string) toolRun {
	t.Helper()
	k.slots <- struct{}{}
	defer func() { <-k.slots }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.script, append([]string{class}, args...)...)
	// Small heaps: the tools move a few kilobytes, and several helpers
	// share the machine.
	cmd.Env = append(os.Environ(), "KAFKA_HEAP_OPTS=-Xmx128m", "KAFKA_OPTS="+opts)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s timed out: %w", class, ctx.Err())
	}
	short := class[strings.LastIndex(class, ".")+1:]
	t.Logf("%s %s (%.1fs)", short, strings.Join(args, " "), time.Since(start).Seconds())
	return toolRun{stdout: stdout.String(), stderr: cleanStderr(stderr.String()), err: err}
}

// must is run for a tool that has to succeed; it returns its stdout.
func (k *kafkaTools) must(t *testing.T, stdin, class string, args ...string) string {
	t.Helper()
	r := k.run(t, stdin, class, args...)
	if r.err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", class, strings.Join(args, " "), r.err, r.stdout, r.stderr)
	}
	return r.stdout
}

// writeFile puts a tool's input file in a directory of the calling test
// alone: tests run in parallel (gregor's cluster beside Kafka's) write
// files of the same name with different contents.
func (k *kafkaTools) writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// cleanStderr drops slf4j's notice that it has no binding (Kafka's jars
// from Maven bring slf4j-api without one), which every tool prints.
func cleanStderr(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "SLF4J:") {
			keep = append(keep, l)
		}
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// outLines splits output into its non-empty lines.
func outLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), " \t\r"); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// parseTable reads the first table of out whose header line starts with
// first, as Kafka's tools print them (columns separated by runs of
// spaces, no value containing one): one map per row, keyed by header,
// up to the first blank line.
func parseTable(out, first string) []map[string]string {
	var header []string
	var rows []map[string]string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if header == nil {
			if len(f) > 0 && f[0] == first {
				header = f
			}
			continue
		}
		if len(f) == 0 {
			break
		}
		row := make(map[string]string, len(header))
		for i, h := range header {
			if i < len(f) {
				row[h] = f[i]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// gregorBug ends a subtest whose Kafka assertion failed because of a known
// Gregor gap (dynamic broker configs, the metadata.version feature): the
// assertion stays, and the failure shows as a skip naming the gap.
func gregorBug(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Skipf("gregor gap: "+format, args...)
}

func atoi64(t *testing.T, what, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number", what, s)
	}
	return n
}

// ktEnv is what every tool subtest needs: the tools, the broker and a
// franz-go client to check the broker's state with.
type ktEnv struct {
	k       *kafkaTools
	addr    string // the brokers, host:port[,host:port...]
	dataDir string // the (first) broker's log dir
	// ours is set when the test started the broker, with
	// group.initial.rebalance.delay.ms=0.
	ours bool
	cl   *kgo.Client
	adm  *kadm.Client
	// pcl produces to the partition each record names, one idempotent
	// producer for the whole test.
	pcl *kgo.Client
	bs  []string // --bootstrap-server and its value
}

func newKTEnv(t *testing.T, k *kafkaTools, addr, dataDir string) *ktEnv {
	seeds := kgo.SeedBrokers(strings.Split(addr, ",")...)
	cl, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	pcl, err := kgo.NewClient(seeds, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pcl.Close)
	return &ktEnv{k: k, addr: addr, dataDir: dataDir, cl: cl, adm: kadm.NewClient(cl), pcl: pcl,
		bs: []string{"--bootstrap-server", addr}}
}

// args prefixes --bootstrap-server to a tool's arguments.
func (e *ktEnv) args(a ...string) []string { return append(slices.Clone(e.bs), a...) }

func ktCtx(t *testing.T) context.Context {
	// Long enough for a subtest's tools waiting for a JVM slot.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic with franz-go for a tool that works on one.
func (e *ktEnv) createTopic(t *testing.T, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := e.adm.CreateTopic(ktCtx(t), partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// consumeAll reads every record of topic up to its end offsets
// (read_uncommitted) or last stable offsets (read_committed), control
// records included, ordered by partition then offset.
func (e *ktEnv) consumeAll(t *testing.T, topic string, isolation kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	ctx := ktCtx(t)
	list := e.adm.ListEndOffsets
	if isolation == kgo.ReadCommitted() {
		list = e.adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	starts, err := e.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list start offsets of %s: %v", topic, err)
	}
	// next is, per partition still to read, the offset to reach.
	next := map[int32]int64{}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) {
		start, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > start.Offset {
			next[o.Partition] = o.Offset
			offsets[topic][o.Partition] = kgo.NewOffset().At(start.Offset)
		}
	})
	if len(next) == 0 {
		return nil
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.addr, ",")...),
		kgo.ConsumePartitions(offsets), kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []*kgo.Record
	for len(next) > 0 {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: still to read up to %v: %v", topic, next, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, r)
			// Aborted records are skipped read_committed: reaching the
			// end means a record at or past its last offset.
			if end, ok := next[r.Partition]; ok && r.Offset+1 >= end {
				delete(next, r.Partition)
			}
		})
	}
	slices.SortFunc(got, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return got
}

// endOffsets maps partition to end offset.
func (e *ktEnv) endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	ends, err := e.adm.ListEndOffsets(ktCtx(t), topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	m := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
	return m
}

// committed maps partition to the group's committed offset for topic.
func (e *ktEnv) committed(t *testing.T, group, topic string) map[int32]int64 {
	t.Helper()
	resp, err := e.adm.FetchOffsets(ktCtx(t), group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	m := map[int32]int64{}
	for p, o := range resp[topic] {
		m[p] = o.At
	}
	return m
}

// TestKafkaTools runs Apache Kafka 4.4's own command-line tools (the
// classes of bin/kafka-*.sh, from the jars java/pom.xml pins) against a
// real gregor, one subtest per tool. Each checks what the tool prints and
// the broker's state afterwards, read with franz-go. kafka-dump-log reads
// gregor's data directory directly: the on-disk layout must be Kafka's.
// The tools that move partitions between brokers run against a
// three-node gregor cluster.
func TestKafkaTools(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several dozen JVMs; not under -short")
	}
	for _, bin := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("Kafka's tools need %s on PATH (java/classpath.sh resolves the jars with Maven): %v", bin, err)
		}
	}
	k := newKafkaTools(t)
	var e *ktEnv
	if addr := os.Getenv("KAFKA_TOOLS_BOOTSTRAP"); addr != "" {
		// The same checks against another broker, such as the Kafka
		// reference (kafka-ref/kafka-ref.sh), to prove they assert
		// Kafka's behaviour.
		dir := os.Getenv("KAFKA_TOOLS_DATA_DIR")
		if dir == "" {
			t.Fatal("KAFKA_TOOLS_BOOTSTRAP needs KAFKA_TOOLS_DATA_DIR, the broker's log dir")
		}
		e = newKTEnv(t, k, addr, dir)
	} else {
		// No initial rebalance delay: the tools' consumers join an
		// empty group, and Kafka's 3 s wait would only slow each one.
		g := startGregor(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
		e = newKTEnv(t, k, g.Addr, gregorDataDir(g.LogPath))
		e.ours = true
	}
	k.useClassArchive(t, e.addr)

	// The subtests work on topics and groups of their own and run in
	// parallel; kafkaTools.run bounds the JVMs.
	for _, st := range []struct {
		name string
		fn   func(*testing.T, *ktEnv)
	}{
		{"topics", testToolTopics},
		{"configs", testToolConfigs},
		{"console", testToolConsole},
		{"consumer-groups", testToolConsumerGroups},
		{"get-offsets", testToolGetOffsets},
		{"delete-records", testToolDeleteRecords},
		{"log-dirs", testToolLogDirs},
		{"transactions", testToolTransactions},
		{"features", testToolFeatures},
		{"perf-test", testToolPerf},
		{"verifiable", testToolVerifiable},
		{"dump-log", testToolDumpLog},
	} {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			st.fn(t, e)
		})
	}
	t.Run("cluster", func(t *testing.T) {
		addrs := os.Getenv("KAFKA_TOOLS_CLUSTER_BOOTSTRAP")
		if !e.ours && addrs == "" {
			t.Skip("KAFKA_TOOLS_CLUSTER_BOOTSTRAP names no three-node cluster")
		}
		t.Parallel()
		testToolsCluster(t, k, addrs)
	})
	// The same cluster tools against a three-node Kafka reference, so
	// that what they assert of gregor's cluster is what Kafka's does.
	t.Run("cluster-kafka", func(t *testing.T) {
		if !e.ours || !useKafka() {
			t.Skip("the three-node Kafka reference runs beside gregor's cluster in make compat")
		}
		t.Parallel()
		script, err := filepath.Abs("kafka-ref/kafka-ref.sh")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		ref, err := harness.StartKafkaRef(ctx, script, filepath.Join(workDir, "kafka-cluster"), 3, nil)
		cancel()
		if err != nil {
			if os.Getenv("COMPAT_REQUIRE_KAFKA") != "" {
				t.Fatal(err)
			}
			t.Skipf("the three-node Kafka reference did not start (COMPAT_REQUIRE_KAFKA=1 fails instead): %v", err)
		}
		t.Cleanup(func() {
			if err := ref.Close(); err != nil {
				t.Error(err)
			}
		})
		testToolsCluster(t, k, ref.Addr)
	})
}

// testToolTopics: kafka-topics creates, lists, describes, grows and
// deletes a topic.
func testToolTopics(t *testing.T, e *ktEnv) {
	const topic = "tools-topics"
	out := e.k.must(t, "", classTopics, e.args("--create", "--topic", topic, "--partitions", "3",
		"--replication-factor", "1", "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")...)
	if strings.TrimSpace(out) != "Created topic "+topic+"." {
		t.Errorf("create printed %q, want %q", out, "Created topic "+topic+".")
	}
	ctx := ktCtx(t)
	md, err := e.adm.ListTopics(ctx, topic)
	if err != nil || md[topic].Err != nil {
		t.Fatalf("metadata of %s after create: %v %v", topic, err, md[topic].Err)
	}
	td := md[topic]
	if len(td.Partitions) != 3 || td.Partitions.NumReplicas() != 1 {
		t.Errorf("created topic has %d partitions, RF %d; want 3, 1", len(td.Partitions), td.Partitions.NumReplicas())
	}
	cfgs := e.topicConfigs(t, topic)
	for name, want := range map[string]string{"retention.ms": "3600000", "cleanup.policy": "compact"} {
		if c := cfgs[name]; c.Value == nil || *c.Value != want || c.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
			t.Errorf("config %s after create: %v from %v, want %s set on the topic", name, c.MaybeValue(), c.Source, want)
		}
	}

	out = e.k.must(t, "", classTopics, e.args("--list")...)
	if !slices.Contains(outLines(out), topic) {
		t.Errorf("--list does not list %s:\n%s", topic, out)
	}

	out = e.k.must(t, "", classTopics, e.args("--describe", "--topic", topic)...)
	ls := outLines(out)
	// Kafka prints a topic id in URL-safe base64 without padding, and
	// under Configs every config not at its default, in no fixed order.
	wantHead := fmt.Sprintf("Topic: %s\tTopicId: %s\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: ",
		topic, base64.RawURLEncoding.EncodeToString(td.ID[:]))
	if len(ls) != 4 || !strings.HasPrefix(ls[0], wantHead) {
		t.Fatalf("--describe printed\n%s\nwant first line %q... and 3 partition lines", out, wantHead)
	}
	printed := strings.Split(strings.TrimPrefix(ls[0], wantHead), ",")
	var nonDefault []string
	for name, c := range cfgs {
		if c.Source.String() != "DEFAULT_CONFIG" {
			nonDefault = append(nonDefault, name+"="+c.MaybeValue())
		}
	}
	slices.Sort(printed)
	slices.Sort(nonDefault)
	if !slices.Equal(printed, nonDefault) {
		t.Errorf("--describe Configs: %q, want the configs not at their default %q", printed, nonDefault)
	}
	// Kafka 4.4's kafka-topics describes partitions with
	// DescribeTopicPartitions, which carries the (here empty) eligible
	// leader replicas; a broker without that API gets Metadata and N/A.
	elrNA := false
	for p, l := range ls[1:] {
		pd := td.Partitions[int32(p)]
		// outLines trims the line's trailing space.
		want := fmt.Sprintf("\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s\tElr: \tLastKnownElr:",
			topic, p, pd.Leader, joinInt32(pd.Replicas), joinInt32(pd.ISR))
		if l != want && l == strings.Replace(want, "Elr: \tLastKnownElr:", "Elr: N/A\tLastKnownElr: N/A", 1) {
			elrNA = true
			continue
		}
		if l != want {
			t.Errorf("--describe partition line %d:\n got %q\nwant %q", p, l, want)
		}
	}
	e.k.must(t, "", classTopics, e.args("--alter", "--topic", topic, "--partitions", "5")...)
	// The controller has the new partitions when the tool returns; the
	// broker's metadata shows them a moment later, in Kafka as in Gregor.
	deadline := time.Now().Add(10 * time.Second)
	for {
		md, err = e.adm.ListTopics(ctx, topic)
		if err == nil && len(md[topic].Partitions) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after --alter --partitions 5: %v, %d partitions 10s later", err, len(md[topic].Partitions))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	e.k.must(t, "", classTopics, e.args("--delete", "--topic", topic)...)
	// Deletion completes asynchronously in Kafka; give it a moment.
	deadline = time.Now().Add(10 * time.Second)
	for {
		md, err = e.adm.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !md.Has(topic) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still listed 10s after --delete", topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if elrNA {
		// Gregor serves DescribeTopicPartitions (75) since it was found
		// missing here; N/A again means kafka-topics fell back to Metadata.
		t.Errorf("kafka-topics --describe printed Elr: N/A LastKnownElr: N/A (its Metadata fallback), where Kafka 4.4 prints empty lists")
	}
}

func joinInt32(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}

// topicConfigs reads a topic's configs with franz-go.
func (e *ktEnv) topicConfigs(t *testing.T, topic string) map[string]kadm.Config {
	t.Helper()
	rcs, err := e.adm.DescribeTopicConfigs(ktCtx(t), topic)
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	m := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		m[c.Key] = c
	}
	return m
}

// configLineRE is one config of kafka-configs --describe:
// "  name=value sensitive=false synonyms={...}".
var configLineRE = regexp.MustCompile(`^  ([^=]+)=(.*) sensitive=(true|false) synonyms=\{(.*)\}$`)

// parseConfigs reads kafka-configs --describe's output after its header
// line, name to value.
func parseConfigs(t *testing.T, out, header string) map[string]string {
	t.Helper()
	ls := outLines(out)
	if len(ls) == 0 || ls[0] != header {
		t.Fatalf("kafka-configs --describe printed\n%s\nwant first line %q", out, header)
	}
	m := map[string]string{}
	for _, l := range ls[1:] {
		sm := configLineRE.FindStringSubmatch(l)
		if sm == nil {
			t.Fatalf("kafka-configs --describe line %q is not name=value sensitive=... synonyms={...}", l)
		}
		m[sm[1]] = sm[2]
	}
	return m
}

// testToolConfigs: kafka-configs on topics (describe, add and delete),
// brokers (describe, alter) and the quota and SCRAM entities.
func testToolConfigs(t *testing.T, e *ktEnv) {
	const topic = "tools-configs"
	e.createTopic(t, topic, 1, map[string]*string{"retention.ms": strp("3600000")})

	desc := []string{"--entity-type", "topics", "--entity-name", topic, "--describe"}
	got := parseConfigs(t, e.k.must(t, "", classConfigs, e.args(desc...)...), "Dynamic configs for topic "+topic+" are:")
	if !maps2Equal(got, map[string]string{"retention.ms": "3600000"}) {
		t.Errorf("topic configs before alter: %v, want retention.ms=3600000 only", got)
	}

	out := e.k.must(t, "", classConfigs, e.args("--entity-type", "topics", "--entity-name", topic, "--alter",
		"--add-config", "max.message.bytes=200000,segment.ms=3600000", "--delete-config", "retention.ms")...)
	if strings.TrimSpace(out) != "Completed updating config for topic "+topic+"." {
		t.Errorf("alter printed %q", out)
	}
	want := map[string]string{"max.message.bytes": "200000", "segment.ms": "3600000"}
	cfgs := e.topicConfigs(t, topic)
	for name, c := range cfgs {
		dynamic := c.Source.String() == "DYNAMIC_TOPIC_CONFIG"
		if w, ok := want[name]; ok != dynamic || (ok && *c.Value != w) {
			t.Errorf("after alter, %s=%v from %v; want %q set on the topic: %v", name, c.MaybeValue(), c.Source, w, ok)
		}
	}
	got = parseConfigs(t, e.k.must(t, "", classConfigs, e.args(desc...)...), "Dynamic configs for topic "+topic+" are:")
	if !maps2Equal(got, want) {
		t.Errorf("topic configs after alter: %v, want %v", got, want)
	}

	t.Run("brokers", func(t *testing.T) {
		out := e.k.must(t, "", classConfigs, e.args("--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")...)
		got := parseConfigs(t, out, "All configs for broker 1 are:")
		rcs, err := e.adm.DescribeBrokerConfigs(ktCtx(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(rc.Configs) {
			t.Errorf("kafka-configs --all lists %d broker configs, DescribeConfigs %d", len(got), len(rc.Configs))
		}
		for _, c := range rc.Configs {
			want := c.MaybeValue()
			if c.Value == nil {
				want = "null" // as kafka-configs prints a config without a value
			}
			if v, ok := got[c.Key]; !ok || (!c.Sensitive && v != want) {
				t.Errorf("broker config %s: kafka-configs shows %q (listed: %v), DescribeConfigs %q", c.Key, v, ok, want)
			}
		}
		for _, name := range []string{"num.partitions", "log.retention.hours", "log.dirs", "group.initial.rebalance.delay.ms"} {
			if _, ok := got[name]; !ok {
				t.Errorf("broker config %s not listed", name)
			}
		}
		if e.ours && got["group.initial.rebalance.delay.ms"] != "0" {
			t.Errorf("group.initial.rebalance.delay.ms = %q, want 0 (set with --override)", got["group.initial.rebalance.delay.ms"])
		}

		// unclean.leader.election.enable is a dynamic broker config both
		// apply at run time (the controller reads it for each election);
		// set on broker 1 and cluster-wide, it is described with both
		// layers as synonyms, then removed again.
		r := e.k.run(t, "", classConfigs, e.args("--entity-type", "brokers", "--entity-name", "1", "--alter",
			"--add-config", "unclean.leader.election.enable=true")...)
		if r.err != nil {
			t.Fatalf("kafka-configs --entity-type brokers --alter fails: %v: %s", r.err, causeLine(r.stderr))
		}
		if strings.TrimSpace(r.stdout) != "Completed updating config for broker 1." {
			t.Errorf("broker alter printed %q", r.stdout)
		}
		r = e.k.run(t, "", classConfigs, e.args("--entity-type", "brokers", "--entity-default", "--alter",
			"--add-config", "unclean.leader.election.enable=false")...)
		if r.err != nil || strings.TrimSpace(r.stdout) != "Completed updating default config for brokers in the cluster." {
			t.Fatalf("kafka-configs --entity-default --alter: %v: %q %s", r.err, r.stdout, causeLine(r.stderr))
		}
		out = e.k.must(t, "", classConfigs, e.args("--entity-type", "brokers", "--entity-name", "1", "--describe")...)
		const want = "unclean.leader.election.enable=true sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:unclean.leader.election.enable=true, " +
			"DYNAMIC_DEFAULT_BROKER_CONFIG:unclean.leader.election.enable=false, DEFAULT_CONFIG:unclean.leader.election.enable=false}"
		if !slices.Contains(outLines(out), "  "+want) {
			t.Errorf("broker 1's dynamic configs:\n%s\nwant the line %s", out, want)
		}
		out = e.k.must(t, "", classConfigs, e.args("--entity-type", "brokers", "--entity-default", "--describe")...)
		const wantDefault = "unclean.leader.election.enable=false sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:unclean.leader.election.enable=false}"
		if !slices.Contains(outLines(out), "  "+wantDefault) {
			t.Errorf("cluster-wide dynamic configs:\n%s\nwant the line %s", out, wantDefault)
		}
		for _, entity := range [][]string{{"--entity-name", "1"}, {"--entity-default"}} {
			args := append(append([]string{"--entity-type", "brokers"}, entity...), "--alter", "--delete-config", "unclean.leader.election.enable")
			e.k.must(t, "", classConfigs, e.args(args...)...)
		}
		got = parseConfigs(t, e.k.must(t, "", classConfigs, e.args("--entity-type", "brokers", "--entity-name", "1", "--describe")...),
			"Dynamic configs for broker 1 are:")
		if _, ok := got["unclean.leader.election.enable"]; ok {
			t.Errorf("after --delete-config, broker 1's dynamic configs are %v", got)
		}
	})

	// Users' and clients' quotas and SCRAM credentials go through
	// DescribeClientQuotas / AlterClientQuotas / *UserScramCredentials.
	t.Run("users-clients", func(t *testing.T) {
		vs, err := e.adm.ApiVersions(ktCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		served := true
		vs.Each(func(v kadm.BrokerApiVersions) {
			if _, _, ok := v.KeyVersions(48); !ok { // DescribeClientQuotas
				served = false
			}
		})
		r := e.k.run(t, "", classConfigs, e.args("--entity-type", "users", "--entity-name", "alice", "--alter",
			"--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")...)
		if !served {
			// What a user of Gregor sees: the tool's own error, not a
			// hang or a wrong answer.
			if r.err == nil || !strings.Contains(r.stderr, "UnsupportedVersionException") {
				t.Fatalf("quotas are not served, yet the tool said: %v\n%s\n%s", r.err, r.stdout, r.stderr)
			}
			t.Skipf("gregor serves no client quotas (DescribeClientQuotas not advertised); kafka-configs --entity-type users/clients fails with %s", causeLine(r.stderr))
		}
		if r.err != nil {
			t.Fatalf("alter user quotas: %v\n%s", r.err, r.stderr)
		}
		got := e.k.must(t, "", classConfigs, e.args("--entity-type", "users", "--entity-name", "alice", "--describe")...)
		if !strings.Contains(got, "consumer_byte_rate=2048.0") || !strings.Contains(got, "producer_byte_rate=1024.0") {
			t.Errorf("user quotas after alter:\n%s", got)
		}
	})
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func maps2Equal(a, b map[string]string) bool {
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
