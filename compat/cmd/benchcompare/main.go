// Command benchcompare measures gregor side by side with Apache Kafka (the
// compat/kafka-ref reference broker) and franz-go's kfake
// (compat/cmd/kfakeserver) in one run: the same client (`gregor perf`,
// built on franz-go, with --json), 1 KiB records, the brokers alternating
// within each round, and for each case the broker's MiB/s, its CPU
// seconds per GiB (user+system time of the process from /proc/<pid>/stat,
// the JVM's too) and its resident memory. It prints a markdown report of
// the medians and gregor's ratios to the other two, and with -doc
// regenerates the side-by-side section of docs/performance.md between its
// markers. `make bench-compare` runs it; `make bench-compare-short` is the
// short form CI runs, which fails when gregor's CPU per GiB produced
// exceeds -max-cpu-ratio times kfake's in the same run.
//
// With -replicated, -failover or -groups (cluster.go) it measures the
// cluster targets of the performance issue instead: replicated produce
// throughput on the three nodes of scripts/cluster.sh (beside a
// three-node Kafka with -brokers gregor,kafka), leader failover after a
// SIGKILL, and KIP-848 groups of many members becoming stable.
//
// Run from the compat directory:
//
//	go run ./cmd/benchcompare [-rounds 5] [-short] [-brokers gregor,kafka,kfake] [-doc ../docs/performance.md]
//	go run ./cmd/benchcompare -replicated|-failover|-groups [-profile DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/compat/harness"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchCase is one measurement of the matrix.
type benchCase struct {
	Name       string
	Kind       string // produce, consume or e2e
	Partitions int
	Records    int64
	Rate       float64 // e2e: records/s
	From       string  // consume: the produce case whose topic it reads
	// Durable creates the topic with flush.messages=1 (the topic's form
	// of log.flush.interval.messages=1, so the same broker processes
	// serve every case): each batch is fsynced before it is acknowledged
	// or readable. kfake takes no such config and never fsyncs.
	Durable bool
	// TargetP99 and TargetP999 are the latency targets of an e2e
	// case in ms (0: none), with BelowKafka when gregor's p99 and p99.9
	// must also be below Kafka's in the same run.
	TargetP99, TargetP999 float64
	BelowKafka            bool
}

// Title names the case in the tables.
func (c benchCase) Title() string {
	switch c.Kind {
	case "produce":
		return fmt.Sprintf("produce acks=all, %s partitions", groupDigits(c.Partitions))
	case "consume":
		return fmt.Sprintf("consume, %s partitions", groupDigits(c.Partitions))
	default:
		t := fmt.Sprintf("e2e at %s msg/s, %s partitions", groupDigits(int(c.Rate)), groupDigits(c.Partitions))
		if c.Durable {
			t += ", durable (flush.messages=1; kfake does not fsync)"
		}
		return t
	}
}

// topicConfigs are the configs the case's topic is created with on
// broker b: flush.messages=1 for a durable case, except on kfake, which
// has no fsync to ask for (and refuses the config).
func (c benchCase) topicConfigs(b string) map[string]*string {
	if !c.Durable || b == "kfake" {
		return nil
	}
	one := "1"
	return map[string]*string{"flush.messages": &one}
}

func groupDigits(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// perfArgs is the `gregor perf` command line of the case against
// bootstrap on topic; bin is the binary's name.
func (c benchCase) perfArgs(bootstrap, topic, bin string) []string {
	n := strconv.FormatInt(c.Records, 10)
	switch c.Kind {
	case "produce":
		return []string{bin, "perf", "produce", "--bootstrap", bootstrap, "--topic", topic, "--records", n,
			"--record-size", "1024", "--acks", "all", "--json"}
	case "consume":
		return []string{bin, "perf", "consume", "--bootstrap", bootstrap, "--topic", topic, "--records", n,
			"--verify", "--json"}
	default:
		return []string{bin, "perf", "e2e", "--bootstrap", bootstrap, "--topic", topic, "--records", n,
			"--record-size", "1024", "--acks", "all", "--throughput", strconv.FormatFloat(c.Rate, 'f', -1, 64), "--json"}
	}
}

// The end-to-end latency targets, in ms: acks=all to the consumer
// at 10,000 and 50,000 msg/s p99 <= 3 and p99.9 <= 6, below Kafka's; in
// the durable mode p99 <= 5.
const (
	targetP99, targetP999 = 3, 6
	targetDurableP99      = 5
)

// e2eCaseName is the name of the end-to-end case at rate records/s:
// e2e-16 at 10,000 msg/s (its name before the matrix had more than one),
// e2e-16-<rate> at another, with -durable for the durable mode.
func e2eCaseName(rate float64, durable bool) string {
	n := "e2e-16"
	if durable {
		n += "-durable"
	}
	if rate != 10_000 || durable {
		n += "-" + strconv.FormatFloat(rate, 'f', -1, 64)
	}
	return n
}

// matrix is the list of cases: produce to 16 and 1,000 partitions (and
// 10,000 with many), consume of the 16-partition topic, and end-to-end
// latency over 16 partitions at each of e2eRates and, durable, at
// durableRate (0: no durable case), each for e2eSeconds.
func matrix(records int64, many bool, e2eRates []float64, durableRate, e2eSeconds float64) []benchCase {
	cs := []benchCase{
		{Name: "produce-16", Kind: "produce", Partitions: 16, Records: records},
		{Name: "produce-1000", Kind: "produce", Partitions: 1000, Records: records},
	}
	if many {
		cs = append(cs, benchCase{Name: "produce-10000", Kind: "produce", Partitions: 10000, Records: records})
	}
	cs = append(cs, benchCase{Name: "consume-16", Kind: "consume", Partitions: 16, Records: records, From: "produce-16"})
	for _, r := range e2eRates {
		cs = append(cs, benchCase{Name: e2eCaseName(r, false), Kind: "e2e", Partitions: 16, Records: int64(r * e2eSeconds), Rate: r,
			TargetP99: targetP99, TargetP999: targetP999, BelowKafka: true})
	}
	if durableRate > 0 {
		cs = append(cs, benchCase{Name: e2eCaseName(durableRate, true), Kind: "e2e", Partitions: 16, Records: int64(durableRate * e2eSeconds),
			Rate: durableRate, Durable: true, TargetP99: targetDurableP99})
	}
	return cs
}

// parseRates reads -e2e-rates: comma-separated positive records/s.
func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("-e2e-rates: %q is not a positive rate", f)
		}
		out = append(out, r)
	}
	return out, nil
}

// selectCases keeps the cases named in names (all for none), in the
// matrix's order; a consume case needs the produce case it reads.
func selectCases(all []benchCase, names []string) ([]benchCase, error) {
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[strings.TrimSpace(n)] = true
	}
	var out []benchCase
	for _, c := range all {
		if want[c.Name] {
			out = append(out, c)
			delete(want, c.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("-cases: no case %q (or it needs -many)", n)
	}
	for _, c := range out {
		if c.From != "" && !slices.ContainsFunc(out, func(p benchCase) bool { return p.Name == c.From }) {
			return nil, fmt.Errorf("-cases: %s reads the topic of %s, which is not selected", c.Name, c.From)
		}
	}
	return out, nil
}

// broker is one of the brokers under test.
type broker struct {
	name string
	addr string
	pid  int
	stop func() error
}

// runInfo describes the run in the report.
type runInfo struct {
	When         string
	Form         string
	Rounds       int
	GregorRev    string
	KafkaVersion string
	KafkaHeap    string
	KfakeVersion string
	Command      string
	Machine      machine
}

type options struct {
	rounds      int
	short       bool
	records     int64
	many        bool
	e2eRates    []float64
	durableRate float64
	e2eSeconds  float64
	brokers     []string
	doc         string
	out         string
	work        string
	gregorBin   string // a prebuilt gregor; empty to build the tree's
	maxCPURatio float64
	warmup      int64
	cases       []string
	memory      bool
	mem         memoryOptions
	cluster     clusterOptions
	brokersSet  bool // -brokers was given: -replicated measures Kafka only when asked
}

func main() {
	var o options
	var brokers string
	flag.IntVar(&o.rounds, "rounds", 5, "rounds; the report gives the median of each figure over them")
	flag.BoolVar(&o.short, "short", false, "the short form: one round, small sizes (unless -rounds, -records or -e2e-seconds are given)")
	flag.Int64Var(&o.records, "records", 1_000_000, "records of 1 KiB per produce and consume case")
	flag.BoolVar(&o.many, "many", false, "also produce to 10,000 partitions")
	rates := flag.String("e2e-rates", "10000,50000", "comma-separated records/s of the end-to-end cases (e2e-16 at 10,000, e2e-16-<rate> at others)")
	flag.Float64Var(&o.durableRate, "e2e-durable-rate", 10_000, "records/s of the durable end-to-end case, e2e-16-durable-<rate>, its topic created with flush.messages=1 (0: none)")
	flag.Float64Var(&o.e2eSeconds, "e2e-seconds", 5, "length of each end-to-end case in seconds")
	flag.StringVar(&brokers, "brokers", "gregor,kafka,kfake", "comma-separated brokers to measure: gregor, kafka, kfake")
	cases := flag.String("cases", "", "comma-separated case names to run (produce-16, produce-1000, produce-10000, consume-16, e2e-16, e2e-16-50000, e2e-16-durable-10000); empty for all")
	flag.StringVar(&o.doc, "doc", "", "regenerate the side-by-side section of this markdown `file` (docs/performance.md)")
	flag.StringVar(&o.out, "out", "", "also write the report to this `file`")
	flag.StringVar(&o.gregorBin, "gregor-bin", "", "measure this gregor `binary` instead of one built from the tree (an A/B against an older build)")
	flag.StringVar(&o.work, "work", "", "working `directory` for binaries and data; empty for a temporary one, removed after")
	flag.Int64Var(&o.warmup, "warmup", 200_000, "records of an unmeasured produce and consume per broker before the first round (0: none)")
	flag.Float64Var(&o.maxCPURatio, "max-cpu-ratio", 0, "fail when gregor's CPU per GiB produced exceeds this many times kfake's in the same run (0: no check)")
	flag.BoolVar(&o.memory, "memory", false, "instead of the comparison, measure gregor's memory and metadata targets: idle RSS, CreateTopics/s, idle partitions (RSS, fds, before and after a restart), idle connections")
	flag.IntVar(&o.mem.partitions, "memory-partitions", 10_000, "idle partitions of -memory")
	flag.IntVar(&o.mem.conns, "memory-conns", 10_000, "idle connections of -memory")
	flag.IntVar(&o.mem.topics, "memory-topics", 500, "one-partition topics -memory creates for CreateTopics/s, per client count")
	flag.DurationVar(&o.mem.idle, "memory-idle", 30*time.Second, "how long the broker idles before each -memory reading")
	flag.StringVar(&o.mem.profile, "memory-profile", "", "with -memory, save the broker's heap profile and goroutines at each reading into this `directory`")
	flag.BoolVar(&o.cluster.replicated, "replicated", false, "instead of the comparison, measure the cluster targets: produce acks=all to RF 3 against RF 1 on a three-node cluster (with -brokers kafka, on a three-node Kafka too)")
	flag.Int64Var(&o.cluster.replRecords, "replicated-records", 1_000_000, "records of 1 KiB per -replicated run")
	flag.IntVar(&o.cluster.replPartitions, "replicated-partitions", 3, "partitions of the -replicated topics")
	flag.IntVar(&o.cluster.replRounds, "replicated-rounds", 3, "rounds of -replicated (RF 3 and RF 1 taking turns going first)")
	flag.BoolVar(&o.cluster.failover, "failover", false, "instead of the comparison, measure leader failover on the three-node cluster of scripts/cluster.sh (SIGKILL of the leader to the next acknowledged write)")
	flag.IntVar(&o.cluster.kills, "failover-kills", 6, "leader kills of -failover")
	flag.BoolVar(&o.cluster.killController, "failover-controller", false, "with -failover, make the partition's leader the active controller before each kill")
	flag.BoolVar(&o.cluster.groups, "groups", false, "instead of the comparison, measure KIP-848 groups becoming stable (raw ConsumerGroupHeartbeat members) on a single gregor")
	flag.StringVar(&o.cluster.groupSizes, "groups-sizes", "100x1000,1000x10000", "comma-separated MEMBERSxPARTITIONS of -groups (partitions in topics of 1,000)")
	flag.DurationVar(&o.cluster.groupHeartbeat, "groups-heartbeat", 500*time.Millisecond, "group.consumer.heartbeat.interval.ms of -groups (the integration tests' 500 ms; Kafka's default is 5 s)")
	flag.StringVar(&o.cluster.groupIntervals, "groups-assignment-intervals", "default", "comma-separated group-level consumer.assignment.interval.ms of -groups, each size measured with each: milliseconds, or default for the broker's (Kafka's 1 s)")
	flag.DurationVar(&o.cluster.groupTimeout, "groups-timeout", 5*time.Minute, "how long a -groups group may take to become stable before the run fails")
	flag.IntVar(&o.cluster.groupClients, "groups-clients", 16, "how many clients (connections to the coordinator) the -groups members share, round robin")
	flag.DurationVar(&o.cluster.groupTimeline, "groups-timeline", 0, "with -groups, log the members' progress (joined, member epochs, partitions held, heartbeat round trips) at this period; 0 for none")
	flag.StringVar(&o.cluster.profile, "profile", "", "with -replicated or -groups, record perf(1) CPU profiles of the gregor processes into this `directory`")
	verbose := flag.Bool("v", false, "log topic creation and deletion times too")
	flag.Func("set", "a broker config `key=value` for gregor and Kafka (kfake takes none), repeatable: log.flush.interval.messages=1 measures the durable mode", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("-set %q: want key=value", kv)
		}
		brokerProps[k] = v
		return nil
	})
	flag.Parse()
	if *verbose {
		slog.SetLogLoggerLevel(slog.LevelDebug)
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.brokersSet = set["brokers"]
	if o.short {
		if !set["rounds"] {
			o.rounds = 1
		}
		if !set["records"] {
			o.records = 100_000
		}
		if !set["e2e-seconds"] {
			o.e2eSeconds = 2
		}
		if !set["warmup"] {
			o.warmup = 20_000
		}
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.brokers = append(o.brokers, b)
		}
	}
	if *cases != "" {
		o.cases = strings.Split(*cases, ",")
	}
	var err error
	if o.e2eRates, err = parseRates(*rates); err != nil {
		slog.Error("bench-compare", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, "go run ./cmd/benchcompare "+strings.Join(os.Args[1:], " ")); err != nil {
		slog.Error("bench-compare", "err", err)
		os.Exit(1)
	}
}

// reportTargets prints the report of target figures (cluster, create,
// memory), with the load at the end of the run, and writes it to out
// unless out is empty.
func reportTargets(info *runInfo, figs []figure, command, out string) error {
	if s, err := os.ReadFile("/proc/loadavg"); err == nil {
		info.Machine.LoadEnd, _ = loadAvg(string(s))
	}
	report := renderTargets(info.When, info.Machine, figs, command)
	fmt.Print(report)
	if out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("bench-compare: write report: %w", err)
		}
	}
	return nil
}

func run(ctx context.Context, o options, command string) error {
	if o.rounds < 1 || o.records < 1 || o.e2eSeconds <= 0 || o.durableRate < 0 {
		return errors.New("-rounds, -records and -e2e-seconds must be positive, -e2e-durable-rate not negative")
	}
	for _, b := range o.brokers {
		if _, ok := brokerLabels[b]; !ok {
			return fmt.Errorf("-brokers: unknown broker %q; want gregor, kafka or kfake", b)
		}
	}
	if !slices.Contains(o.brokers, "gregor") {
		return errors.New("-brokers must include gregor")
	}
	if _, err := os.Stat("kafka-ref/kafka-ref.sh"); err != nil {
		return fmt.Errorf("run from the compat directory: %w", err)
	}
	info := runInfo{When: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Rounds: o.rounds, Command: command,
		KafkaHeap: "-Xmx512m", KfakeVersion: moduleVersion("github.com/twmb/franz-go/pkg/kfake")}
	info.Form = fmt.Sprintf("%d round(s) of %s records per produce/consume case, %s s per e2e case", o.rounds,
		groupDigits(int(o.records)), strconv.FormatFloat(o.e2eSeconds, 'f', -1, 64))
	if h := os.Getenv("KAFKA_HEAP_OPTS"); h != "" {
		info.KafkaHeap = h
	}
	var err error
	if info.Machine, err = readMachine(); err != nil {
		return err
	}
	info.Machine.LoadMax = info.Machine.LoadStart
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		info.GregorRev = strings.TrimSpace(string(out))
	}
	if info.KafkaVersion, err = harness.KafkaRelease("java/pom.xml"); err != nil {
		return err
	}
	tick, err := clockTick()
	if err != nil {
		return err
	}

	work := o.work
	if work == "" {
		if work, err = os.MkdirTemp("", "bench-compare-"); err != nil {
			return fmt.Errorf("bench-compare: %w", err)
		}
		defer os.RemoveAll(work)
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return fmt.Errorf("bench-compare: %w", err)
	}
	slog.Info("building gregor and kfakeserver", "work", work)
	gregorBin := o.gregorBin
	if gregorBin == "" {
		if gregorBin, err = harness.Build(ctx, "..", work, false); err != nil {
			return err
		}
	}
	kfakeBin := filepath.Join(work, "kfakeserver")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", kfakeBin, "./cmd/kfakeserver").CombinedOutput(); err != nil {
		return fmt.Errorf("build kfakeserver: %w\n%s", err, out)
	}

	if o.cluster.any() {
		o.cluster.kafka = slices.Contains(o.brokers, "kafka") && o.brokersSet
		figs, err := runCluster(ctx, o.cluster, work, gregorBin, tick, &info.Machine)
		if err != nil {
			return fmt.Errorf("cluster figures: %w", err)
		}
		return reportTargets(&info, figs, command, o.out)
	}

	if createOpts.on {
		figs, err := runCreate(ctx, createOpts, work, gregorBin)
		if err != nil {
			return fmt.Errorf("create figures: %w", err)
		}
		return reportTargets(&info, figs, command, o.out)
	}

	if o.memory {
		figs, err := runMemory(ctx, o.mem, work, gregorBin)
		if err != nil {
			return fmt.Errorf("memory figures: %w", err)
		}
		return reportTargets(&info, figs, command, o.out)
	}

	var running []*broker
	defer func() {
		for _, b := range running {
			if err := b.stop(); err != nil {
				slog.Warn("stop broker", "broker", b.name, "err", err)
			}
		}
	}()
	for _, name := range o.brokers {
		b, err := startBroker(ctx, name, work, gregorBin, kfakeBin)
		if err != nil {
			return err
		}
		running = append(running, b)
		slog.Info("broker up", "broker", name, "addr", b.addr, "pid", b.pid)
	}

	cases, err := selectCases(matrix(o.records, o.many, o.e2eRates, o.durableRate, o.e2eSeconds), o.cases)
	if err != nil {
		return err
	}
	// One unmeasured produce and consume per broker first: the JVM's
	// just-in-time compiler would otherwise count against Kafka's first
	// round, and every broker's first files against its first case.
	if o.warmup > 0 {
		warm := []benchCase{
			{Name: "warmup", Kind: "produce", Partitions: 16, Records: o.warmup},
			{Name: "warmup-consume", Kind: "consume", Partitions: 16, Records: o.warmup, From: "warmup"},
		}
		for _, b := range running {
			if _, err := runRound(ctx, b, warm, 0, gregorBin, tick, &machine{}, true); err != nil {
				return fmt.Errorf("warm-up of %s: %w", b.name, err)
			}
		}
	}
	var samples []sample
	for round := 1; round <= o.rounds; round++ {
		// Rotate who goes first, so that no broker always runs right
		// after the same other one (page cache, CPU frequency, the
		// neighbours' load).
		order := slices.Clone(running)
		shift := (round - 1) % len(order)
		order = append(order[shift:], order[:shift]...)
		for _, b := range order {
			// The last round's topics go with the brokers' data.
			ss, err := runRound(ctx, b, cases, round, gregorBin, tick, &info.Machine, round < o.rounds)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, b.name, err)
			}
			samples = append(samples, ss...)
		}
	}
	if s, err := os.ReadFile("/proc/loadavg"); err == nil {
		info.Machine.LoadEnd, _ = loadAvg(string(s))
	}
	sum := summarize(samples)
	report := renderMarkdown(info, cases, o.brokers, sum)
	fmt.Print(report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("bench-compare: %w", err)
		}
	}
	if o.doc != "" {
		doc, err := os.ReadFile(o.doc)
		if err != nil {
			return fmt.Errorf("bench-compare: %w", err)
		}
		updated, err := splice(string(doc), report)
		if err != nil {
			return fmt.Errorf("bench-compare: %s: %w", o.doc, err)
		}
		if err := os.WriteFile(o.doc, []byte(updated), 0o644); err != nil {
			return fmt.Errorf("bench-compare: %w", err)
		}
		slog.Info("regenerated the side-by-side section", "doc", o.doc)
	}
	if w := info.Machine.loadWarning(); w != "" {
		fmt.Fprintln(os.Stderr, w)
	}
	if o.maxCPURatio > 0 {
		if err := checkCPURatio(cases, sum, o.maxCPURatio); err != nil {
			return fmt.Errorf("CPU per GiB against kfake: %w", err)
		}
		slog.Info("gregor's CPU per GiB produced is within the bound", "bound", o.maxCPURatio)
	}
	return nil
}

// runRound measures every case on one broker: each case's topic is
// created first, outside the measured interval, and with cleanup the
// round's topics are deleted after it so that the disk does not fill over
// the rounds.
func runRound(ctx context.Context, b *broker, cases []benchCase, round int, bin string, tick float64, m *machine, cleanup bool) ([]sample, error) {
	cl, adm, err := adminClient(b.addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	topics := map[string]string{}
	defer func() {
		if !cleanup {
			return
		}
		var names []string
		for _, t := range topics {
			names = append(names, t)
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		start := time.Now()
		if _, err := adm.DeleteTopics(dctx, names...); err != nil {
			slog.Warn("delete topics", "broker", b.name, "err", err)
		}
		slog.Debug("deleted the round's topics", "broker", b.name, "took", time.Since(start))
	}()
	var out []sample
	for _, c := range cases {
		topic := fmt.Sprintf("bc-%s-r%d", c.Name, round) // round 0 is the warm-up
		if c.From != "" {
			topic = topics[c.From]
			if topic == "" {
				return nil, fmt.Errorf("%s reads the topic of %s, which did not run", c.Name, c.From)
			}
		} else {
			start := time.Now()
			if err := createTopicWith(ctx, adm, topic, c.Partitions, c.topicConfigs(b.name)); err != nil {
				return nil, err
			}
			slog.Debug("created topic", "broker", b.name, "topic", topic, "partitions", c.Partitions, "took", time.Since(start))
		}
		topics[c.Name] = topic
		settleDisk(b.name, c.Name)
		if s, err := os.ReadFile("/proc/loadavg"); err == nil {
			if l, err := loadAvg(string(s)); err == nil {
				m.LoadMax = max(m.LoadMax, l)
			}
		}
		s, err := measure(ctx, b, c, topic, bin, tick)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		s.Round = round
		slog.Info("measured", "broker", b.name, "case", c.Name, "round", round, "MiB/s", fmtNum(s.MiBPS, 1),
			"cpu_s_per_GiB", fmtNum(s.CPUPerGiB(), 2), "rss_MiB", fmtNum(s.RSSMiB, 0), "p99_ms", fmtNum(s.P99, 2))
		out = append(out, s)
	}
	return out, nil
}

// settleDisk writes back every dirty page before a case is measured
// (sync(2), outside the measured interval): a produce case leaves
// gigabytes in the page cache, and their write-back, minutes of disk
// work, would otherwise fall on whichever case and broker come next,
// an e2e case's fsyncs and tail most of all.
func settleDisk(broker, cs string) {
	start := time.Now()
	syscall.Sync()
	slog.Debug("synced before the case", "broker", broker, "case", cs, "took", time.Since(start))
}

// measure runs one case's `gregor perf` against b and reads the broker's
// CPU time before and after it.
func measure(ctx context.Context, b *broker, c benchCase, topic, bin string, tick float64) (sample, error) {
	args := c.perfArgs(b.addr, topic, bin)
	before, err := procCPU(b.pid)
	if err != nil {
		return sample{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, args[0], args[1:]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w\n%s", strings.Join(args[1:4], " "), err, stderr.String())
	}
	after, err := procCPU(b.pid)
	if err != nil {
		return sample{}, err
	}
	rss, err := procRSS(b.pid)
	if err != nil {
		return sample{}, err
	}
	r, err := parsePerfJSON(out, c.Kind)
	if err != nil {
		return sample{}, err
	}
	s := sample{Broker: b.name, Case: c.Name, MiBPS: r.MiBPerS, CPUSec: float64(after-before) / tick,
		GiB: float64(r.Bytes) / (1 << 30), RSSMiB: float64(rss) / 1024, P50: math.NaN(), P99: math.NaN(), P999: math.NaN()}
	if r.Latency != nil && c.Kind == "e2e" {
		s.P50, s.P99, s.P999 = r.Latency.P50, r.Latency.P99, r.Latency.P999
	}
	return s, nil
}

// adminClient returns a client and its admin client for addr that wait
// for slow metadata changes: creating thousands of partitions takes a
// broker on a loaded machine minutes, longer than the client's default
// read deadline.
func adminClient(addr string) (*kgo.Client, *kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("bench-compare"), kgo.RequestTimeoutOverhead(5*time.Minute))
	if err != nil {
		return nil, nil, fmt.Errorf("admin client: %w", err)
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32((5 * time.Minute).Milliseconds()))
	return cl, adm, nil
}

// createTopic creates topic with partitions partitions (replication
// factor 1) and waits until every partition has a leader that answers
// ListOffsets, so the measured run starts on a ready topic.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	return createTopicWith(ctx, adm, topic, partitions, nil)
}

// createTopicWith is createTopic with the topic's configs.
func createTopicWith(ctx context.Context, adm *kadm.Client, topic string, partitions int, configs map[string]*string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(cctx, int32(partitions), 1, configs, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for {
		ends, err := adm.ListEndOffsets(cctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil && len(ends[topic]) == partitions {
			return nil
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("topic %s: partitions not ready: %v", topic, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// brokerProps are the -set broker configs, given to gregor and Kafka.
var brokerProps = map[string]string{}

// startBroker starts one broker with its data under work.
func startBroker(ctx context.Context, name, work, gregorBin, kfakeBin string) (*broker, error) {
	switch name {
	case "gregor":
		g, err := harness.Start(gregorBin, work, harness.Options{Props: brokerProps})
		if err != nil {
			return nil, err
		}
		return &broker{name: name, addr: g.Addr, pid: g.Pid(), stop: g.Close}, nil
	case "kafka":
		script, err := filepath.Abs("kafka-ref/kafka-ref.sh")
		if err != nil {
			return nil, err
		}
		k, err := harness.StartKafkaRef(ctx, script, filepath.Join(work, "kafka-ref"), 1, brokerProps)
		if err != nil {
			return nil, err
		}
		pid, err := k.Pid(1)
		if err != nil {
			k.Close()
			return nil, err
		}
		return &broker{name: name, addr: k.Addr, pid: pid, stop: k.Close}, nil
	default:
		return startKfake(ctx, work, kfakeBin)
	}
}

// startKfake runs kfakeserver persisted to a data directory under work
// and waits for its "listening" line.
func startKfake(ctx context.Context, work, bin string) (*broker, error) {
	dir := filepath.Join(work, "kfake")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	logPath := filepath.Join(dir, "kfake.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	cmd := exec.Command(bin, "--data-dir", filepath.Join(dir, "data"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logFile.Close(); close(done) }()
	stop := func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			return errors.New("kfake did not stop within 10 s of SIGTERM")
		}
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		data, _ := os.ReadFile(logPath)
		if _, rest, ok := strings.Cut(string(data), "kfake listening on "); ok {
			addr, _, _ := strings.Cut(rest, "\n")
			return &broker{name: "kfake", addr: strings.TrimSpace(addr), pid: cmd.Process.Pid, stop: stop}, nil
		}
		select {
		case <-done:
			return nil, fmt.Errorf("start kfake: exited: %s", data)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	return nil, errors.New("start kfake: no listening line within 30 s")
}

func procCPU(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("broker CPU time: %w", err)
	}
	return cpuTicks(string(data))
}

func procRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("broker RSS: %w", err)
	}
	return rssKiB(string(data))
}

// clockTick is the kernel's clock ticks per second (USER_HZ), the unit of
// /proc/<pid>/stat's times.
func clockTick() (float64, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 0, fmt.Errorf("getconf CLK_TCK: %w", err)
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}

// readMachine reads the core count, CPU model and the load average now.
func readMachine() (machine, error) {
	m := machine{CPUs: runtime.NumCPU(), Model: "unknown CPU"}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return m, fmt.Errorf("load average: %w", err)
	}
	m.LoadStart, err = loadAvg(string(data))
	return m, err
}

// moduleVersion is the version of module path in this module's go.mod.
func moduleVersion(path string) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path).Output()
	if err != nil {
		return "(unknown version)"
	}
	return strings.TrimSpace(string(out))
}
