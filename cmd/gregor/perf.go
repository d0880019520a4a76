package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const perfUsage = `usage: gregor perf produce --topic T --records N [flags]
       gregor perf consume --topic T --records N [flags]
       gregor perf e2e --topic T --records N --throughput R [produce flags]

Measures a running cluster, as kafka-producer-perf-test and
kafka-consumer-perf-test do, with the franz-go client.

produce writes N records of --record-size bytes (creating the topic if it
is missing) and reports records/s, MB/s and the latency from send to
acknowledgement of each record. Each value is derived from its record's
index, so a later consume --verify can check every value. --producers P
splits the records over P clients, each with its own connections (many
producers); --partitioner round-robin spreads consecutive records over
every partition, so that each request carries a batch for many
partitions (with --partitions in the thousands: the many-partition
case), instead of the client's default of filling one partition's batch
at a time.

consume reads N records from the start of the topic, with a fresh
consumer or as --group, and reports records/s and MB/s; --verify checks
each value and that every index below N arrives exactly once.

e2e produces at the fixed rate R and reads the records back in the same
process; each record's latency runs from when it was handed to the
client (at or just after its due time start + index/R) to when it is
read. How late each record was handed over (the sender's sleep is only
as fine as the runtime's timer, about 1 ms; a client whose buffer is
full blocks it) is reported on its own, as is the latency from the due
time, which counts a stall against every record it holds up (no
coordinated omission), and the producer's acknowledgement latency. The
linger is 0 unless --linger is given, as Kafka's EndToEndLatency tool
sets it. Every record is checked to arrive once.

With --json the summary is one JSON object on stdout (the human line goes
to stderr), for scripts.

Every 5 s (GREGOR_PROGRESS_INTERVAL, a duration, changes it; 0 turns it
off) a line on stderr tells what the last interval did, as Kafka's perf
tools print: produce "N records sent, R records/sec (M MB/sec), A ms avg
latency, X ms max latency."; consume "N records consumed, ..."; e2e
"N records read back, ...". On SIGINT or SIGTERM the summary of what was
done so far is printed, marked interrupted, and gregor exits with 130.

flags of "gregor perf produce -h" and "gregor perf consume -h".
`

// mb is the megabyte of Kafka's perf tools.
const mb = 1024 * 1024

// Bounds on flags that size allocations.
const (
	maxRecordSize    = 64 << 20
	maxVerifyRecords = 1 << 30 // the verifier's bitset takes records/8 bytes
)

// runPerf runs `gregor perf produce|consume ...` until done or interrupted.
func runPerf(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runPerfTo(ctx, args, os.Stdout, os.Stderr)
}

func runPerfTo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, perfUsage)
		return errors.New("perf: want produce, consume or e2e")
	}
	switch args[0] {
	case "produce":
		o, err := parseProduceFlags(args[1:], stderr)
		if err != nil {
			return err
		}
		rep, err := runProduce(ctx, o, stderr)
		return reportOrFail(stdout, stderr, rep, o.json, err)
	case "e2e":
		o, err := parseProduceFlagsLinger(args[1:], stderr, e2eDefaultLinger)
		if err != nil {
			return err
		}
		rep, err := runE2E(ctx, o, stderr)
		return reportOrFail(stdout, stderr, rep, o.json, err)
	case "consume":
		o, err := parseConsumeFlags(args[1:], stderr)
		if err != nil {
			return err
		}
		rep, err := runConsume(ctx, o, stderr)
		return reportOrFail(stdout, stderr, rep, o.json, err)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, perfUsage)
		return nil
	}
	return fmt.Errorf("perf: unknown mode %q; want produce, consume or e2e", args[0])
}

// reportOrFail prints the report of a run that ended well, or of one
// interrupted (with its error after it), and returns err.
func reportOrFail(stdout, stderr io.Writer, rep perfReport, asJSON bool, err error) error {
	var ie *interruptedError
	if err != nil && !errors.As(err, &ie) {
		return err
	}
	if werr := writeReport(stdout, stderr, rep, asJSON); werr != nil {
		return werr
	}
	return err
}

// commonOptions are the flags both modes take.
type commonOptions struct {
	bootstrap []string
	topic     string
	records   int64
	json      bool
	sec       clientSecurity
	secOpts   []kgo.Opt // SASL and TLS, from sec after check
}

func (c *commonOptions) register(fs *flag.FlagSet, bootstrap *string) {
	fs.StringVar(bootstrap, "bootstrap", "localhost:9092", "comma-separated `host:port` list of brokers")
	fs.StringVar(&c.topic, "topic", "", "the `topic` (required)")
	fs.Int64Var(&c.records, "records", 0, "how many `records` (required)")
	fs.BoolVar(&c.json, "json", false, "print the summary as one JSON object on stdout")
	c.sec.register(fs)
}

func (c *commonOptions) check(fs *flag.FlagSet, bootstrap string) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, b := range strings.Split(bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.bootstrap = append(c.bootstrap, b)
		}
	}
	switch {
	case len(c.bootstrap) == 0:
		return errors.New("--bootstrap names no broker")
	case c.topic == "":
		return errors.New("--topic is required")
	case c.records <= 0:
		return errors.New("--records must be at least 1")
	}
	var err error
	c.secOpts, err = c.sec.opts(fs, "perf")
	return err
}

// produceOptions are the flags of `gregor perf produce`.
type produceOptions struct {
	commonOptions
	recordSize        int
	partitions        int
	replicationFactor int
	acks              string
	linger            time.Duration
	batchMaxBytes     int
	compression       string
	throughput        float64
	idempotent        bool
	producers         int
	partitioner       string
}

func parseProduceFlags(args []string, out io.Writer) (produceOptions, error) {
	return parseProduceFlagsLinger(args, out, 5*time.Millisecond)
}

// parseProduceFlagsLinger parses the produce flags with linger as the
// --linger default: perf produce batches (5 ms), perf e2e does not.
func parseProduceFlagsLinger(args []string, out io.Writer, linger time.Duration) (produceOptions, error) {
	var o produceOptions
	var bootstrap string
	fs := flag.NewFlagSet("perf produce", flag.ContinueOnError)
	fs.SetOutput(out)
	o.register(fs, &bootstrap)
	fs.IntVar(&o.recordSize, "record-size", 1024, "the size of each value in `bytes`")
	fs.IntVar(&o.partitions, "partitions", -1, "partitions of the topic if it must be created; -1 for the broker's num.partitions")
	fs.IntVar(&o.replicationFactor, "replication-factor", -1, "replication factor of the topic if it must be created; -1 for the broker's default")
	fs.StringVar(&o.acks, "acks", "all", "acks: 0, 1 or all")
	fs.DurationVar(&o.linger, "linger", linger, "how long a batch waits for more records (linger.ms)")
	fs.IntVar(&o.batchMaxBytes, "batch-max-bytes", 0, "the largest batch in `bytes`; 0 keeps the client's default (about 1 MB)")
	fs.StringVar(&o.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.Float64Var(&o.throughput, "throughput", -1, "cap the rate at this many records/s; -1 for no cap")
	fs.BoolVar(&o.idempotent, "idempotent", true, "use the idempotent producer (only with acks=all)")
	fs.IntVar(&o.producers, "producers", 1, "split the records over this many producer clients, each with its own connections")
	fs.StringVar(&o.partitioner, "partitioner", "default", "default (the client's sticky partitioner) or round-robin (consecutive records to consecutive partitions)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.check(fs, bootstrap); err != nil {
		return o, fmt.Errorf("perf produce: %w", err)
	}
	var err error
	switch {
	case o.recordSize < 0 || o.recordSize > maxRecordSize:
		err = fmt.Errorf("--record-size must be from 0 to %d", maxRecordSize)
	case o.partitions == 0 || o.partitions < -1 || o.partitions > 1<<20:
		err = errors.New("--partitions must be -1 or from 1 to 1048576")
	case o.replicationFactor == 0 || o.replicationFactor < -1 || o.replicationFactor > 1<<15-1:
		err = errors.New("--replication-factor must be -1 or from 1 to 32767")
	case o.acks != "0" && o.acks != "1" && o.acks != "all" && o.acks != "-1":
		err = fmt.Errorf("--acks %q: want 0, 1 or all", o.acks)
	case o.linger < 0:
		err = errors.New("--linger must not be negative")
	case o.batchMaxBytes < 0 || o.batchMaxBytes > 1<<30:
		err = errors.New("--batch-max-bytes must be from 0 to 1073741824")
	case o.throughput == 0 || (o.throughput < 0 && o.throughput != -1):
		err = errors.New("--throughput must be -1 or positive")
	case o.producers < 1 || o.producers > 10000:
		err = errors.New("--producers must be from 1 to 10000")
	case o.partitioner != "default" && o.partitioner != "round-robin":
		err = fmt.Errorf("--partitioner %q: want default or round-robin", o.partitioner)
	}
	if err == nil {
		_, err = compressionCodec(o.compression)
	}
	if err != nil {
		return o, fmt.Errorf("perf produce: %w", err)
	}
	if o.acks == "-1" {
		o.acks = "all"
	}
	return o, nil
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// clientOpts turns the options into the producer's kgo options.
func (o produceOptions) clientOpts() []kgo.Opt {
	codec, _ := compressionCodec(o.compression) // checked by parseProduceFlags
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap...),
		kgo.ClientID("gregor-perf"),
		kgo.ProducerLinger(o.linger),
		kgo.ProducerBatchCompression(codec),
	}
	opts = append(opts, o.secOpts...)
	switch o.acks {
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if !o.idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
	}
	if o.batchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(o.batchMaxBytes)))
	}
	if o.partitioner == "round-robin" {
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	}
	return opts
}

// consumeOptions are the flags of `gregor perf consume`.
type consumeOptions struct {
	commonOptions
	group         string
	verify        bool
	timeout       time.Duration
	fetchMaxBytes int
}

func parseConsumeFlags(args []string, out io.Writer) (consumeOptions, error) {
	var o consumeOptions
	var bootstrap string
	fs := flag.NewFlagSet("perf consume", flag.ContinueOnError)
	fs.SetOutput(out)
	o.register(fs, &bootstrap)
	fs.StringVar(&o.group, "group", "", "consume as this consumer `group`; empty for a fresh consumer without a group")
	fs.BoolVar(&o.verify, "verify", false, "check every value against what perf produce writes, and that each index below --records arrives once")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up after this long without a new record")
	fs.IntVar(&o.fetchMaxBytes, "fetch-max-bytes", 0, "fetch.max.bytes in `bytes`; 0 keeps the client's default")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.check(fs, bootstrap); err != nil {
		return o, fmt.Errorf("perf consume: %w", err)
	}
	switch {
	case o.timeout <= 0:
		return o, errors.New("perf consume: --timeout must be positive")
	case o.fetchMaxBytes < 0 || o.fetchMaxBytes > 1<<30:
		return o, errors.New("perf consume: --fetch-max-bytes must be from 0 to 1073741824")
	case o.verify && o.records > maxVerifyRecords:
		return o, fmt.Errorf("perf consume: --verify checks at most %d records", int64(maxVerifyRecords))
	}
	return o, nil
}

func (o consumeOptions) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap...),
		kgo.ClientID("gregor-perf"),
		kgo.ConsumeTopics(o.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	opts = append(opts, o.secOpts...)
	if o.group != "" {
		opts = append(opts, kgo.ConsumerGroup(o.group))
	}
	if o.fetchMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(int32(o.fetchMaxBytes)))
	}
	return opts
}

// ensureTopic creates the topic when it does not exist.
func ensureTopic(ctx context.Context, cl *kgo.Client, topic string, partitions, rf int, log io.Writer) error {
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("perf produce: look up topic %s: %w", topic, err)
	}
	if d, ok := details[topic]; ok && d.Err == nil {
		if partitions > 0 && len(d.Partitions) != partitions {
			fmt.Fprintf(log, "topic %s exists with %d partitions, not %d; using it as is\n", topic, len(d.Partitions), partitions)
		}
		return nil
	}
	resp, err := adm.CreateTopic(ctx, int32(partitions), int16(rf), nil, topic)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("perf produce: create topic %s: %w", topic, err)
	}
	fmt.Fprintf(log, "created topic %s with %d partitions\n", topic, resp.NumPartitions)
	return nil
}

// runProduce writes the records and measures them. With several
// producers, producer p of P sends the records whose index is p modulo P,
// each at 1/P of any rate cap, all at once.
func runProduce(ctx context.Context, o produceOptions, log io.Writer) (perfReport, error) {
	clients := make([]*kgo.Client, o.producers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		cl, err := kgo.NewClient(o.clientOpts()...)
		if err != nil {
			return perfReport{}, fmt.Errorf("perf produce: %w", err)
		}
		clients[i] = cl
	}
	if err := ensureTopic(ctx, clients[0], o.topic, o.partitions, o.replicationFactor, log); err != nil {
		return perfReport{}, err
	}

	base := payloadBase(o.recordSize)
	lat := newLatencies(o.records)
	// Values go back to the pool once acknowledged: the client keeps
	// referring to a record until its promise has run.
	pool := sync.Pool{New: func() any { b := make([]byte, o.recordSize); return &b }}
	var failed, sentTotal atomic.Int64
	var firstErr error
	var errOnce sync.Once
	produceErr := func(err error) {
		failed.Add(1)
		errOnce.Do(func() { firstErr = err })
	}
	rate := o.throughput
	if rate > 0 {
		rate /= float64(o.producers)
	}

	start := time.Now()
	stopProgress := reportEvery(progressInterval(log), func(window time.Duration) {
		n, total, worst := lat.window()
		perSec, mbPerSec := rates(n, n*int64(o.recordSize), window)
		var avg float64
		if n > 0 {
			avg = ms(total / time.Duration(n))
		}
		fmt.Fprintf(log, "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.\n",
			n, perSec, mbPerSec, avg, ms(worst))
	})
	defer stopProgress()
	flushErrs := make([]error, o.producers)
	var wg sync.WaitGroup
	for p, cl := range clients {
		wg.Go(func() {
			var sent int64
		send:
			for index := int64(p); index < o.records && ctx.Err() == nil; index += int64(o.producers) {
				if d := throttleDelay(start, time.Now(), sent, rate); d > 0 {
					select {
					case <-time.After(d):
					case <-ctx.Done():
						break send
					}
				}
				bp := pool.Get().(*[]byte)
				fillValue(*bp, base, uint64(index))
				sentAt := time.Now()
				cl.Produce(ctx, &kgo.Record{Topic: o.topic, Value: *bp}, func(_ *kgo.Record, err error) {
					d := time.Since(sentAt)
					pool.Put(bp)
					if err != nil {
						produceErr(err)
						return
					}
					lat.add(d)
				})
				sent++
			}
			sentTotal.Add(sent)
			if ctx.Err() != nil {
				// Interrupted: what is in flight gets a moment to be
				// acknowledged (what was not sent yet fails at once with
				// the context), so the summary covers what was.
				flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				cl.Flush(flushCtx)
				cancel()
				return
			}
			flushErrs[p] = cl.Flush(ctx)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	sent := sentTotal.Load()
	if ctx.Err() != nil {
		acked := lat.len()
		rep := newReport("produce", o.topic, acked, acked*int64(o.recordSize), elapsed)
		sum := lat.summary()
		rep.Latency = &sum
		rep.Produce = o.settings()
		rep.Interrupted = true
		return rep, &interruptedError{fmt.Sprintf("perf produce: interrupted after %d records acknowledged of %d sent", acked, sent)}
	}
	if err := errors.Join(flushErrs...); err != nil {
		return perfReport{}, fmt.Errorf("perf produce: flush after %d records: %w", sent, err)
	}
	if n := failed.Load(); n > 0 {
		return perfReport{}, fmt.Errorf("perf produce: %d of %d records failed, the first with: %w", n, sent, firstErr)
	}

	rep := newReport("produce", o.topic, sent, sent*int64(o.recordSize), elapsed)
	sum := lat.summary()
	rep.Latency = &sum
	rep.Produce = o.settings()
	return rep, nil
}

// settings are the options a produce or e2e report repeats.
func (o produceOptions) settings() *produceSettings {
	return &produceSettings{
		RecordSize: o.recordSize, Acks: o.acks, Compression: o.compression,
		LingerMs: float64(o.linger) / float64(time.Millisecond), BatchMaxBytes: o.batchMaxBytes,
		Idempotent: o.acks == "all" && o.idempotent, Throughput: o.throughput,
		Producers: o.producers, Partitioner: o.partitioner,
	}
}

// throttleDelay is how long to wait before sending record number sent so
// that the rate stays at or below perSec records/s since start; 0 when the
// rate is not capped or the producer is behind schedule.
func throttleDelay(start, now time.Time, sent int64, perSec float64) time.Duration {
	if perSec <= 0 {
		return 0
	}
	due := start.Add(time.Duration(float64(sent) / perSec * float64(time.Second)))
	if d := due.Sub(now); d > 0 {
		return d
	}
	return 0
}

// runConsume reads the records and measures them.
func runConsume(ctx context.Context, o consumeOptions, log io.Writer) (perfReport, error) {
	var ver *verifier
	if o.verify {
		ver = newVerifier(o.records)
	}
	cl, err := kgo.NewClient(o.clientOpts()...)
	if err != nil {
		return perfReport{}, fmt.Errorf("perf consume: %w", err)
	}
	defer cl.Close()

	start := time.Now()
	var first time.Time
	var count, nbytes int64
	var meter transferMeter
	stopProgress := reportEvery(progressInterval(log), func(window time.Duration) {
		n, b, _, _ := meter.window()
		perSec, mbPerSec := rates(n, b, window)
		fmt.Fprintf(log, "%d records consumed, %.1f records/sec (%.2f MB/sec).\n", n, perSec, mbPerSec)
	})
	defer stopProgress()
	lastProgress := start
	for count < o.records {
		pollCtx, cancel := context.WithDeadline(ctx, lastProgress.Add(o.timeout))
		fetches := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			stopProgress()
			rep := newReport("consume", o.topic, count, nbytes, time.Since(start))
			rep.Consume = &consumeSettings{Group: o.group}
			rep.Interrupted = true
			return rep, &interruptedError{fmt.Sprintf("perf consume: interrupted after %d records", count)}
		}
		if fetches.IsClientClosed() {
			return perfReport{}, errors.New("perf consume: client closed")
		}
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			return perfReport{}, fmt.Errorf("perf consume: %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		progressed := false
		for it := fetches.RecordIter(); !it.Done() && count < o.records; {
			r := it.Next()
			if first.IsZero() {
				first = time.Now()
			}
			progressed = true
			count++
			nbytes += int64(len(r.Key) + len(r.Value))
			meter.add(1, int64(len(r.Key)+len(r.Value)))
			if ver != nil {
				if err := ver.check(r.Value); err != nil {
					return perfReport{}, fmt.Errorf("perf consume: %s[%d] offset %d: %w", r.Topic, r.Partition, r.Offset, err)
				}
			}
		}
		if progressed {
			lastProgress = time.Now()
		} else if time.Since(lastProgress) >= o.timeout {
			return perfReport{}, fmt.Errorf("perf consume: got %d of %d records, then none for %s", count, o.records, o.timeout)
		}
	}
	end := time.Now()
	stopProgress()
	if o.group != "" {
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			fmt.Fprintf(log, "commit offsets of group %s: %v\n", o.group, err)
		}
	}

	rep := newReport("consume", o.topic, count, nbytes, end.Sub(start))
	rep.Consume = &consumeSettings{Group: o.group, Verified: ver != nil, FetchSeconds: end.Sub(first).Seconds()}
	return rep, nil
}

// payloadSeed fixes the generated payload, so that a consume run can check
// the values of any produce run.
const payloadSeed = 0x6772_6567_6f72_7066 // "gregorpf"

// payloadBase returns the n bytes every value of n bytes starts from: a
// splitmix64 stream, so values do not compress to nothing. The base of a
// shorter size is a prefix of a longer one's.
func payloadBase(n int) []byte {
	b := make([]byte, n+7)
	s := uint64(payloadSeed)
	for i := 0; i < n; i += 8 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(b[i:], z^(z>>31))
	}
	return b[:n:n]
}

// fillValue writes the value of record index into dst: the base payload
// with the index in the first 8 bytes and its complement in the last 8, so
// that a value swapped with another, cut short or shifted is caught. A
// value under 8 bytes mixes in what of the index fits.
func fillValue(dst, base []byte, index uint64) {
	copy(dst, base)
	n := len(dst)
	switch {
	case n >= 16:
		binary.BigEndian.PutUint64(dst, index)
		binary.BigEndian.PutUint64(dst[n-8:], ^index)
	case n >= 8:
		binary.BigEndian.PutUint64(dst, index)
	default:
		for i := range dst {
			dst[i] ^= byte(index >> (8 * i))
		}
	}
}

// valueIndex checks that v is a value fillValue wrote with a base of the
// same length, and returns its record index.
func valueIndex(v, base []byte) (uint64, error) {
	n := len(v)
	if n < 8 {
		return 0, fmt.Errorf("a value of %d bytes cannot carry a record index (produce with --record-size 8 or more)", n)
	}
	if len(base) != n {
		return 0, fmt.Errorf("base payload of %d bytes for a value of %d", len(base), n)
	}
	index := binary.BigEndian.Uint64(v)
	end := n
	if n >= 16 {
		end = n - 8
		if binary.BigEndian.Uint64(v[end:]) != ^index {
			return index, fmt.Errorf("value of record %d: its last 8 bytes do not repeat the index", index)
		}
	}
	if !bytes.Equal(v[8:end], base[8:end]) {
		return index, fmt.Errorf("value of record %d: payload differs from what perf produce writes", index)
	}
	return index, nil
}

// verifier checks consumed values: each well formed, each index below the
// expected count, none twice. With exactly that many values checked, every
// index has then been seen once.
type verifier struct {
	n    uint64
	seen []uint64 // bitset of indexes
	base []byte   // grows to the longest value seen
}

func newVerifier(records int64) *verifier {
	return &verifier{n: uint64(records), seen: make([]uint64, (records+63)/64)}
}

func (v *verifier) check(value []byte) error {
	if len(value) > len(v.base) {
		v.base = payloadBase(len(value))
	}
	index, err := valueIndex(value, v.base[:len(value)])
	if err != nil {
		return err
	}
	if index >= v.n {
		return fmt.Errorf("record index %d is not below --records %d: the topic holds records of another run", index, v.n)
	}
	word, bit := index/64, uint64(1)<<(index%64)
	if v.seen[word]&bit != 0 {
		return fmt.Errorf("record %d arrived twice", index)
	}
	v.seen[word] |= bit
	return nil
}

// maxLatencySamples bounds the latencies kept for percentiles, as
// kafka-producer-perf-test does: one in every N records is sampled.
const maxLatencySamples = 500000

// latencies collects per-record acknowledgement latencies. Promises run on
// the client's goroutines, hence the lock.
type latencies struct {
	mu      sync.Mutex
	count   int64
	total   time.Duration
	max     time.Duration
	every   int64
	samples []time.Duration
	// The current progress window's, as Kafka's perf tools keep them.
	windowCount int64
	windowTotal time.Duration
	windowMax   time.Duration
}

func newLatencies(expected int64) *latencies {
	every := expected/maxLatencySamples + 1
	return &latencies{every: every, samples: make([]time.Duration, 0, min(expected, maxLatencySamples))}
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count%l.every == 0 && len(l.samples) < maxLatencySamples {
		l.samples = append(l.samples, d)
	}
	l.count++
	l.total += d
	l.max = max(l.max, d)
	l.windowCount++
	l.windowTotal += d
	l.windowMax = max(l.windowMax, d)
}

// window returns the count, sum and maximum of the latencies added since
// the previous call, and starts a new window.
func (l *latencies) window() (count int64, total, worst time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	count, total, worst = l.windowCount, l.windowTotal, l.windowMax
	l.windowCount, l.windowTotal, l.windowMax = 0, 0, 0
	return count, total, worst
}

// len is how many latencies were added.
func (l *latencies) len() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// latencySummary is the latency part of a produce report, in milliseconds.
type latencySummary struct {
	Avg  float64 `json:"avg"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (l *latencies) summary() latencySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == 0 {
		return latencySummary{}
	}
	sorted := slices.Clone(l.samples)
	slices.Sort(sorted)
	return latencySummary{
		Avg:  ms(l.total / time.Duration(l.count)),
		P50:  ms(percentile(sorted, 0.5)),
		P95:  ms(percentile(sorted, 0.95)),
		P99:  ms(percentile(sorted, 0.99)),
		P999: ms(percentile(sorted, 0.999)),
		Max:  ms(l.max),
	}
}

// percentile is the sample at rank floor(len*p) of sorted samples, as
// kafka-producer-perf-test computes it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)) * p)
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// perfReport is a run's summary; --json prints it as is.
type perfReport struct {
	Mode          string           `json:"mode"`
	Topic         string           `json:"topic"`
	Records       int64            `json:"records"`
	Bytes         int64            `json:"bytes"`
	Seconds       float64          `json:"seconds"`
	RecordsPerSec float64          `json:"records_per_sec"`
	MBPerSec      float64          `json:"mb_per_sec"`
	Latency       *latencySummary  `json:"latency_ms,omitempty"`
	Produce       *produceSettings `json:"produce,omitempty"`
	Consume       *consumeSettings `json:"consume,omitempty"`
	E2E           *e2eSettings     `json:"e2e,omitempty"`
	// Interrupted says SIGINT or SIGTERM cut the run short: the figures
	// are those of what was done until then.
	Interrupted bool `json:"interrupted,omitempty"`
}

type produceSettings struct {
	RecordSize    int     `json:"record_size"`
	Acks          string  `json:"acks"`
	Compression   string  `json:"compression"`
	LingerMs      float64 `json:"linger_ms"`
	BatchMaxBytes int     `json:"batch_max_bytes"`
	Idempotent    bool    `json:"idempotent"`
	Throughput    float64 `json:"throughput_cap"`
	Producers     int     `json:"producers"`
	Partitioner   string  `json:"partitioner"`
}

type consumeSettings struct {
	Group    string `json:"group,omitempty"`
	Verified bool   `json:"verified"`
	// FetchSeconds runs from the first record to the last, leaving out
	// connecting and joining the group (kafka-consumer-perf-test's
	// fetch.time.ms).
	FetchSeconds float64 `json:"fetch_seconds"`
}

func newReport(mode, topic string, records, bytes int64, elapsed time.Duration) perfReport {
	r := perfReport{Mode: mode, Topic: topic, Records: records, Bytes: bytes, Seconds: elapsed.Seconds()}
	if r.Seconds > 0 {
		r.RecordsPerSec = float64(records) / r.Seconds
		r.MBPerSec = float64(bytes) / mb / r.Seconds
	}
	return r
}

// humanLine is the one-line summary, in the words of Kafka's perf tools;
// an interrupted run's says so first.
func (r perfReport) humanLine() string {
	if r.Interrupted {
		r.Interrupted = false
		return "interrupted: " + r.humanLine()
	}
	if r.Mode == "produce" {
		l := r.Latency
		if l == nil {
			l = &latencySummary{}
		}
		return fmt.Sprintf("%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "+
			"%.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.",
			r.Records, r.RecordsPerSec, r.MBPerSec, l.Avg, l.Max, l.P50, l.P95, l.P99, l.P999)
	}
	if r.Mode == "e2e" && r.Latency != nil && r.E2E != nil && !r.E2E.Verified {
		l := r.Latency
		return fmt.Sprintf("%d records read back of %d sent at %.0f records/sec (%.0f asked); "+
			"latency from send: %.2f ms avg, %.2f ms 50th, %.2f ms 99th, %.2f ms 99.9th, %.2f ms max.",
			r.Records, r.E2E.Sent, r.E2E.Achieved, r.E2E.Rate, l.Avg, l.P50, l.P99, l.P999, l.Max) + r.E2E.stagesLine()
	}
	if r.Mode == "e2e" && r.Latency != nil && r.E2E != nil {
		l := r.Latency
		line := fmt.Sprintf("%d records end to end at %.0f records/sec (%.0f asked, at most %d ms behind schedule), each read back once; "+
			"latency from send: %.2f ms avg, %.2f ms 50th, %.2f ms 99th, %.2f ms 99.9th, %.2f ms max.",
			r.Records, r.E2E.Achieved, r.E2E.Rate, r.E2E.Behind, l.Avg, l.P50, l.P99, l.P999, l.Max)
		return line + r.E2E.stagesLine()
	}
	line := fmt.Sprintf("%d records consumed (%.2f MB) in %.2f s, %.1f records/sec (%.2f MB/sec)",
		r.Records, float64(r.Bytes)/mb, r.Seconds, r.RecordsPerSec, r.MBPerSec)
	if r.Consume != nil && r.Consume.Verified {
		line += ", every value verified"
	}
	return line + "."
}

// writeReport prints the summary: the human line on stdout, or with
// asJSON the JSON object on stdout and the human line on stderr.
func writeReport(stdout, stderr io.Writer, r perfReport, asJSON bool) error {
	if !asJSON {
		_, err := fmt.Fprintln(stdout, r.humanLine())
		return err
	}
	fmt.Fprintln(stderr, r.humanLine())
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("perf: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "%s\n", data)
	return err
}
