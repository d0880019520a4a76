package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// crashCopy copies a running server's data directory as a SIGKILL would
// leave it (what the processes wrote, no clean-shutdown marker, no final
// snapshots or checkpoints) and returns the copy. The server must be idle.
func crashCopy(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a checkpoint's .tmp renamed away while the broker runs
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		from, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer from.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, from); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	return dst
}

// wantAborted is an aborted transaction as the log shows it.
type wantAborted struct {
	pid         int64
	first, last int64
}

// diskTxnIndex reads every .txnindex of a partition directory, decoding
// Kafka's 34-byte AbortedTxn entries, and checks each entry's fields.
func diskTxnIndex(t *testing.T, dir string) (entries []wantAborted, files map[string][]byte) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.txnindex"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	files = map[string][]byte{}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(name)] = b
		if len(b)%34 != 0 {
			t.Fatalf("%s: %d bytes, not whole 34-byte entries", name, len(b))
		}
		for e := b; len(e) > 0; e = e[34:] {
			if v := binary.BigEndian.Uint16(e); v != 0 {
				t.Fatalf("%s: entry version %d", name, v)
			}
			w := wantAborted{
				pid:   int64(binary.BigEndian.Uint64(e[2:])),
				first: int64(binary.BigEndian.Uint64(e[10:])),
				last:  int64(binary.BigEndian.Uint64(e[18:])),
			}
			if lso := int64(binary.BigEndian.Uint64(e[26:])); lso <= w.first || lso > w.last+1 {
				t.Fatalf("%s: entry %+v with last stable offset %d", name, w, lso)
			}
			entries = append(entries, w)
		}
	}
	return entries, files
}

// fetchPartition fetches partition 0 of topic from offset with the given
// isolation level (1: read_committed).
func fetchPartition(t *testing.T, cl *kgo.Client, topic string, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	topics, err := kadm.NewClient(cl).ListTopics(testContext(t), topic)
	if err != nil || topics[topic].Err != nil {
		t.Fatalf("list topic %s: %v %v", topic, err, topics[topic].Err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 10
	req.MaxBytes = 256 << 10
	req.IsolationLevel = isolation
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topics[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 256 << 10
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch %s at %d: error %d", topic, offset, p.ErrorCode)
	}
	return p
}

// abortedFromLog reads the whole log read_uncommitted and follows the
// transactions through it: the aborted ones and the end offset.
func abortedFromLog(t *testing.T, cl *kgo.Client, topic string) ([]wantAborted, int64) {
	t.Helper()
	open := map[int64]int64{}
	var out []wantAborted
	off := int64(0)
	for {
		p := fetchPartition(t, cl, topic, off, 0)
		if len(p.RecordBatches) == 0 {
			if off < p.HighWatermark {
				t.Fatalf("no data at %d below the high watermark %d", off, p.HighWatermark)
			}
			return out, off
		}
		for data := p.RecordBatches; len(data) > 0; {
			batch, rest, h, err := protocol.NextBatch(data)
			if err != nil {
				break // a batch cut by the fetch size
			}
			data = rest
			off = h.LastOffset() + 1
			if !h.IsTransactional() {
				continue
			}
			if !h.IsControl() {
				if _, ok := open[h.ProducerID]; !ok {
					open[h.ProducerID] = h.BaseOffset
				}
				continue
			}
			commit, _, err := partition.DecodeMarker(batch)
			if err != nil {
				t.Fatal(err)
			}
			if first, ok := open[h.ProducerID]; ok && !commit {
				out = append(out, wantAborted{h.ProducerID, first, h.LastOffset()})
			}
			delete(open, h.ProducerID)
		}
	}
}

// checkReadCommittedFetches fetches the whole log read_committed, batch
// range by batch range, and checks each answer's AbortedTransactions
// against the aborted transactions overlapping what it returned.
func checkReadCommittedFetches(t *testing.T, cl *kgo.Client, topic string, aborted []wantAborted, end int64) {
	t.Helper()
	off := int64(0)
	for off < end {
		p := fetchPartition(t, cl, topic, off, 1)
		if p.LastStableOffset != end {
			t.Fatalf("last stable offset %d, want %d", p.LastStableOffset, end)
		}
		last := int64(-1)
		for data := p.RecordBatches; len(data) > 0; {
			_, rest, h, err := protocol.NextBatch(data)
			if err != nil {
				break
			}
			data, last = rest, h.LastOffset()
		}
		if last < 0 {
			t.Fatalf("read_committed fetch at %d returned nothing below %d", off, end)
		}
		var want, got []string
		for _, a := range aborted {
			if a.last >= off && a.first <= last {
				want = append(want, fmt.Sprintf("%d@%d", a.pid, a.first))
			}
		}
		for _, a := range p.AbortedTransactions {
			got = append(got, fmt.Sprintf("%d@%d", a.ProducerID, a.FirstOffset))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("read_committed fetch at %d (to %d): aborted transactions %v, want %v", off, last, got, want)
		}
		off = last + 1
	}
}

// readCommittedValues consumes the topic read_committed with franz-go and
// returns the values, in order.
func readCommittedValues(t *testing.T, addr, topic string, want int) []string {
	t.Helper()
	var out []string
	for _, r := range readAllIsolation(t, addr, topic, kgo.ReadCommitted(), want) {
		out = append(out, string(r.Value))
	}
	return out
}

// TestTxnIndexAcrossRestart: aborted transactions, some overlapping
// transactions of another producer, spread over several segments, are
// recorded in Kafka's .txnindex files of the segments holding their
// markers. After a clean restart read_committed fetches get exactly the
// overlapping aborted transactions from those files, and franz-go's
// read_committed consumer sees exactly the committed values; after a
// SIGKILL-like stop whose active segment lost its index, recovery
// rebuilds it byte for byte.
func TestTxnIndexAcrossRestart(t *testing.T) {
	ts := startServer(t, "")
	segBytes := "1048576"
	createTopic(t, ts.admin(t), "txi", 1, map[string]*string{"segment.bytes": &segBytes})
	ctx := testContext(t)
	a := ts.client(t, kgo.TransactionalID("txi-a"), kgo.DefaultProduceTopic("txi"), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	b := ts.client(t, kgo.TransactionalID("txi-b"), kgo.DefaultProduceTopic("txi"), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	pad := strings.Repeat("x", 90<<10)
	var committed []string
	produce := func(cl *kgo.Client, tag string, n int) []string {
		var recs []*kgo.Record
		var vals []string
		for i := range n {
			v := fmt.Sprintf("%s-%d", tag, i)
			vals = append(vals, v)
			recs = append(recs, &kgo.Record{Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "pad", Value: []byte(pad)}}})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return vals
	}
	begin := func(cl *kgo.Client) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	end := func(cl *kgo.Client, commit bool) {
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		begin(a)
		committed = append(committed, produce(a, fmt.Sprintf("a-commit-%d", round), 3)...)
		end(a, true)
		// A's aborted transaction overlaps B's committed one.
		begin(a)
		produce(a, fmt.Sprintf("a-abort-%d", round), 3)
		begin(b)
		bVals := produce(b, fmt.Sprintf("b-commit-%d", round), 2)
		end(a, false)
		bVals = append(bVals, produce(b, fmt.Sprintf("b-commit-%d-more", round), 2)...)
		end(b, true)
		committed = append(committed, bVals...)
		begin(b)
		produce(b, fmt.Sprintf("b-abort-%d", round), 2)
		end(b, false)
	}

	cl := ts.client(t)
	aborted, logEnd := abortedFromLog(t, cl, "txi")
	// Index entries reach the files with the next flush or roll.
	if l, ok := ts.logs.Log("txi", 0); !ok {
		t.Fatal("no log")
	} else if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(aborted) != 6 {
		t.Fatalf("log holds %d aborted transactions, want 6: %+v", len(aborted), aborted)
	}
	partDir := filepath.Join(ts.dir, "txi-0")
	if logs, _ := filepath.Glob(filepath.Join(partDir, "*.log")); len(logs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(logs))
	}
	onDisk, files := diskTxnIndex(t, partDir)
	if !slices.Equal(onDisk, aborted) {
		t.Fatalf("txnindex entries %+v, want %+v", onDisk, aborted)
	}
	if len(files) < 2 {
		t.Fatalf("aborted transactions indexed in %d segments, want several", len(files))
	}
	checkReadCommittedFetches(t, cl, "txi", aborted, logEnd)
	if got := readCommittedValues(t, ts.addr, "txi", len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed consumer read %d values %v\nwant %d %v", len(got), got, len(committed), committed)
	}

	// A SIGKILL: the copy has no clean-shutdown marker; the active
	// segment's index is lost too, so only recovery can bring it back.
	crashed := crashCopy(t, ts.dir)
	active := lastSegmentTxnIndex(t, filepath.Join(crashed, "txi-0"))
	if err := os.Remove(active); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{ts.dir, crashed} {
		ts2 := startServer(t, dir)
		cl2 := ts2.client(t)
		_, files2 := diskTxnIndex(t, filepath.Join(dir, "txi-0"))
		if len(files2) != len(files) {
			t.Fatalf("%s: %d txnindex files after restart, want %d", dir, len(files2), len(files))
		}
		for name, data := range files {
			if !bytes.Equal(files2[name], data) {
				t.Fatalf("%s: %s differs after restart", dir, name)
			}
		}
		checkReadCommittedFetches(t, cl2, "txi", aborted, logEnd)
		if got := readCommittedValues(t, ts2.addr, "txi", len(committed)); !slices.Equal(got, committed) {
			t.Fatalf("%s: read_committed consumer read %v\nwant %v", dir, got, committed)
		}
		if err := ts2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// lastSegmentTxnIndex names the .txnindex of a partition's last segment.
func lastSegmentTxnIndex(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("segments of %s: %v %v", dir, logs, err)
	}
	slices.Sort(logs)
	return strings.TrimSuffix(logs[len(logs)-1], ".log") + ".txnindex"
}

// timedBatch is an idempotent batch of one record with the given
// timestamp.
func timedBatch(t *testing.T, pid int64, seq int32, ts int64, value string) []byte {
	t.Helper()
	b, err := protocol.BuildBatch(protocol.BatchHeader{FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, BaseSequence: seq},
		[]protocol.Record{{Value: []byte(value)}}, protocol.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshotFiles lists a partition directory's producer snapshot offsets.
func snapshotFiles(t *testing.T, dir string) []int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, n := range names {
		off, err := producerstate.ParseSnapshotFileName(filepath.Base(n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, off)
	}
	slices.Sort(out)
	return out
}

// TestProducerSnapshotAtRoll: each roll writes <base offset>.snapshot
// holding the producer state of the records below it (not the batch whose
// append rolled); the snapshots of deleted segments go with them. After a
// SIGKILL-like stop a retry of a producer's last batch is still answered
// as a duplicate with its original offset, although that batch's segment
// is gone and no snapshot was written at shutdown.
func TestProducerSnapshotAtRoll(t *testing.T) {
	tweak := func(c *config.Broker) { c.LogRetentionCheckIntervalMs = 100 }
	ts := startServer(t, "", tweak)
	// Batches 10 ms apart with segment.ms=5: every batch after the first
	// rolls a new segment.
	segMs := "5"
	createTopic(t, ts.admin(t), "snap", 1, map[string]*string{"segment.ms": &segMs})
	cl := ts.client(t)
	p1, e1 := initProducerID(t, cl)
	p2, e2 := initProducerID(t, cl)
	c := dialRaw(t, ts.addr)
	t0 := time.Now().UnixMilli()
	sent := []struct {
		pid   int64
		epoch int16
		seq   int32
	}{{p1, e1, 0}, {p1, e1, 1}, {p2, e2, 0}, {p2, e2, 1}, {p2, e2, 2}}
	batches := make([][]byte, len(sent))
	for i, s := range sent {
		batches[i] = timedBatch(t, s.pid, s.seq, t0+10*int64(i), fmt.Sprint("v", i))
		if r := produceRaw(t, c, "snap", batches[i]); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("batch %d: code %d offset %d", i, r.ErrorCode, r.BaseOffset)
		}
	}
	dir := filepath.Join(ts.dir, "snap-0")
	if got := snapshotFiles(t, dir); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("snapshots at %v, want one per roll at 1, 2, 3, 4", got)
	}
	// The snapshot at 4 was taken inside the append of the batch at 4: it
	// holds p2's batch at 3 as its last, and p1's at 1.
	data, err := os.ReadFile(filepath.Join(dir, producerstate.SnapshotFileName(4)))
	if err != nil {
		t.Fatal(err)
	}
	st, err := producerstate.DecodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	for pid, wantLast := range map[int64]int64{p1: 1, p2: 3} {
		bs := st.Batches(pid)
		if len(bs) != 1 || bs[0].LastOffset != wantLast {
			t.Fatalf("snapshot at 4: producer %d batches %+v, want last offset %d", pid, bs, wantLast)
		}
	}

	// Records below 4 are deleted, and their segments and snapshots go.
	adm := ts.admin(t)
	to := kadm.Offsets{}
	to.Add(kadm.Offset{Topic: "snap", Partition: 0, At: 4})
	if res, err := adm.DeleteRecords(testContext(t), to); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(snapshotFiles(t, dir), []int64{4}) {
		if time.Now().After(deadline) {
			t.Fatalf("snapshots %v after deleting records below 4, want [4]", snapshotFiles(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}

	crashed := crashCopy(t, ts.dir)
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, crashed, tweak)
	c = dialRaw(t, ts.addr)
	// p1's last batch lies below the log start now; p2's is replayed.
	for _, i := range []int{1, 4} {
		if r := produceRaw(t, c, "snap", batches[i]); r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("retry of batch %d after the crash: code %d offset %d, want the original offset", i, r.ErrorCode, r.BaseOffset)
		}
	}
	if r := produceRaw(t, c, "snap", timedBatch(t, p1, 2, time.Now().UnixMilli(), "next")); r.ErrorCode != 0 || r.BaseOffset != 5 {
		t.Fatalf("p1's next batch: code %d offset %d, want 5", r.ErrorCode, r.BaseOffset)
	}
	ends, err := ts.admin(t).ListEndOffsets(testContext(t), "snap")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("snap", 0); o.Offset != 6 {
		t.Fatalf("log end %d, want 6: a retry was written again", o.Offset)
	}
}

// TestProducerExpiry: with a short producer.id.expiration.ms, an idle
// producer's state is removed by the periodic check, while a producer
// with a transaction open is kept.
func TestProducerExpiry(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) {
		c.ProducerIDExpirationMs = 1500
		c.ProducerIDExpirationCheckIntervalMs = 100
	})
	createTopic(t, ts.admin(t), "exp", 1, nil)
	cl := ts.client(t)
	// The transaction first: setting it up (the transaction coordinator,
	// its topic) can take longer than the expiry under load, and the idle
	// producer must still be there when first described.
	txn := ts.client(t, kgo.TransactionalID("exp-txn"), kgo.DefaultProduceTopic("exp"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(testContext(t), &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	idle, epoch := initProducerID(t, cl)
	c := dialRaw(t, ts.addr)
	if r := produceRaw(t, c, "exp", idempotentBatch(t, idle, epoch, 0, "a")); r.ErrorCode != 0 {
		t.Fatalf("produce: code %d", r.ErrorCode)
	}
	describe := func() map[int64]bool {
		resp, err := (&kmsg.DescribeProducersRequest{Topics: []kmsg.DescribeProducersRequestTopic{{Topic: "exp", Partitions: []int32{0}}}}).RequestWith(testContext(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]bool{}
		for _, ap := range resp.Topics[0].Partitions[0].ActiveProducers {
			out[ap.ProducerID] = ap.CurrentTxnStartOffset >= 0
		}
		return out
	}
	got := describe()
	if inTxn, ok := got[idle]; len(got) != 2 || !ok || inTxn {
		t.Fatalf("producers before expiry %v", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = describe()
		if _, ok := got[idle]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("producer %d not expired: %v", idle, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != 1 {
		t.Fatalf("after expiry %v, want only the producer with the open transaction", got)
	}
	for _, inTxn := range got {
		if !inTxn {
			t.Fatalf("the remaining producer has no open transaction: %v", got)
		}
	}
	if err := txn.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}
