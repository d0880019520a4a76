package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func produceCommand() *command {
	return &command{name: "produce", argFlag: "topic", args: "TOPIC", run: runProduceCmd,
		short: "write records read from stdin or a file, one a line (or in a --format)",
		long: `Each input line is a record's value. -k DELIM splits a line into key and
value at the first DELIM; -f reads any layout of key, value, headers and
partition; --json reads one JSON object a line, as consume --json writes
them ({"key":..,"value":..,"headers":[{"key":..,"value":..}],"partition":..}).
Records are sent with acks=all and idempotence; the command ends when every
record is acknowledged and prints how many went to each partition. While
records flow, a progress line goes to stderr every 5 s (unless --quiet;
GREGOR_PROGRESS_INTERVAL changes the interval). On Ctrl-C (SIGINT) or
SIGTERM it stops reading, waits a moment for what is in flight, prints the
summary of what was acknowledged and exits with 130.

` + formatHelp,
		examples: `  echo hello | gregor produce orders
  printf 'k1:v1\nk2:v2\n' | gregor produce orders -k :
  gregor produce orders -f '%k\t%h\t%v\n' -F records.tsv
  gregor produce orders -H source=batch -H run=7 -p 0 < values.txt
  gregor consume old --json -n 100 | gregor produce new --json`}
}

// produceFlags is what `gregor produce` was asked to do.
type produceFlags struct {
	keyDelim, format, file, compression, acks string
	headers                                   []string
	partition                                 int
	quiet                                     bool
}

func runProduceCmd(c *cmd) error {
	var f produceFlags
	c.fs.Lookup("json").Usage = "read one JSON record a line (as consume --json writes them) and print the summary as JSON"
	c.stringVar(&f.keyDelim, "key-delimiter", "k", "", "split each line into key and value at this `delimiter`")
	c.stringVar(&f.format, "format", "f", "", "the input `format` (default %v\\n, a value a line)")
	c.stringVar(&f.file, "file", "F", "", "read records from this `file` instead of stdin")
	c.listVar(&f.headers, "header", "H", "add a header `key=value` to every record (repeatable)")
	c.intVar(&f.partition, "partition", "p", -1, "send every record to this partition (default: by key, else spread)")
	c.stringVar(&f.compression, "compression", "z", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	c.stringVar(&f.acks, "acks", "", "all", "acknowledgements: all (-1, idempotent), 1 (the leader) or 0 (none)")
	c.boolVar(&f.quiet, "quiet", "q", false, "print nothing on success")
	if err := c.parse(1, 1); err != nil {
		return err
	}
	next, closeIn, err := produceInput(c, f)
	if err != nil {
		return err
	}
	defer closeIn()
	headers, err := parseHeaders(joinHeaders(f.headers))
	if err != nil {
		return usagef("%s: %v", c.path, err)
	}
	opts, err := f.clientOpts(c)
	if err != nil {
		return err
	}
	cl, err := c.client(opts...)
	if err != nil {
		return err
	}
	var meter transferMeter
	stopProgress := func() {}
	if !f.quiet {
		stopProgress = reportEvery(progressInterval(c.errOut), func(window time.Duration) {
			n, b, total, _ := meter.window()
			if n == 0 {
				return // input idle: nothing to tell
			}
			perSec, mbPerSec := rates(n, b, window)
			fmt.Fprintf(c.errOut, "%d records acknowledged, %.1f records/sec (%.2f MB/sec), %d in all.\n", n, perSec, mbPerSec, total)
		})
	}
	sum, err := produceAll(c.interruptible(), cl, next, func(r *kgo.Record) {
		r.Headers = append(r.Headers, headers...)
		if f.partition >= 0 {
			r.Partition = int32(f.partition)
		}
	}, &meter)
	stopProgress()
	var ie *interruptedError
	if err != nil && !errors.As(err, &ie) {
		return err
	}
	if !f.quiet {
		if perr := printProduced(c, c.args[0], sum); perr != nil {
			return perr
		}
	}
	return err
}

// clientOpts are the producer's options from the flags.
func (f produceFlags) clientOpts(c *cmd) ([]kgo.Opt, error) {
	codec, err := compressionCodec(f.compression)
	if err != nil {
		return nil, usagef("%s: %v", c.path, err)
	}
	acks, err := acksOpts(f.acks)
	if err != nil {
		return nil, usagef("%s: %v", c.path, err)
	}
	// --timeout bounds each record's delivery, not the whole input.
	return append(acks, kgo.DefaultProduceTopic(c.args[0]), kgo.ProducerBatchCompression(codec), kgo.RecordDeliveryTimeout(c.timeout),
		kgo.RecordPartitioner(explicitPartitioner{kgo.StickyKeyPartitioner(nil)})), nil
}

// acksOpts reads --acks. Below all, writes cannot be idempotent.
func acksOpts(acks string) ([]kgo.Opt, error) {
	switch acks {
	case "all", "-1":
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, nil
	case "1":
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}, nil
	case "0":
		return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}, nil
	}
	return nil, fmt.Errorf("--acks %q: want all, 1 or 0", acks)
}

// joinHeaders lets -H be given many times; each is one k=v.
func joinHeaders(hs []string) string { return strings.Join(hs, ",") }

// produceInput returns a function reading the next record (io.EOF at the
// end) and one closing the input.
func produceInput(c *cmd, f produceFlags) (func() (*kgo.Record, error), func(), error) {
	in, closeIn := c.in, func() {}
	if f.file != "" {
		file, err := os.Open(f.file)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.path, err)
		}
		in, closeIn = file, func() { file.Close() }
	}
	if c.json {
		if f.format != "" || f.keyDelim != "" {
			closeIn()
			return nil, nil, usagef("%s: --json reads JSON; it takes no --format or --key-delimiter", c.path)
		}
		return jsonLines(in), closeIn, nil
	}
	format := `%v\n`
	switch {
	case f.format != "" && f.keyDelim != "":
		closeIn()
		return nil, nil, usagef("%s: give --format or --key-delimiter, not both", c.path)
	case f.format != "":
		format = f.format
	case f.keyDelim != "":
		format = "%k" + escapePercent(f.keyDelim) + `%v\n`
	}
	parts, err := parseFormat(format)
	if err == nil {
		var rr *recordReader
		if rr, err = newRecordReader(in, parts); err == nil {
			return rr.next, closeIn, nil
		}
	}
	closeIn()
	return nil, nil, err
}

// escapePercent keeps a delimiter literal inside a format (escapes in it
// are still read, so -k '\t' is a tab).
func escapePercent(s string) string { return strings.ReplaceAll(s, "%", "%%") }

// jsonLines reads one JSON record a line; blank lines are skipped.
func jsonLines(in io.Reader) func() (*kgo.Record, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<16), 128<<20)
	line := 0
	return func() (*kgo.Record, error) {
		for sc.Scan() {
			line++
			if len(sc.Bytes()) == 0 {
				continue
			}
			r, err := fromJSONRecord(sc.Bytes())
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			return r, nil
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read input: %w", err)
		}
		return nil, io.EOF
	}
}

// partitionSummary is how many records went to one partition.
type partitionSummary struct {
	Partition   int32 `json:"partition"`
	Records     int64 `json:"records"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
}

// produceAll sends every record from next, edited by edit, counting each
// acknowledged one in meter, and waits for all acknowledgements. It stops
// at the first failure. When ctx ends (SIGINT) it stops reading, gives
// what is in flight a moment, and returns what was acknowledged with an
// *interruptedError.
func produceAll(ctx context.Context, cl *kgo.Client, next func() (*kgo.Record, error), edit func(*kgo.Record), meter *transferMeter) (map[int32]*partitionSummary, error) {
	var mu sync.Mutex
	var firstErr error
	sum := map[int32]*partitionSummary{}
	done := func(r *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			firstErr = cmpErrFirst(firstErr, fmt.Errorf("produce to partition %d: %w", r.Partition, err))
			return
		}
		meter.add(1, int64(len(r.Key)+len(r.Value)))
		s := sum[r.Partition]
		if s == nil {
			s = &partitionSummary{Partition: r.Partition, FirstOffset: r.Offset}
			sum[r.Partition] = s
		}
		s.Records++
		s.FirstOffset, s.LastOffset = min(s.FirstOffset, r.Offset), max(s.LastOffset, r.Offset)
	}
	// snapshot copies the summary: promises still running after an
	// interrupt must not change what is printed.
	snapshot := func() map[int32]*partitionSummary {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[int32]*partitionSummary, len(sum))
		for p, s := range sum {
			c := *s
			out[p] = &c
		}
		return out
	}
	// The input is read on its own goroutine: a read blocked on stdin
	// must not keep an interrupt from ending the command.
	var read atomic.Int64
	readDone := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			r, err := next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				readDone <- err
				return
			}
			edit(r)
			read.Add(1)
			cl.Produce(ctx, r, done)
		}
		readDone <- nil
	}()
	interrupted := func() (map[int32]*partitionSummary, error) {
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cl.Flush(flushCtx)
		cancel()
		sum := snapshot()
		var acked int64
		for _, s := range sum {
			acked += s.Records
		}
		return sum, &interruptedError{fmt.Sprintf("produce: interrupted: %d of the %d records read were acknowledged", acked, read.Load())}
	}
	var readErr error
	select {
	case readErr = <-readDone:
	case <-ctx.Done():
		return interrupted()
	}
	flushErr := cl.Flush(ctx)
	if ctx.Err() != nil {
		return interrupted()
	}
	mu.Lock()
	err := cmpErrFirst(cmpErrFirst(readErr, firstErr), flushErr)
	mu.Unlock()
	return snapshot(), err
}

func cmpErrFirst(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func printProduced(c *cmd, topic string, sum map[int32]*partitionSummary) error {
	ps := make([]partitionSummary, 0, len(sum))
	var total int64
	for _, p := range slices.Sorted(maps.Keys(sum)) {
		ps = append(ps, *sum[p])
		total += sum[p].Records
	}
	if c.json {
		return c.printJSON(map[string]any{"topic": topic, "records": total, "partitions": ps})
	}
	var rows [][]string
	for _, p := range ps {
		rows = append(rows, []string{topic, itoa(p.Partition), itoa(p.Records), itoa(p.FirstOffset), itoa(p.LastOffset)})
	}
	if err := c.table([]string{"TOPIC", "PARTITION", "RECORDS", "FIRST-OFFSET", "LAST-OFFSET"}, rows); err != nil {
		return err
	}
	_, err := fmt.Fprintf(c.out, "produced %d records\n", total)
	return err
}

// explicitPartitioner sends a record that names its partition there, and
// the others by the wrapped partitioner (by key, else sticky).
type explicitPartitioner struct{ inner kgo.Partitioner }

func (p explicitPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return explicitTopicPartitioner{p.inner.ForTopic(t)}
}

type explicitTopicPartitioner struct{ inner kgo.TopicPartitioner }

func (p explicitTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || p.inner.RequiresConsistency(r)
}

func (p explicitTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition)
	}
	return p.inner.Partition(r, n)
}

// OnNewBatch keeps the sticky partitioner moving to a new partition per
// batch.
func (p explicitTopicPartitioner) OnNewBatch() {
	if nb, ok := p.inner.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
