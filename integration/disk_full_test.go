package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mountTmpfs mounts a tmpfs of size (e.g. "16m") on a fresh directory and
// unmounts it when the test ends; it skips the test where mounting is not
// allowed (not root, no CAP_SYS_ADMIN, a container without it).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a ballast file in dir until the file system is full (or
// max bytes are written) and returns its path.
func fillDisk(t *testing.T, dir string, max int64) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := int64(0); n < max; n += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
	return path
}

// diskProducer produces one record at a time, acks=all, without
// idempotence (so a record the broker wrote but refused would show up as
// a duplicate in the history check), noting each acknowledgement.
type diskProducer struct {
	t    *testing.T
	cl   *kgo.Client
	h    *history
	name string
	next int
}

func newDiskProducer(t *testing.T, addr string, h *history) *diskProducer {
	cl := newClient(t, addr, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(15*time.Second), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	return &diskProducer{t: t, cl: cl, h: h, name: "p0"}
}

// produce sends the next record of size bytes; it returns the produce
// error, and records the acknowledgement in the history.
func (d *diskProducer) produce(topic string, size int) error {
	val := recordValue(d.name, d.next)
	val = append(val, make([]byte, max(0, size-len(val)))...)
	// The value is producer:seq followed by padding; the history parses
	// the part before the padding.
	rec := &kgo.Record{Topic: topic, Key: recordValue(d.name, d.next), Value: val}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := d.cl.ProduceSync(ctx, rec).FirstErr()
	if err == nil {
		d.h.ack(d.name, d.next, rec.Partition, rec.Offset)
	}
	d.next++
	return err
}

// readHistory reads topic from the start and returns its records with
// their keys as values (the keys carry producer:sequence).
func readHistory(t *testing.T, addr, topic string) []readRecord {
	t.Helper()
	var out []readRecord
	for p, recs := range readAll(t, addr, topic) {
		for _, r := range recs {
			out = append(out, readRecord{partition: p, offset: r.Offset, value: r.Key})
		}
	}
	return out
}

func checkHistory(t *testing.T, h *history, addr, topic, when string) {
	t.Helper()
	log := readHistory(t, addr, topic)
	if problems := h.check(log); len(problems) > 0 {
		t.Fatalf("%s: %d problems, first: %v", when, len(problems), problems[:min(5, len(problems))])
	}
	if len(log) != h.count() {
		// Without idempotence a refused record must not be in the log.
		t.Fatalf("%s: %d records in the log, %d acknowledged", when, len(log), h.count())
	}
	t.Logf("%s: %d acknowledged records read back once each, in order", when, len(log))
}

// produceUntilFull produces until the disk refuses several records in a
// row, checking each refusal is Kafka's error for it.
func produceUntilFull(t *testing.T, d *diskProducer, topic string) (acked, refused int) {
	t.Helper()
	for i := 0; i < 20000 && refused < 5; i++ {
		err := d.produce(topic, 4096)
		switch {
		case err == nil:
			acked++
			refused = 0
		case errors.Is(err, kerr.KafkaStorageError), errors.Is(err, kerr.NotEnoughReplicas):
			refused++
		default:
			t.Fatalf("record %d on a full disk: %v, want KAFKA_STORAGE_ERROR", d.next-1, err)
		}
	}
	if refused == 0 {
		t.Fatal("the disk never filled")
	}
	return acked, refused
}

// produceAfterFree produces n records once space was freed; the first may
// need a few tries while the client's retry backoff runs.
func produceAfterFree(t *testing.T, d *diskProducer, topic string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for ok := 0; ok < n; {
		err := d.produce(topic, 4096)
		if err == nil {
			ok++
			continue
		}
		if ok > 0 || time.Now().After(deadline) {
			t.Fatalf("produce after space was freed: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDiskFullProduceRecovers fills the file system under a running
// broker: produce answers KAFKA_STORAGE_ERROR, the process stays up, every
// acknowledged record reads back once and in order, and produce works
// again as soon as space is freed, without a restart. Then it stops the
// broker on a full disk and starts it there again: it starts, serves
// every record, refuses writes, and takes them again once space returns.
func TestDiskFullProduceRecovers(t *testing.T) {
	mnt := mountTmpfs(t, "16m")
	data := filepath.Join(mnt, "data")
	port := freePort(t)
	p := startGregor(t, data, port, "--override", "log.segment.bytes=1048576")
	const topic = "full"
	createTopic(t, p.addr, topic, 1)
	h := newHistory()
	d := newDiskProducer(t, p.addr, h)

	ballast := fillDisk(t, mnt, 9<<20)
	acked, refused := produceUntilFull(t, d, topic)
	t.Logf("full disk: %d records acknowledged, then %d refused with KAFKA_STORAGE_ERROR", acked, refused)
	select {
	case <-p.done:
		t.Fatalf("gregor exited on a full disk:\n%s", p.log())
	default:
	}
	checkHistory(t, h, p.addr, topic, "while full")

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	produceAfterFree(t, d, topic, 50)
	checkHistory(t, h, p.addr, topic, "after space was freed, no restart")

	// Full again, then a stop and a start on the full disk.
	ballast = fillDisk(t, mnt, 1<<40)
	for i := 0; i < 5; i++ {
		if err := d.produce(topic, 4096); err == nil {
			t.Fatalf("record %d acknowledged with no space left", d.next-1)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("gregor did not stop on a full disk:\n%s", p.log())
	}
	d.cl.Close()
	p = startGregor(t, data, port, "--override", "log.segment.bytes=1048576")
	checkHistory(t, h, p.addr, topic, "restarted on a full disk")
	d = &diskProducer{t: t, h: h, name: "p1"}
	d.cl = newDiskProducer(t, p.addr, h).cl
	if err := d.produce(topic, 4096); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce on a full disk after a restart: %v, want KAFKA_STORAGE_ERROR", err)
	}
	// A topic created on the full disk: CreateTopics answers once it is
	// committed (KAFKA_STORAGE_ERROR only if the broker has already
	// failed to make its logs), and its partitions, whose logs cannot be
	// made, answer KAFKA_STORAGE_ERROR.
	if code := createTopicCode(t, d.cl, "late", 4); code != 0 && code != kerr.KafkaStorageError.Code {
		t.Fatalf("CreateTopics on a full disk answered %v, want success or KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	for part, err := range waitPartitionsSettled(t, p.addr, "late", 4) {
		if !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("partition %d of a topic created on a full disk: %v, want KAFKA_STORAGE_ERROR", part, err)
		}
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	produceAfterFree(t, d, topic, 50)
	checkHistory(t, h, p.addr, topic, "after the restart and space freed")
	// The broker made the late topic's logs on its own once space
	// returned.
	late := &diskProducer{t: t, cl: d.cl, h: newHistory(), name: "late"}
	produceAfterFree(t, late, "late", 20)
	checkHistory(t, late.h, p.addr, "late", "topic created on the full disk, after space was freed")
	p.stop()
}

// createTopicCode creates topic with partitions partitions and returns
// the topic's error code.
func createTopicCode(t *testing.T, cl *kgo.Client, topic string, partitions int32) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	return resp.Topics[0].ErrorCode
}
