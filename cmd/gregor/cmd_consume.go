package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func consumeCommand() *command {
	return &command{name: "consume", argFlag: "topic", args: "TOPIC", run: runConsumeCmd,
		short: "print records of a topic, as kcat -C and kafka-console-consumer",
		long: `Prints each record's value on a line, or the --format given, or one JSON
object a line with --json (the form produce --json reads). Without -n or -e
it runs until interrupted: on Ctrl-C (SIGINT) or SIGTERM it prints a
summary line on stderr (records, bytes, rate), commits with -g, and exits
with 0. While records flow and stdout is not a terminal (records going to
a file or a pipe), a progress line goes to stderr every 5 s
(GREGOR_PROGRESS_INTERVAL changes the interval); records alone go to
stdout.

--offset where to start: start (also beginning, earliest), end (latest),
an offset N, -N (the last N records of each partition), or @TIME (the
first record at or after TIME: Unix ms, RFC 3339, or a duration ago, @1h).
With -g GROUP the group's committed offsets come first and --offset only
applies where it has none; what is printed is committed.

` + formatHelp,
		examples: `  gregor consume orders -n 10
  gregor consume orders -f '%p/%o %k=%v %h\n' --offset -5 -e
  gregor consume orders --offset @2026-12-01T10:00:00Z -p 0,1 -e
  gregor consume orders -g billing --json | jq .value`}
}

// consumeFlags is what `gregor consume` was asked to do.
type consumeFlags struct {
	offset, format, group, isolation string
	partitions                       []string
	num                              int
	exitAtEnd, fromBeginning         bool
	idleMs                           int
}

func runConsumeCmd(c *cmd) error {
	var f consumeFlags
	c.stringVar(&f.offset, "offset", "o", "start", "where to start: start, end, N, -N or @TIME")
	c.boolVar(&f.fromBeginning, "from-beginning", "", false, "same as --offset start")
	c.listVar(&f.partitions, "partition", "p", "consume only these `partitions`, as 0,2 (repeatable)")
	c.intVar(&f.num, "num", "n", 0, "stop after this many records")
	c.fs.IntVar(&f.num, "max-messages", 0, "same as --num")
	c.stringVar(&f.format, "format", "f", `%v\n`, "the output `format`")
	c.stringVar(&f.group, "group", "g", "", "consume as a member of this consumer `group`, committing")
	c.boolVar(&f.exitAtEnd, "exit", "e", false, "stop at the end of each partition as it was when the command started")
	c.intVar(&f.idleMs, "timeout-ms", "", 0, "stop when no record arrives for this many milliseconds")
	c.stringVar(&f.isolation, "isolation-level", "", "read_uncommitted", "read_uncommitted or read_committed")
	if err := c.parse(1, 1); err != nil {
		return err
	}
	if f.fromBeginning {
		f.offset = "start"
	}
	plan, err := planConsume(c, f)
	if err != nil {
		return err
	}
	cl, err := c.client(plan.opts...)
	if err != nil {
		return err
	}
	if err := checkTopic(c, c.args[0]); err != nil {
		return err
	}
	if f.exitAtEnd {
		if plan.pending, err = pendingPartitions(c, f, plan); err != nil {
			return err
		}
	}
	return consumeLoop(c, cl, f, plan)
}

// consumePlan is how to consume: the client options and what to print.
type consumePlan struct {
	opts       []kgo.Opt
	start      kgo.Offset
	partitions []int32
	parts      []formatPart
	// pending holds, for -e, each partition still to read: the next
	// offset to see and the offset it ends at.
	pending map[int32]*offsetRange
}

func planConsume(c *cmd, f consumeFlags) (consumePlan, error) {
	topic := c.args[0]
	var p consumePlan
	var err error
	if p.start, err = parseStartOffset(f.offset, time.Now()); err != nil {
		return p, err
	}
	if p.partitions, err = parsePartitions(f.partitions); err != nil {
		return p, err
	}
	if !c.json {
		if p.parts, err = parseFormat(f.format); err != nil {
			return p, err
		}
	}
	p.opts = []kgo.Opt{kgo.FetchMaxWait(500 * time.Millisecond)}
	switch f.isolation {
	case "read_committed":
		p.opts = append(p.opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	case "read_uncommitted":
	default:
		return p, usagef("%s: --isolation-level %q: want read_uncommitted or read_committed", c.path, f.isolation)
	}
	switch {
	case f.group != "" && len(p.partitions) > 0:
		return p, usagef("%s: a group member is assigned its partitions; give -g or -p, not both", c.path)
	case f.group != "":
		p.opts = append(p.opts, kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(p.start),
			kgo.DisableAutoCommit())
	case len(p.partitions) > 0:
		offs := map[int32]kgo.Offset{}
		for _, part := range p.partitions {
			offs[part] = p.start
		}
		p.opts = append(p.opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	default:
		p.opts = append(p.opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(p.start))
	}
	return p, nil
}

// parseStartOffset reads --offset.
func parseStartOffset(s string, now time.Time) (kgo.Offset, error) {
	switch s {
	case "start", "beginning", "earliest", "oldest":
		return kgo.NewOffset().AtStart(), nil
	case "end", "latest", "newest":
		return kgo.NewOffset().AtEnd(), nil
	}
	if at, ok := strings.CutPrefix(s, "@"); ok {
		t, err := parseTime(at, now)
		if err != nil {
			return kgo.Offset{}, err
		}
		return kgo.NewOffset().AfterMilli(t.UnixMilli()), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return kgo.Offset{}, usagef("--offset %q: want start, end, an offset N, -N or @TIME", s)
	case n < 0:
		return kgo.NewOffset().AtEnd().Relative(n), nil
	}
	return kgo.NewOffset().At(n), nil
}

// checkTopic fails at once on a topic that does not exist, where the
// client would wait for it to appear.
func checkTopic(c *cmd, topic string) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	ts, err := adm.ListTopicsWithInternal(c.context(), topic)
	if err != nil {
		return err
	}
	if td, ok := ts[topic]; !ok || td.Err != nil {
		return fmt.Errorf("topic %s: %w", topic, orNoAnswer(td.Err))
	}
	return nil
}

// pendingPartitions returns, for -e, the partitions that have records
// between where consuming starts and their current end, with that end.
func pendingPartitions(c *cmd, f consumeFlags, plan consumePlan) (map[int32]*offsetRange, error) {
	topic := c.args[0]
	adm, _ := c.admin()
	ctx := c.context()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	starts, err := startPositions(c, adm, f, plan)
	if err != nil {
		return nil, err
	}
	pending := map[int32]*offsetRange{}
	for p, end := range ends[topic] {
		if len(plan.partitions) > 0 && !containsPartition(plan.partitions, p) {
			continue
		}
		if end.Err != nil {
			return nil, fmt.Errorf("end offset of %s/%d: %w", topic, p, end.Err)
		}
		if from, ok := starts[p]; ok && from < end.Offset {
			pending[p] = &offsetRange{next: from, end: end.Offset}
		}
	}
	return pending, nil
}

// startPositions resolves where each partition's consuming starts.
func startPositions(c *cmd, adm *kadm.Client, f consumeFlags, plan consumePlan) (map[int32]int64, error) {
	topic := c.args[0]
	ctx := c.context()
	out := map[int32]int64{}
	listed, err := listForOffset(ctx, adm, topic, f.offset, time.Now())
	if err != nil {
		return nil, err
	}
	for p, o := range listed[topic] {
		if o.Err == nil {
			out[p] = o.Offset
		}
	}
	if f.group != "" {
		committed, err := adm.FetchOffsets(ctx, f.group)
		if err != nil {
			return nil, fmt.Errorf("committed offsets of %s: %w", f.group, err)
		}
		for p, o := range committed[topic] {
			if o.Err == nil && o.At >= 0 {
				out[p] = o.At
			}
		}
	}
	return out, nil
}

// listForOffset lists, per partition, the offset an --offset value
// starts at.
func listForOffset(ctx context.Context, adm *kadm.Client, topic, spec string, now time.Time) (kadm.ListedOffsets, error) {
	switch spec {
	case "start", "beginning", "earliest", "oldest":
		return adm.ListStartOffsets(ctx, topic)
	case "end", "latest", "newest":
		return adm.ListEndOffsets(ctx, topic)
	}
	if at, ok := strings.CutPrefix(spec, "@"); ok {
		t, err := parseTime(at, now)
		if err != nil {
			return nil, err
		}
		return adm.ListOffsetsAfterMilli(ctx, t.UnixMilli(), topic)
	}
	n, _ := strconv.ParseInt(spec, 10, 64)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	for p, o := range starts[topic] {
		end := ends[topic][p].Offset
		if n < 0 {
			o.Offset = max(end+n, o.Offset)
		} else {
			o.Offset = min(max(n, o.Offset), end)
		}
		starts[topic][p] = o
	}
	return starts, nil
}

func containsPartition(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// offsetRange is what -e has still to read of a partition.
type offsetRange struct{ next, end int64 }

// consumeLoop polls and prints until -n records, the ends of -e, the
// --timeout-ms idle time, or an interrupt.
func consumeLoop(c *cmd, cl *kgo.Client, f consumeFlags, plan consumePlan) error {
	ctx := c.interruptible()
	out := newRecordPrinter(c.out, plan.parts, c.json)
	printed := 0
	start := time.Now()
	lastRecord := start
	var meter transferMeter
	stopProgress := func() {}
	// On a terminal the records show themselves; a progress line would
	// only break them up.
	if f, ok := c.out.(*os.File); !ok || !isTerminal(f) {
		stopProgress = reportEvery(progressInterval(c.errOut), func(window time.Duration) {
			n, b, total, _ := meter.window()
			if n == 0 {
				return
			}
			perSec, mbPerSec := rates(n, b, window)
			fmt.Fprintf(c.errOut, "%d records consumed, %.1f records/sec (%.2f MB/sec), %d in all.\n", n, perSec, mbPerSec, total)
		})
	}
	defer stopProgress()
	for plan.pending == nil || len(plan.pending) > 0 {
		want := 10000
		if f.num > 0 {
			want = min(want, f.num-printed)
		}
		if want <= 0 {
			break
		}
		fetches, quiet := pollOnce(ctx, cl, want, pollWait(f, plan))
		if err := fetchError(fetches); err != nil {
			return err
		}
		for _, r := range fetches.Records() {
			out.print(r)
			printed++
			lastRecord = time.Now()
			plan.seen(r)
		}
		if err := out.w.Flush(); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		// Counted once written: the progress never runs ahead of stdout.
		for _, r := range fetches.Records() {
			meter.add(1, int64(len(r.Key)+len(r.Value)))
		}
		if ctx.Err() != nil {
			stopProgress()
			_, _, n, b := meter.window()
			elapsed := time.Since(start)
			perSec, mbPerSec := rates(n, b, elapsed)
			fmt.Fprintf(c.errOut, "interrupted: %d records consumed (%.2f MB) in %.1f s, %.1f records/sec (%.2f MB/sec).\n",
				n, float64(b)/mb, elapsed.Seconds(), perSec, mbPerSec)
			break
		}
		if f.idleMs > 0 && time.Since(lastRecord) >= time.Duration(f.idleMs)*time.Millisecond {
			break
		}
		if quiet && plan.pending != nil {
			if err := dropDrained(c, cl, plan, f.isolation == "read_committed"); err != nil {
				return err
			}
		}
	}
	return commitConsumed(c, cl, f)
}

// seen notes for -e that r was read.
func (p consumePlan) seen(r *kgo.Record) {
	if pr, ok := p.pending[r.Partition]; ok {
		pr.next = r.Offset + 1
		if pr.next >= pr.end {
			delete(p.pending, r.Partition)
		}
	}
}

// recordPrinter writes records in a format, or as JSON lines.
type recordPrinter struct {
	w     *bufio.Writer
	enc   *json.Encoder
	parts []formatPart
	json  bool
	buf   []byte
}

func newRecordPrinter(out io.Writer, parts []formatPart, asJSON bool) *recordPrinter {
	w := bufio.NewWriterSize(out, 1<<16)
	return &recordPrinter{w: w, enc: json.NewEncoder(w), parts: parts, json: asJSON}
}

// print buffers one record; write errors surface at the flush.
func (p *recordPrinter) print(r *kgo.Record) {
	if p.json {
		p.enc.Encode(toJSONRecord(r))
		return
	}
	p.buf = writeRecord(p.buf[:0], p.parts, r)
	p.w.Write(p.buf)
}

// pollWait is how long one poll waits for records: --timeout-ms, and at
// most a second with -e, after which quiet partitions are checked for
// records that never arrive as such (transaction markers).
func pollWait(f consumeFlags, plan consumePlan) int {
	wait := f.idleMs
	if plan.pending != nil && (wait <= 0 || wait > 1000) {
		wait = 1000
	}
	return wait
}

// dropDrained removes from -e's pending partitions those with nothing
// left to see before their end.
func dropDrained(c *cmd, cl *kgo.Client, plan consumePlan, readCommitted bool) error {
	adm, _ := c.admin()
	topic := c.args[0]
	// Bounded by --timeout: a cluster gone quiet because it went down
	// ends the command instead of hanging it.
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	ts, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td := ts[topic]
	for p, pr := range plan.pending {
		leader := td.Partitions[p].Leader
		done, err := drained(ctx, cl, leader, td.ID, topic, p, *pr, readCommitted)
		if err != nil {
			return err
		}
		if done {
			delete(plan.pending, p)
		}
	}
	return nil
}

// pollOnce polls up to want records, waiting at most idleMs when set; idle
// reports that the wait ran out with nothing.
func pollOnce(ctx context.Context, cl *kgo.Client, want, idleMs int) (kgo.Fetches, bool) {
	if idleMs <= 0 {
		return cl.PollRecords(ctx, want), false
	}
	pctx, cancel := context.WithTimeout(ctx, time.Duration(idleMs)*time.Millisecond)
	defer cancel()
	fetches := cl.PollRecords(pctx, want)
	return fetches, pctx.Err() != nil && fetches.NumRecords() == 0
}

// fetchError is the first error of a poll that is not the poll's end.
func fetchError(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, kgo.ErrClientClosed) {
			continue
		}
		return fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
	}
	return nil
}

// commitConsumed commits what a group member printed.
func commitConsumed(c *cmd, cl *kgo.Client, f consumeFlags) error {
	if f.group == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("commit offsets of group %s: %w", f.group, err)
	}
	return nil
}

// drained reads the partition from r.next to r.end straight from its
// leader and reports whether nothing in it is a record a consumer would
// see: only transaction markers, or (read committed) aborted batches.
// The client consumes those silently, so -e cannot otherwise tell that a
// partition whose log ends in a marker is at its end.
func drained(ctx context.Context, cl *kgo.Client, leader int32, id [16]byte, topic string, p int32, r offsetRange, readCommitted bool) (bool, error) {
	for r.next < r.end {
		resp, err := fetchRaw(ctx, cl, leader, id, topic, p, r.next, readCommitted)
		if err != nil {
			return false, err
		}
		next, visible := scanBatches(resp, r.next, readCommitted)
		if visible {
			return false, nil
		}
		if next <= r.next {
			return false, nil // nothing readable yet: let the consumer go on
		}
		r.next = next
	}
	return true, nil
}

// fetchRaw fetches one partition from offset at its leader.
func fetchRaw(ctx context.Context, cl *kgo.Client, leader int32, id [16]byte, topic string, p int32, offset int64, readCommitted bool) (*kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	if readCommitted {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, offset, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, offset, errNoAnswer)
	}
	part := &resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, p, offset, err)
	}
	return part, nil
}

// scanBatches walks the batches of a fetch from offset and returns the
// offset after the last whole batch and whether any batch at or after
// offset holds records a consumer sees.
func scanBatches(part *kmsg.FetchResponseTopicPartition, offset int64, readCommitted bool) (int64, bool) {
	aborted := map[int64]int64{} // producer id -> first aborted offset
	for _, a := range part.AbortedTransactions {
		aborted[a.ProducerID] = a.FirstOffset
	}
	next := offset
	data := part.RecordBatches
	for len(data) >= 12 {
		length := int(binary.BigEndian.Uint32(data[8:12]))
		if len(data) < 12+length {
			break // a partial batch at the end of the response
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(data[:12+length]); err != nil {
			break
		}
		data = data[12+length:]
		last := b.FirstOffset + int64(b.LastOffsetDelta)
		if last < offset {
			continue
		}
		next = last + 1
		control := b.Attributes&0x20 != 0
		if control {
			// The producer's transaction ends here: its later batches are
			// not part of the aborted one.
			delete(aborted, b.ProducerID)
			continue
		}
		first, isAborted := aborted[b.ProducerID]
		if !(readCommitted && isAborted && first <= b.FirstOffset) {
			return next, true
		}
	}
	return next, false
}
