package compat

import (
	"encoding/json"
	"fmt"
	"maps"
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
)

// dumpKV reads the "key: value" pairs of a kafka-dump-log line, whose
// values hold no spaces except the last one's (payload, key).
func dumpKV(l string) map[string]string {
	m := map[string]string{}
	f := strings.Fields(strings.TrimPrefix(l, "| "))
	for i := 0; i+1 < len(f); i++ {
		if strings.HasSuffix(f[i], ":") {
			m[strings.TrimSuffix(f[i], ":")] = f[i+1]
			i++
		}
	}
	return m
}

// dumpSections splits kafka-dump-log's output by file: "Dumping <path>"
// starts each.
func dumpSections(out string) map[string][]string {
	secs := map[string][]string{}
	var cur string
	for _, l := range outLines(out) {
		if p, ok := strings.CutPrefix(l, "Dumping "); ok {
			cur = filepath.Base(p)
			secs[cur] = []string{}
			continue
		}
		secs[cur] = append(secs[cur], l)
	}
	return secs
}

// dumpBatch is a batch line of a .log dump with its record lines.
type dumpBatch struct {
	kv      map[string]string
	records []map[string]string
}

// testToolDumpLog: kafka-dump-log reads gregor's segment, offset index,
// time index, transaction index and producer snapshot files straight from
// its data directory, after idempotent batches, a committed and an
// aborted transaction and a roll; what it prints must be the records
// produced.
func testToolDumpLog(t *testing.T, e *ktEnv) {
	const topic, txnID = "tools-dump-log", "tools-dump-log-txn"
	// An index entry for every batch (index.interval.bytes=1), so that the
	// offset and time indexes are not empty.
	e.createTopic(t, topic, 1, map[string]*string{"index.interval.bytes": strp("1")})
	ctx := ktCtx(t)
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)

	// Five idempotent batches of one record, the third with headers.
	for i := range 5 {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "key-%d", i),
			Value: fmt.Appendf(nil, "value-%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if i == 2 {
			r.Headers = []kgo.RecordHeader{{Key: "h1", Value: []byte("x")}, {Key: "h2", Value: []byte("y")}}
		}
		e.produceTo(t, r)
	}
	// A committed transaction of three records, then an aborted one of
	// two: a COMMIT and an ABORT marker, and an aborted-transaction entry.
	tx, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.addr, ",")...), kgo.TransactionalID(txnID),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	for _, txn := range []struct {
		values []string
		end    kgo.TransactionEndTry
	}{{[]string{"txn-a", "txn-b", "txn-c"}, kgo.TryCommit}, {[]string{"aborted-a", "aborted-b"}, kgo.TryAbort}} {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for i, v := range txn.values {
			rs = append(rs, &kgo.Record{Key: []byte("txn"), Value: []byte(v), Timestamp: base.Add(time.Duration(10+i) * time.Second)})
		}
		if err := tx.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("transactional produce: %v", err)
		}
		if err := tx.EndTransaction(ctx, txn.end); err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}
	// Roll the segment: with segment.ms=1 the next append starts a new
	// one, and the roll writes the producer snapshot named by its offset.
	// The coordinator writes the markers after EndTxn returns: wait for
	// the ABORT marker (offset 11) to be appended and the partition to
	// be stable, so that the roll comes after it.
	const rollAt = 12 // 5 + 3 + COMMIT + 2 + ABORT
	for deadline := time.Now().Add(30 * time.Second); ; {
		stable, err := e.adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := stable.Lookup(topic, 0); o.Offset == rollAt && e.endOffsets(t, topic)[0] == rollAt {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition not stable at offset %d 30s after the transactions: %v", rollAt, stable)
		}
		time.Sleep(50 * time.Millisecond)
	}
	alter := func(v string) {
		t.Helper()
		rs, err := e.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: &v}}, topic)
		if err == nil {
			_, err = rs.On(topic, nil)
		}
		if err != nil {
			t.Fatalf("set segment.ms=%s: %v", v, err)
		}
	}
	alter("1")
	time.Sleep(20 * time.Millisecond)
	e.produceTo(t, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("after-roll")})
	alter("604800000")

	all := e.consumeAll(t, topic, kgo.ReadUncommitted())
	dir := filepath.Join(e.dataDir, topic+"-0")
	seg := func(off int64, ext string) string { return filepath.Join(dir, fmt.Sprintf("%020d%s", off, ext)) }
	files := []string{seg(0, ".log"), seg(0, ".index"), seg(0, ".timeindex"), seg(0, ".txnindex"), seg(rollAt, ".snapshot")}
	var missing []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, filepath.Base(f))
		}
	}
	if len(missing) > 0 {
		es, _ := os.ReadDir(dir)
		var names []string
		for _, de := range es {
			names = append(names, de.Name())
		}
		t.Fatalf("%s lacks %v; it holds %v", dir, missing, names)
	}
	out := e.k.must(t, "", classDumpLog, "--files", strings.Join(files, ","), "--print-data-log", "--deep-iteration")
	secs := dumpSections(out)
	for _, f := range files {
		if _, ok := secs[filepath.Base(f)]; !ok {
			t.Fatalf("kafka-dump-log did not dump %s:\n%s", filepath.Base(f), out)
		}
	}
	if extra := secs[""]; len(extra) > 0 {
		t.Errorf("kafka-dump-log printed before any file: %q", extra)
	}

	// The segment: every batch and record, as franz-go fetched them.
	var batches []*dumpBatch
	for _, l := range secs[filepath.Base(files[0])] {
		switch {
		case strings.HasPrefix(l, "Log starting offset:"):
			if l != "Log starting offset: 0" {
				t.Errorf(".log: %q, want Log starting offset: 0", l)
			}
		case strings.HasPrefix(l, "baseOffset:"):
			batches = append(batches, &dumpBatch{kv: dumpKV(l)})
		case strings.HasPrefix(l, "| offset:") && len(batches) > 0:
			b := batches[len(batches)-1]
			b.records = append(b.records, dumpKV(l))
		default:
			t.Errorf(".log: unexpected line %q", l)
		}
	}
	txnPID, _, err := tx.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dumped []map[string]string
	for _, b := range batches {
		if b.kv["isvalid"] != "true" || b.kv["magic"] != "2" || b.kv["compresscodec"] != "none" {
			t.Errorf("batch %v: want a valid magic 2 uncompressed batch", b.kv)
		}
		if b.kv["count"] != strconv.Itoa(len(b.records)) {
			t.Errorf("batch at %s: count %s, %d records dumped", b.kv["baseOffset"], b.kv["count"], len(b.records))
		}
		for _, r := range b.records {
			r["producerId"], r["isTransactional"], r["isControl"] = b.kv["producerId"], b.kv["isTransactional"], b.kv["isControl"]
			dumped = append(dumped, r)
		}
	}
	// Records in the first segment: all but the one after the roll.
	var inSeg []*kgo.Record
	for _, r := range all {
		if r.Offset < rollAt {
			inSeg = append(inSeg, r)
		}
	}
	if len(dumped) != len(inSeg) {
		t.Fatalf(".log dump has %d records, the segment holds %d (offsets below %d)", len(dumped), len(inSeg), rollAt)
	}
	var markers []string
	for i, r := range inSeg {
		d := dumped[i]
		want := map[string]string{"offset": strconv.FormatInt(r.Offset, 10), "producerId": strconv.FormatInt(r.ProducerID, 10),
			"isTransactional": strconv.FormatBool(r.Attrs.IsTransactional()), "isControl": strconv.FormatBool(r.Attrs.IsControl()),
			"CreateTime": strconv.FormatInt(r.Timestamp.UnixMilli(), 10)}
		if r.Attrs.IsControl() {
			markers = append(markers, d["endTxnMarker"])
		} else {
			want["key"], want["payload"] = string(r.Key), string(r.Value)
			var hk []string
			for _, h := range r.Headers {
				hk = append(hk, h.Key)
			}
			want["headerKeys"] = "[" + strings.Join(hk, ",") + "]"
		}
		for k, v := range want {
			if d[k] != v {
				t.Errorf(".log record at offset %d: %s = %q, want %q", r.Offset, k, d[k], v)
			}
		}
	}
	if !slices.Equal(markers, []string{"COMMIT", "ABORT"}) {
		t.Errorf(".log control records: %q, want [COMMIT ABORT]", markers)
	}
	lastOffsets := map[int64]map[string]string{} // batch lastOffset -> batch
	for _, b := range batches {
		lastOffsets[atoi64(t, "lastOffset", b.kv["lastOffset"])] = b.kv
	}

	// The offset index: entries (last offset of a batch, its position),
	// and kafka-dump-log's own check against the segment finds no
	// mismatch.
	idx := secs[filepath.Base(files[1])]
	if len(idx) == 0 {
		t.Errorf(".index dump is empty")
	}
	for _, l := range idx {
		kv := dumpKV(l)
		b, ok := lastOffsets[atoi64(t, ".index offset", kv["offset"])]
		if !ok || kv["position"] != b["position"] {
			t.Errorf(".index entry %q: not a batch's last offset and position", l)
		}
	}
	// The time index: entries (largest timestamp so far, the last offset
	// of its batch).
	tidx := secs[filepath.Base(files[2])]
	if len(tidx) == 0 {
		t.Errorf(".timeindex dump is empty")
	}
	var prevTS int64
	for _, l := range tidx {
		kv := dumpKV(l)
		ts := atoi64(t, ".timeindex timestamp", kv["timestamp"])
		b, ok := lastOffsets[atoi64(t, ".timeindex offset", kv["offset"])]
		if !ok || ts < prevTS || strconv.FormatInt(ts, 10) != b["CreateTime"] {
			t.Errorf(".timeindex entry %q: not a batch's max timestamp and last offset, in order", l)
		}
		prevTS = ts
	}
	for _, sec := range []string{files[1], files[2]} {
		for _, l := range secs[filepath.Base(sec)] {
			if strings.Contains(strings.ToLower(l), "mismatch") || strings.Contains(l, "larger than") {
				t.Errorf("%s: kafka-dump-log's check failed: %q", filepath.Base(sec), l)
			}
		}
	}

	// The transaction index: the aborted transaction, from its first
	// record to its marker.
	var abortedFirst, abortMarker int64 = -1, -1
	for _, r := range inSeg {
		if string(r.Value) == "aborted-a" {
			abortedFirst = r.Offset
		}
		if r.Attrs.IsControl() {
			abortMarker = r.Offset
		}
	}
	txi := secs[filepath.Base(files[3])]
	wantTxi := regexp.MustCompile(fmt.Sprintf(`^version: 0 producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: \d+$`,
		txnPID, abortedFirst, abortMarker))
	if len(txi) != 1 || !wantTxi.MatchString(txi[0]) {
		t.Errorf(".txnindex dump: %q, want one entry matching %s", txi, wantTxi)
	}

	// The producer snapshot taken at the roll: each producer's state
	// after the segment's batches, as Kafka's ProducerStateManager keeps
	// it. A batch or marker with a new epoch drops the batch metadata (a
	// transaction.version 2 marker bumps the epoch), a marker sets the
	// coordinator epoch and ends the open transaction.
	type pstate struct {
		epoch, coordEpoch             string
		firstSeq, lastSeq, lastOffset string
		hasBatch                      bool
	}
	states := map[string]*pstate{}
	for _, b := range batches {
		pid := b.kv["producerId"]
		if pid == "-1" {
			continue
		}
		s := states[pid]
		if s == nil {
			s = &pstate{epoch: b.kv["producerEpoch"], coordEpoch: "-1"}
			states[pid] = s
		}
		if s.epoch != b.kv["producerEpoch"] {
			s.epoch, s.hasBatch = b.kv["producerEpoch"], false
		}
		if b.kv["isControl"] == "true" {
			if len(b.records) > 0 {
				s.coordEpoch = b.records[0]["coordinatorEpoch"]
			}
			continue
		}
		s.hasBatch, s.firstSeq, s.lastSeq, s.lastOffset = true, b.kv["baseSequence"], b.kv["lastSequence"], b.kv["lastOffset"]
	}
	snapLines := secs[filepath.Base(files[4])]
	if len(snapLines) != len(states) {
		t.Errorf(".snapshot dump: %q, want an entry for each of the producers %v", snapLines, slices.Sorted(maps.Keys(states)))
	}
	for _, l := range snapLines {
		kv := dumpKV(l)
		s, ok := states[kv["producerId"]]
		if !ok {
			t.Errorf(".snapshot entry %q: no such producer in the segment", l)
			continue
		}
		want := map[string]string{"producerEpoch": s.epoch, "coordinatorEpoch": s.coordEpoch, "currentTxnFirstOffset": "OptionalLong.empty"}
		if s.hasBatch {
			want["firstSequence"], want["lastSequence"], want["lastOffset"] = s.firstSeq, s.lastSeq, s.lastOffset
		} else if _, has := kv["lastOffset"]; has {
			t.Errorf(".snapshot entry %q: batch metadata kept across an epoch bump", l)
		}
		for k, v := range want {
			if kv[k] != v {
				t.Errorf(".snapshot entry of producer %s: %s = %q, want %q", kv["producerId"], k, kv[k], v)
			}
		}
	}
	if len(states) != 2 {
		t.Errorf("the segment has %d producers, want 2 (idempotent and transactional)", len(states))
	}
	if t.Failed() {
		t.Logf("kafka-dump-log output:\n%s", out)
	}

	// The coordinators' internal topics, decoded by the tool.
	t.Run("consumer-offsets", func(t *testing.T) { testToolDumpLogOffsets(t, e, topic) })
	t.Run("transaction-state", func(t *testing.T) { testToolDumpLogTxnState(t, e, txnID, txnPID, topic) })
}

// javaStringHash is Java's String.hashCode of an ASCII string, which
// Kafka's coordinators map a group or transactional id to a partition of
// their internal topic with (Utils.abs(hash) % partitions).
func javaStringHash(s string) int32 {
	var h int32
	for _, c := range []byte(s) {
		h = 31*h + int32(c)
	}
	return h
}

// coordinatorPartition is the partition of an internal topic that holds
// key's records.
func (e *ktEnv) coordinatorPartition(t *testing.T, topic, key string) int32 {
	t.Helper()
	md, err := e.adm.ListTopicsWithInternal(ktCtx(t), topic)
	if err != nil || md[topic].Err != nil || len(md[topic].Partitions) == 0 {
		t.Fatalf("metadata of %s: %v %v", topic, err, md[topic].Err)
	}
	return (javaStringHash(key) & 0x7fffffff) % int32(len(md[topic].Partitions))
}

// decodedRecord is one record of kafka-dump-log with a decoder: its key
// and payload as JSON ("type" names the record schema), payload null for
// a tombstone.
type decodedRecord struct {
	offset  int64
	key     map[string]any
	payload map[string]any
}

// decodedRecords reads the records of a --offsets-decoder or
// --transaction-log-decoder dump.
func decodedRecords(t *testing.T, out string) []decodedRecord {
	t.Helper()
	var rs []decodedRecord
	for _, l := range outLines(out) {
		if !strings.HasPrefix(l, "| offset:") {
			continue
		}
		head, rest, ok := strings.Cut(l, " key: ")
		if !ok {
			t.Fatalf("decoded record %q has no key", l)
		}
		keyJSON, payloadJSON, ok := strings.Cut(rest, " payload: ")
		if !ok {
			t.Fatalf("decoded record %q has no payload", l)
		}
		r := decodedRecord{offset: atoi64(t, "offset", dumpKV(head)["offset"])}
		if err := json.Unmarshal([]byte(keyJSON), &r.key); err != nil {
			t.Fatalf("decoded record %q: key is not JSON: %v", l, err)
		}
		if payloadJSON != "<DELETE>" {
			if err := json.Unmarshal([]byte(payloadJSON), &r.payload); err != nil {
				t.Fatalf("decoded record %q: payload is not JSON: %v", l, err)
			}
		}
		rs = append(rs, r)
	}
	return rs
}

// dumpInternal runs kafka-dump-log with decoder on the first segment of
// an internal topic's partition.
func (e *ktEnv) dumpInternal(t *testing.T, decoder, topic string, partition int32) string {
	t.Helper()
	seg := filepath.Join(e.dataDir, fmt.Sprintf("%s-%d", topic, partition), fmt.Sprintf("%020d.log", 0))
	if _, err := os.Stat(seg); err != nil {
		t.Fatalf("%s: %v", topic, err)
	}
	return e.k.must(t, "", classDumpLog, "--files", seg, decoder)
}

// testToolDumpLogOffsets: kafka-dump-log --offsets-decoder reads the
// offset commit gregor wrote to __consumer_offsets: Kafka's key and value
// schemas, in the partition Kafka's coordinator would use.
func testToolDumpLogOffsets(t *testing.T, e *ktEnv, topic string) {
	const group = "tools-dump-log-group"
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 7, LeaderEpoch: -1, Metadata: "dump-log"})
	resp, err := e.adm.CommitOffsets(ktCtx(t), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	p := e.coordinatorPartition(t, "__consumer_offsets", group)
	out := e.dumpInternal(t, "--offsets-decoder", "__consumer_offsets", p)
	found := false
	for _, r := range decodedRecords(t, out) {
		data, _ := r.key["data"].(map[string]any)
		if data["group"] != group {
			continue
		}
		if r.key["type"] != "1" || data["topic"] != topic || data["partition"] != float64(0) || r.payload == nil {
			t.Errorf("record at %d: key %v payload %v; want an offset commit of %s-0", r.offset, r.key, r.payload, topic)
			continue
		}
		v, _ := r.payload["data"].(map[string]any)
		if v["offset"] != float64(7) || v["metadata"] != "dump-log" {
			t.Errorf("offset commit at %d: %v, want offset 7 with metadata dump-log", r.offset, v)
		}
		found = true
	}
	if !found {
		t.Errorf("__consumer_offsets-%d holds no offset commit of group %s:\n%s", p, group, out)
	}
}

// testToolDumpLogTxnState: kafka-dump-log --transaction-log-decoder reads
// the transactional id's states from __transaction_state: its producer id
// and, last, the completed abort.
func testToolDumpLogTxnState(t *testing.T, e *ktEnv, txnID string, pid int64, topic string) {
	p := e.coordinatorPartition(t, "__transaction_state", txnID)
	out := e.dumpInternal(t, "--transaction-log-decoder", "__transaction_state", p)
	var states []string
	for _, r := range decodedRecords(t, out) {
		data, _ := r.key["data"].(map[string]any)
		if data["transactionalId"] != txnID {
			continue
		}
		v, _ := r.payload["data"].(map[string]any)
		if v["producerId"] != float64(pid) {
			t.Errorf("state record at %d: producer %v, want %d", r.offset, v["producerId"], pid)
		}
		states = append(states, fmt.Sprint(v["transactionStatus"]))
	}
	// Empty after InitProducerId, then per transaction Ongoing (its one
	// partition added), Prepare* and Complete*: Kafka 4.4 writes the same.
	want := []string{"Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort", "CompleteAbort"}
	if !slices.Equal(states, want) {
		t.Errorf("__transaction_state-%d states of %s: %q, want %q:\n%s", p, txnID, states, want, out)
	}
}
