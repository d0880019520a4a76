//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startGregorNofile is startGregor under prlimit with a hard
// RLIMIT_NOFILE of hard; it returns once gregor has started.
func startGregorNofile(t *testing.T, hard uint64, dir string, port int) *process {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	args := []string{fmt.Sprintf("--nofile=%d:%d", hard, hard), gregorBin,
		"serve", "--data-dir", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port)}
	p := launchCmd(t, exec.Command(prlimit, args...), 1<<20)
	p.waitStarted()
	return p
}

// TestFDLimitCreateTopics: a broker limited to 256 file descriptors (the
// soft RLIMIT_NOFILE of the running process, set with prlimit) is
// asked for a topic of 600 partitions. Segment files are opened lazily and
// closed after creation, so the topic is created; appends to all 600 then
// need more descriptors than there are, and each either succeeds or
// answers KAFKA_STORAGE_ERROR (never another error, never a log dir taken
// offline). When the limit is raised (prlimit on the running process)
// every partition takes produce, and each holds exactly the records that
// were acknowledged.
func TestFDLimitCreateTopics(t *testing.T) {
	const partitions = 600
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	p := startGregorNofile(t, lim.Max, t.TempDir(), port)
	// Go raises the soft limit to the hard one as a program starts, and
	// raising a hard limit needs CAP_SYS_RESOURCE, which a container may
	// lack: so the soft limit is lowered once gregor runs, and raised
	// back later, under the same hard limit.
	setNofile := func(soft uint64) {
		t.Helper()
		cmd := exec.Command("prlimit", "--pid", strconv.Itoa(p.cmd.Process.Pid), fmt.Sprintf("--nofile=%d:%d", soft, lim.Max))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("prlimit: %v: %s", err, out)
		}
	}
	cl := newClient(t, p.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Open the client's connections (metadata and produce) while there
	// are descriptors for them.
	createTopic(t, p.addr, "warm", 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "warm", Value: []byte("w")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	setNofile(256)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "wide", partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0]; got.ErrorCode != 0 {
		t.Fatalf("CreateTopics of %d partitions with 256 descriptors answered %v; segment files are opened lazily, so it should succeed",
			partitions, kerr.ErrorForCode(got.ErrorCode))
	}
	// The broker makes the logs after it answers; each partition then
	// serves, or answers KAFKA_STORAGE_ERROR when its log could not be
	// made.
	waitPartitionsSettled(t, p.addr, "wide", partitions)

	produce := func(part int32) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "wide", Partition: part, Value: []byte(strconv.Itoa(int(part)))}).FirstErr()
	}
	acked := make([]bool, partitions)
	failed := 0
	for part := int32(0); part < partitions; part++ {
		err := produce(part)
		switch {
		case err == nil:
			acked[part] = true
		case errors.Is(err, kerr.KafkaStorageError):
			failed++
		default:
			t.Fatalf("produce to partition %d with 256 descriptors: %v, want success or KAFKA_STORAGE_ERROR", part, err)
		}
	}
	t.Logf("with 256 descriptors: %d of %d partitions took produce, %d answered KAFKA_STORAGE_ERROR", partitions-failed, partitions, failed)

	setNofile(lim.Max)
	start := time.Now()
	for part := int32(0); part < partitions; part++ {
		if acked[part] {
			continue
		}
		for {
			err := produce(part)
			if err == nil {
				break
			}
			if !errors.Is(err, kerr.KafkaStorageError) || time.Since(start) > 30*time.Second {
				t.Fatalf("produce to partition %d after the limit was raised: %v", part, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("every partition took produce %v after the limit was raised", time.Since(start))
	log := readAll(t, p.addr, "wide")
	for part := int32(0); part < partitions; part++ {
		recs := log[part]
		if len(recs) != 1 || string(recs[0].Value) != strconv.Itoa(int(part)) {
			t.Fatalf("partition %d read back %d records", part, len(recs))
		}
	}
	select {
	case <-p.done:
		t.Fatal("gregor exited")
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}
