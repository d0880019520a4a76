package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kcatClient drives the kcat binary (librdkafka) as a shell user would.
// kcat has no admin requests: topics with settings are created out of
// band, and the admin scenarios do not apply.
func kcatClient() clientImpl {
	na := func(why string) scenarioFunc {
		return func(context.Context, *env) (string, error) { return "", notApplicable(why) }
	}
	s := map[string]scenarioFunc{
		"metadata":             kcatMetadata,
		"topics.admin":         na("kcat has no admin requests"),
		"order.key":            kcatOrderKey,
		"group.resume":         kcatGroupResume,
		"group.split":          kcatGroupSplit,
		"producer.idempotent":  kcatIdempotent,
		"txn.read_committed":   kcatTxn,
		"listoffsets.time":     kcatListOffsetsTime,
		"configs.describe":     na("kcat has no DescribeConfigs"),
		"configs.alter":        na("kcat has no AlterConfigs"),
		"deleterecords":        na("kcat has no DeleteRecords"),
		"record.1mib":          kcatBigRecord,
		"bulk.100k":            kcatBulk,
		"edge.unknown_topic":   kcatUnknownTopic,
		"edge.too_large":       kcatTooLarge,
		"edge.offset_past_end": kcatOffsetPastEnd,
		"edge.topic_deleted":   kcatTopicDeleted,
	}
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		s["produce."+codec] = func(ctx context.Context, e *env) (string, error) { return kcatProduce(ctx, e, codec) }
	}
	return clientImpl{name: "kcat", available: func() error { return needTool("kcat") }, scenarios: s}
}

// needTool says why a tool cannot run here, or nil.
func needTool(name string) error {
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("%s is not installed: run make compat-deps", name)
	}
	return nil
}

// kcat runs kcat with stdin and returns its stdout; a failure carries
// its stderr.
func kcat(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	out, stderr, err := kcatRun(ctx, stdin, args...)
	if err != nil {
		return out, fmt.Errorf("kcat %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr, 3))
	}
	return out, nil
}

func kcatRun(ctx context.Context, stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.CommandContext(ctx, "kcat", args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func lines(out []byte) []string {
	s := strings.TrimSuffix(string(out), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func kcatMetadata(ctx context.Context, e *env) (string, error) {
	topic := e.topic("metadata")
	// Producing to a topic that does not exist creates it (auto-create on).
	if _, err := kcat(ctx, []byte("k:v\n"), "-b", e.addr, "-P", "-t", topic, "-K:"); err != nil {
		return "", err
	}
	out, err := kcat(ctx, nil, "-b", e.addr, "-L", "-J", "-t", topic)
	if err != nil {
		return "", err
	}
	var md struct {
		Brokers []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(out, &md); err != nil {
		return "", fmt.Errorf("kcat -L -J: %w: %s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != e.addr {
		return "", fmt.Errorf("brokers %+v, want node 1 at %s", md.Brokers, e.addr)
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != topic || len(md.Topics[0].Partitions) != 1 || md.Topics[0].Partitions[0].Leader != 1 {
		return "", fmt.Errorf("topic not listed as one partition led by 1: %s", out)
	}
	return "", nil
}

func kcatProduce(ctx context.Context, e *env, codec string) (string, error) {
	topic := e.topic("produce." + codec)
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	// kcat gives every record of a run the same headers, so the header
	// names the codec rather than the record.
	var in bytes.Buffer
	var want []string
	for i := 0; i < produceCount; i++ {
		fmt.Fprintf(&in, "%s\t%s\n", produceKey(i), produceValue(i))
		want = append(want, fmt.Sprintf("%s|%s|codec=%s|%d", produceKey(i), produceValue(i), codec, i))
	}
	if _, err := kcat(ctx, in.Bytes(), "-b", e.addr, "-P", "-t", topic, "-p", "0", "-K", "\t", "-z", codec, "-H", "codec="+codec,
		"-X", "linger.ms=200"); err != nil { // one batch: librdkafka sends a batch that does not shrink uncompressed
		return "", err
	}
	out, err := kcat(ctx, nil, "-b", e.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k|%s|%h|%o\n")
	if err != nil {
		return "", err
	}
	got := lines(out)
	if len(got) != len(want) {
		return "", fmt.Errorf("consumed %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			return "", fmt.Errorf("record %d: %q, want %q", i, got[i], want[i])
		}
	}
	return "", nil
}

func kcatOrderKey(ctx context.Context, e *env) (string, error) {
	topic := e.topic("order.key")
	if err := e.createTopic(ctx, topic, 4, nil); err != nil {
		return "", err
	}
	var in bytes.Buffer
	seq := map[string]int{}
	for i := 0; i < orderCount; i++ {
		k := produceKey(i % orderKeys)
		fmt.Fprintf(&in, "%s\t%d\n", k, seq[k])
		seq[k]++
	}
	if _, err := kcat(ctx, in.Bytes(), "-b", e.addr, "-P", "-t", topic, "-K", "\t", "-X", "linger.ms=5"); err != nil {
		return "", err
	}
	got, err := e.consumeAll(ctx, topic)
	if err != nil {
		return "", err
	}
	return "", checkOrder(got)
}

// kcatFill writes the values 0..n-1 to partition 0 of topic.
func kcatFill(ctx context.Context, e *env, topic string, n int, extra ...string) error {
	var in bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "%d\n", i)
	}
	_, err := kcat(ctx, in.Bytes(), append([]string{"-b", e.addr, "-P", "-t", topic, "-p", "0"}, extra...)...)
	return err
}

func kcatGroupResume(ctx context.Context, e *env) (string, error) {
	topic := e.topic("group.resume")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	const n = 100
	if err := kcatFill(ctx, e, topic, n); err != nil {
		return "", err
	}
	seen := map[string]int{}
	// kcat -G is a balanced consumer; -c stops it after so many records,
	// and its close commits the offsets stored for what it printed.
	for m := 0; m < 2; m++ {
		mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := kcat(mctx, nil, "-b", e.addr, "-G", topic+"-group", "-c", strconv.Itoa(n/2), "-f", "%s\n",
			"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000", topic)
		cancel()
		if err != nil {
			return "", fmt.Errorf("member %d: %w", m, err)
		}
		for _, v := range lines(out) {
			seen[v]++
		}
	}
	for i := 0; i < n; i++ {
		if seen[strconv.Itoa(i)] != 1 {
			return "", fmt.Errorf("record %d read %d times across the two members", i, seen[strconv.Itoa(i)])
		}
	}
	return "", nil
}

// kcatRebalanceRE matches kcat's report of its rebalance callback:
// "% Group G rebalanced (memberid M): assigned: t [0], t [1]".
var kcatRebalanceRE = regexp.MustCompile(`rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)$`)

var kcatPartitionRE = regexp.MustCompile(`\[(\d+)\]`)

// kcatMember is one `kcat -G` process of group.split. Its stdout lines
// ("partition value", unbuffered) are tallied as they arrive; its stderr
// reports of the rebalance callback are its own view of its assignment.
type kcatMember struct {
	cmd     *exec.Cmd
	readers sync.WaitGroup
	mu      sync.Mutex
	tail    []string // stderr's last lines, for a failure's reason
}

func startKcatMember(ctx context.Context, e *env, m int, topic string, asg *splitAssign, tally *splitTally) (*kcatMember, error) {
	group := splitGroup(topic)
	cmd := exec.CommandContext(ctx, "kcat", "-b", e.addr, "-G", group, "-X", fmt.Sprintf("client.id=%s-%d", group, m),
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms="+strconv.Itoa(splitSessionMs),
		"-f", "%p %s\n", "-u", topic)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kcat -G: %w", err)
	}
	k := &kcatMember{cmd: cmd}
	k.readers.Add(2)
	go func() {
		defer k.readers.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p, v, ok := strings.Cut(sc.Text(), " ")
			part, err := strconv.Atoi(p)
			if !ok || err != nil {
				k.note("unexpected output line " + strconv.Quote(sc.Text()))
				continue
			}
			tally.record(m, int32(part), v)
			// Counted as committed for the wait: kcat stores the offset of
			// what it printed and commits it (periodically and at close);
			// the post-check reads the group's commits.
			tally.commit(1)
		}
	}()
	go func() {
		defer k.readers.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			k.note(line)
			if r := kcatRebalanceRE.FindStringSubmatch(line); r != nil {
				var ps []int32
				for _, pm := range kcatPartitionRE.FindAllStringSubmatch(r[2], -1) {
					p, _ := strconv.Atoi(pm[1])
					ps = append(ps, int32(p))
				}
				if r[1] == "assigned" {
					asg.add(m, ps)
				} else {
					asg.remove(m, ps)
				}
			}
		}
	}()
	return k, nil
}

func (k *kcatMember) note(line string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tail = append(k.tail, line)
	if len(k.tail) > 3 {
		k.tail = k.tail[1:]
	}
}

func (k *kcatMember) lastStderr() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.Join(k.tail, " | ")
}

// stop sends SIGINT, on which kcat closes its consumer (committing and
// leaving the group), and waits for it to exit.
func (k *kcatMember) stop() error {
	k.cmd.Process.Signal(syscall.SIGINT)
	exited := make(chan error, 1)
	go func() {
		k.readers.Wait() // Wait only once the pipes are drained
		exited <- k.cmd.Wait()
	}()
	select {
	case err := <-exited:
		if err != nil {
			return fmt.Errorf("kcat -G exited with %w after SIGINT: %s", err, k.lastStderr())
		}
		return nil
	case <-time.After(20 * time.Second):
		k.cmd.Process.Kill()
		<-exited
		return fmt.Errorf("kcat -G did not stop within 20s of SIGINT: %s", k.lastStderr())
	}
}

// kcatGroupSplit runs group.split as two `kcat -G` processes with
// librdkafka's default assignors (range, roundrobin).
func kcatGroupSplit(ctx context.Context, e *env) (string, error) {
	topic := e.topic("group.split")
	if err := e.createTopic(ctx, topic, splitPartitions, nil); err != nil {
		return "", err
	}
	asg := &splitAssign{}
	tally := newSplitTally()
	var members []*kcatMember
	stopAll := func() error {
		var first error
		for _, k := range members {
			if err := k.stop(); err != nil && first == nil {
				first = err
			}
		}
		members = nil
		return first
	}
	defer stopAll()
	for m := 0; m < 2; m++ {
		k, err := startKcatMember(ctx, e, m, topic, asg, tally)
		if err != nil {
			return "", err
		}
		members = append(members, k)
	}
	sets, changes, err := asg.waitSplit(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: kcat said: %s / %s", err, members[0].lastStderr(), members[1].lastStderr())
	}
	for p := 0; p < splitPartitions; p++ {
		var in bytes.Buffer
		for i := p; i < splitCount; i += splitPartitions {
			fmt.Fprintf(&in, "%d\n", i)
		}
		if _, err := kcat(ctx, in.Bytes(), "-b", e.addr, "-P", "-t", topic, "-p", strconv.Itoa(p)); err != nil {
			return "", err
		}
	}
	if err := tally.waitCommitted(ctx, nil); err != nil {
		return "", fmt.Errorf("%w: kcat said: %s / %s", err, members[0].lastStderr(), members[1].lastStderr())
	}
	if err := asg.stillSplit(sets, changes); err != nil {
		return "", err
	}
	if err := stopAll(); err != nil {
		return "", err
	}
	return tally.check(sets)
}

func kcatIdempotent(ctx context.Context, e *env) (string, error) {
	topic := e.topic("producer.idempotent")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	if err := kcatFill(ctx, e, topic, produceCount, "-X", "enable.idempotence=true", "-X", "linger.ms=5"); err != nil {
		return "", err
	}
	out, err := kcat(ctx, nil, "-b", e.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")
	if err != nil {
		return "", err
	}
	got := lines(out)
	for i, v := range got {
		if v != strconv.Itoa(i) {
			return "", fmt.Errorf("offset %d holds %q", i, v)
		}
	}
	if len(got) != produceCount {
		return "", fmt.Errorf("read %d records, want %d", len(got), produceCount)
	}
	return "", nil
}

func kcatTxn(ctx context.Context, e *env) (string, error) {
	topic := e.topic("txn.read_committed")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	txn := func(t int) []byte {
		var b bytes.Buffer
		for i := 0; i < 10; i++ {
			fmt.Fprintf(&b, "t%d-%d\n", t, i)
		}
		return b.Bytes()
	}
	args := []string{"-b", e.addr, "-P", "-t", topic, "-p", "0", "-m", "20", "-X", "transactional.id=" + topic + "-txn"}
	// kcat commits its transaction when its input ends...
	if _, err := kcat(ctx, txn(0), args...); err != nil {
		return "", fmt.Errorf("transaction 0: %w", err)
	}
	// ...and aborts it when interrupted.
	if err := kcatAbort(ctx, txn(1), args...); err != nil {
		return "", fmt.Errorf("transaction 1: %w", err)
	}
	if _, err := kcat(ctx, txn(2), args...); err != nil {
		return "", fmt.Errorf("transaction 2: %w", err)
	}
	out, err := kcat(ctx, nil, "-b", e.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n", "-X", "isolation.level=read_committed")
	if err != nil {
		return "", err
	}
	if err := checkCommitted(lines(out)); err != nil {
		return "", err
	}
	out, err = kcat(ctx, nil, "-b", e.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n", "-X", "isolation.level=read_uncommitted")
	if err != nil {
		return "", err
	}
	// Whether the interrupted run's ten records reached the log (and were
	// aborted there) depends on kcat's timing; the note says which.
	switch n := len(lines(out)); n {
	case 30:
		return "abort by SIGINT: the ten aborted records are in the log, hidden by read_committed", nil
	case 20:
		return "abort by SIGINT: kcat stopped before sending the ten, so no abort was exercised", nil
	default:
		return "", fmt.Errorf("read_uncommitted read %d records, want 20 or 30", n)
	}
}

// kcatAbort starts a transactional kcat, feeds it input, waits until the
// records are in the log (read_uncommitted), and interrupts it.
func kcatAbort(ctx context.Context, input []byte, args ...string) error {
	cmd := exec.CommandContext(ctx, "kcat", args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	stdin.Write(input)
	time.Sleep(2 * time.Second) // linger, then the records are produced
	// kcat notes the interrupt, and acts on it when its blocking read of
	// the input returns: end the input just after the signal.
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(200 * time.Millisecond)
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("kcat did not stop within 15s of SIGINT: %s", lastLines(stderr.Bytes(), 3))
	}
	return nil
}

func kcatListOffsetsTime(ctx context.Context, e *env) (string, error) {
	topic := e.topic("listoffsets.time")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	// kcat cannot stamp records; they are written out of band.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return "", err
	}
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: time.UnixMilli(timeBase + int64(i)*1000)})
	}
	err = cl.ProduceSync(ctx, recs...).FirstErr()
	cl.Close()
	if err != nil {
		return "", fmt.Errorf("produce out of band: %w", err)
	}
	for _, c := range []struct {
		at   int64
		want int
	}{{timeBase + 3500, 4}, {timeBase + 3000, 3}, {-2, 0}, {-1, 10}} {
		out, err := kcat(ctx, nil, "-b", e.addr, "-Q", "-t", fmt.Sprintf("%s:0:%d", topic, c.at))
		if err != nil {
			return "", err
		}
		want := fmt.Sprintf("%s [0] offset %d", topic, c.want)
		if strings.TrimSpace(string(out)) != want {
			return "", fmt.Errorf("kcat -Q at %d: %q, want %q", c.at, out, want)
		}
	}
	return "records stamped out of band, looked up with kcat -Q", nil
}

func kcatBigRecord(ctx context.Context, e *env) (string, error) {
	topic := e.topic("record.1mib")
	if err := e.createTopic(ctx, topic, 1, map[string]*string{"max.message.bytes": strp(strconv.Itoa(bigTopicMax))}); err != nil {
		return "", err
	}
	big, want := bigValue()
	f := filepath.Join(os.TempDir(), fmt.Sprintf("gregor-compat-big-%d", os.Getpid()))
	if err := os.WriteFile(f, big, 0o600); err != nil {
		return "", err
	}
	defer os.Remove(f)
	// A file argument is sent whole, as one record.
	if _, err := kcat(ctx, nil, "-b", e.addr, "-P", "-t", topic, "-p", "0", "-X", fmt.Sprintf("message.max.bytes=%d", bigTopicMax+1000), f); err != nil {
		return "", err
	}
	out, err := kcat(ctx, nil, "-b", e.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s")
	if err != nil {
		return "", err
	}
	if sha(out) != want {
		return "", fmt.Errorf("read back %d bytes with another hash", len(out))
	}
	return "", nil
}

func kcatBulk(ctx context.Context, e *env) (string, error) {
	topic := e.topic("bulk.100k")
	if err := e.createTopic(ctx, topic, 3, nil); err != nil {
		return "", err
	}
	var in bytes.Buffer
	for i := 0; i < bulkCount; i++ {
		fmt.Fprintf(&in, "%s\n", bulkValue(i))
	}
	if _, err := kcat(ctx, in.Bytes(), "-b", e.addr, "-P", "-t", topic, "-X", "linger.ms=5"); err != nil {
		return "", err
	}
	out, err := kcat(ctx, nil, "-b", e.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%s\n")
	if err != nil {
		return "", err
	}
	var vs [][]byte
	for _, l := range lines(out) {
		vs = append(vs, []byte(l))
	}
	if len(vs) != bulkCount || bulkSum(vs) != wantBulkSum() {
		return "", fmt.Errorf("read %d records with checksum %d, want %d with %d", len(vs), bulkSum(vs), bulkCount, wantBulkSum())
	}
	return fmt.Sprintf("checksum %d", wantBulkSum()), nil
}

func kcatUnknownTopic(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.unknown_topic")
	// librdkafka holds a message for a topic it cannot see until
	// topic.metadata.propagation.max.ms, then fails it as unknown.
	_, stderr, err := kcatRun(ctx, []byte("v\n"), "-b", e.strict, "-P", "-t", topic, "-X", "message.timeout.ms=20000",
		"-X", "topic.metadata.propagation.max.ms=3000")
	if err == nil {
		return "", fmt.Errorf("kcat produced to an unknown topic with auto-create off: %s", lastLines(stderr, 3))
	}
	if !strings.Contains(strings.ToLower(string(stderr)), "unknown topic") {
		return "", fmt.Errorf("kcat failed without naming the unknown topic: %s", lastLines(stderr, 3))
	}
	return lastLines(stderr, 1), nil
}

func kcatTooLarge(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.too_large")
	if err := e.createTopic(ctx, topic, 1, map[string]*string{"max.message.bytes": strp(strconv.Itoa(smallTopicMax))}); err != nil {
		return "", err
	}
	f := filepath.Join(os.TempDir(), fmt.Sprintf("gregor-compat-large-%d", os.Getpid()))
	big, _ := bigValue()
	if err := os.WriteFile(f, big[:tooLargeValue], 0o600); err != nil {
		return "", err
	}
	defer os.Remove(f)
	_, stderr, err := kcatRun(ctx, nil, "-b", e.addr, "-P", "-t", topic, "-p", "0", "-X", "message.timeout.ms=10000", f)
	if err == nil || !strings.Contains(string(stderr), "Message size too large") {
		return "", fmt.Errorf("produce %d bytes to a topic with max.message.bytes=%d: %v: %s, want MESSAGE_TOO_LARGE", tooLargeValue, smallTopicMax, err, lastLines(stderr, 3))
	}
	return "", nil
}

func kcatOffsetPastEnd(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.offset_past_end")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	if err := kcatFill(ctx, e, topic, 10); err != nil {
		return "", err
	}
	out, err := kcat(ctx, nil, "-b", e.addr, "-C", "-t", topic, "-p", "0", "-o", "100", "-c", "10", "-f", "%o\n", "-X", "auto.offset.reset=earliest")
	if err != nil {
		return "", err
	}
	got := lines(out)
	if len(got) != 10 || got[0] != "0" {
		return "", fmt.Errorf("after reset read offsets %v, want 0..9", got)
	}
	return "OFFSET_OUT_OF_RANGE at 100, reset to earliest (0)", nil
}

func kcatTopicDeleted(ctx context.Context, e *env) (string, error) {
	topic := e.topic("edge.topic_deleted")
	if err := e.createTopic(ctx, topic, 1, nil); err != nil {
		return "", err
	}
	if err := kcatFill(ctx, e, topic, 10); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "kcat", "-b", e.addr, "-C", "-t", topic, "-o", "beginning", "-f", "%s\n", "-u")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 0, 64)
		tmp := make([]byte, 64)
		for strings.Count(string(buf), "\n") < 10 {
			n, err := stdout.Read(tmp)
			buf = append(buf, tmp[:n]...)
			if err != nil {
				done <- fmt.Errorf("read %q before the delete: %w", buf, err)
				return
			}
		}
		done <- nil
		io.Copy(io.Discard, stdout)
	}()
	stop := func() error {
		cmd.Process.Signal(syscall.SIGINT)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-exited:
			return nil
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
			return errors.New("kcat did not stop within 10s of SIGINT after the topic was deleted")
		}
	}
	select {
	case err := <-done:
		if err != nil {
			stop()
			return "", err
		}
	case <-ctx.Done():
		stop()
		return "", fmt.Errorf("read 10 records before the delete: %w", ctx.Err())
	}
	if r, err := e.adm.DeleteTopic(ctx, topic); err != nil || r.Err != nil {
		stop()
		return "", fmt.Errorf("DeleteTopics: %v %v", err, r.Err)
	}
	time.Sleep(5 * time.Second)
	if err := stop(); err != nil {
		return "", err
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		return "kcat reported: " + lastLines(stderr.Bytes(), 1), nil
	}
	return "kcat stayed silent and stopped on SIGINT", nil
}
