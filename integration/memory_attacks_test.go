package integration

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// The attacks of issue 11's "memory a client can take", each against a
// gregor built without the race detector (whose shadow memory would swamp
// the figures), measured as the growth of the process's VmRSS. Each must
// stay under memBudget.

const memBudget = 100 << 20

var (
	memBinOnce sync.Once
	memBin     string
	memBinErr  error
)

// memGregor builds gregor without -race once and starts it on a fresh
// data dir with extra arguments.
func memGregor(t *testing.T, extra ...string) *memProcess {
	t.Helper()
	if testing.Short() {
		t.Skip("memory attacks: seconds of load each")
	}
	memBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gregor-mem")
		if err != nil {
			memBinErr = err
			return
		}
		memBin = filepath.Join(dir, "gregor")
		out, err := exec.Command("go", "build", "-o", memBin, "../cmd/gregor").CombinedOutput()
		if err != nil {
			memBinErr = fmt.Errorf("build gregor: %v\n%s", err, out)
		}
	})
	if memBinErr != nil {
		t.Fatal(memBinErr)
	}
	args := append([]string{"serve", "--data-dir", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t))}, extra...)
	cmd := exec.Command(memBin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &memProcess{t: t, cmd: cmd}
	started := make(chan string, 1)
	exited := make(chan struct{})
	var (
		mu  sync.Mutex
		out []string
	)
	go func() {
		defer close(exited)
		re := regexp.MustCompile(`msg="gregor started" addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			out = append(out, sc.Text())
			mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case started <- m[1]:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() })
	log := func() string { mu.Lock(); defer mu.Unlock(); return fmt.Sprint(out) }
	select {
	case p.addr = <-started:
	case <-exited:
		t.Fatalf("gregor exited before starting: %s", log())
	case <-time.After(60 * time.Second):
		t.Fatalf("gregor did not start: %s", log())
	}
	return p
}

type memProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
}

var vmRSS = regexp.MustCompile(`VmRSS:\s+(\d+) kB`)

// rss is the process's resident set size in bytes, from /proc.
func (p *memProcess) rss() int64 {
	p.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		p.t.Fatal(err)
	}
	m := vmRSS.FindSubmatch(b)
	if m == nil {
		p.t.Fatalf("no VmRSS in /proc status")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// peakRSS samples rss every 20 ms until stop is closed and returns the
// highest.
func (p *memProcess) peakRSS(stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, p.rss())
			select {
			case <-stop:
				out <- max(peak, p.rss())
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// baseline is the settled RSS after a few requests warmed the process.
func (p *memProcess) baseline() int64 {
	c := memDial(p.t, p.addr)
	for i := range 5 {
		memRequest(p.t, c, kmsg.NewPtrApiVersionsRequest(), int32(i))
	}
	c.Close()
	time.Sleep(time.Second)
	return p.rss()
}

// A burst's memory is returned: within memSettle of its end RSS is back
// within memReturned of the baseline (cmd/gregor/memory.go).
const (
	memReturned = 32 << 20
	memSettle   = 45 * time.Second
)

// settle waits up to d for RSS to come back within slack of base and
// returns the last reading: what a burst leaves behind.
func (p *memProcess) settle(base, slack int64, d time.Duration) int64 {
	deadline := time.Now().Add(d)
	for {
		r := p.rss()
		if r <= base+slack || time.Now().After(deadline) {
			return r
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func memDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

func memEncode(req kmsg.Request, corr int32) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "mem"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// memRequest sends req on nc and returns its response body.
func memRequest(t *testing.T, nc net.Conn, req kmsg.Request, corr int32) []byte {
	t.Helper()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := nc.Write(memEncode(req, corr)); err != nil {
		t.Fatalf("write: %v", err)
	}
	frame, err := protocol.ReadFrame(nc, 1<<30, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != 18 && len(body) > 0 {
		body = body[1:] // the response header's empty tagged fields
	}
	return body
}

func memMiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// TestMemoryIdleConnections: 10,000 connections that each sent one
// ApiVersions and then wait cost under 100 MB of RSS in all.
func TestMemoryIdleConnections(t *testing.T) {
	const conns = 10000
	if soft, hard, err := nofileLimit(); err != nil || soft < conns+1000 {
		if err == nil && hard >= conns+1000 {
			setNofileSoft(hard)
		} else {
			t.Skipf("file descriptor limit %d is too low for %d connections (%v)", soft, conns, err)
		}
	}
	p := memGregor(t)
	base := p.baseline()
	ncs := make([]net.Conn, conns)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= conns {
					return
				}
				ncs[i] = memDial(t, p.addr)
				memRequest(t, ncs[i], kmsg.NewPtrApiVersionsRequest(), int32(i))
			}
		}()
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	held := p.rss()
	growth := held - base
	t.Logf("%d idle connections: RSS %s -> %s, growth %s (%d bytes a connection)", conns, memMiB(base), memMiB(held), memMiB(growth), growth/conns)
	for _, nc := range ncs {
		nc.Close()
	}
	after := p.settle(base, memReturned, memSettle)
	t.Logf("after closing them: RSS %s", memMiB(after))
	if after > base+memReturned {
		t.Errorf("RSS %s %v after the connections closed, want within %s of the baseline %s", memMiB(after), memSettle, memMiB(memReturned), memMiB(base))
	}
	if growth > memBudget {
		t.Fatalf("%d idle connections grew RSS by %s, budget %s", conns, memMiB(growth), memMiB(memBudget))
	}
}

// TestMemoryPartialFrames: ten connections each declare a 100 MB request
// and send 1 MiB of it, then stall: each holds what it sent, not what it
// declared. With queued.max.request.bytes=32 MiB, ten connections that
// each send all but the last byte of a 16 MiB request hold two requests'
// worth (32 MiB, about twice that in RSS: a frame's buffer doubles as it
// fills and the GC lets garbage reach the live heap); the others wait
// unread in the kernel.
func TestMemoryPartialFrames(t *testing.T) {
	t.Run("declared_not_sent", func(t *testing.T) {
		p := memGregor(t)
		base := p.baseline()
		var ncs []net.Conn
		for range 10 {
			nc := memDial(t, p.addr)
			ncs = append(ncs, nc)
			frame := make([]byte, 4+1<<20)
			binary.BigEndian.PutUint32(frame, 100<<20)
			if _, err := nc.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second)
		growth := p.rss() - base
		t.Logf("10 frames declared at 100 MiB with 1 MiB sent: RSS growth %s", memMiB(growth))
		for _, nc := range ncs {
			nc.Close()
		}
		if growth > memBudget {
			t.Fatalf("RSS grew by %s, budget %s", memMiB(growth), memMiB(memBudget))
		}
	})
	t.Run("all_but_last_byte_budgeted", func(t *testing.T) {
		p := memGregor(t, "--override", "queued.max.request.bytes=33554432")
		base := p.baseline()
		stop := make(chan struct{})
		peak := p.peakRSS(stop)
		var ncs []net.Conn
		for range 10 {
			nc := memDial(t, p.addr)
			ncs = append(ncs, nc)
			go func() {
				frame := make([]byte, 4+16<<20)
				binary.BigEndian.PutUint32(frame, 16<<20)
				nc.Write(frame[:len(frame)-1]) // blocks once the broker stops reading
			}()
		}
		time.Sleep(3 * time.Second)
		close(stop)
		growth := <-peak - base
		t.Logf("10 frames of 16 MiB sent but for the last byte, queued.max.request.bytes 32 MiB: peak RSS growth %s", memMiB(growth))
		for _, nc := range ncs {
			nc.Close()
		}
		after := p.settle(base, memReturned, memSettle)
		t.Logf("after the clients left: RSS %s (baseline %s)", memMiB(after), memMiB(base))
		if after > base+memReturned {
			t.Errorf("RSS %s %v after the clients left, want within %s of the baseline %s", memMiB(after), memSettle, memMiB(memReturned), memMiB(base))
		}
		if growth > memBudget {
			t.Fatalf("RSS grew by %s, budget %s", memMiB(growth), memMiB(memBudget))
		}
	})
}

// TestMemoryZstdBombs: 16 connections at once each produce a batch of a
// few KiB holding one 90 MiB record of zeros, zstd compressed three ways:
// as this broker's encoder writes it (8 MiB window), as franz-go does
// (64 KiB window), and as one single-segment frame (refused: its window is
// the whole 90 MiB). The broker's RSS grows by under 100 MB at its peak.
func TestMemoryZstdBombs(t *testing.T) {
	p := memGregor(t)
	base := p.baseline()
	raw := protocol.AppendRecord(nil, protocol.Record{Key: []byte("k"), Value: make([]byte, 90<<20)})
	franz, _ := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1))
	single, _ := zstd.NewWriter(nil, zstd.WithSingleSegment(true), zstd.WithEncoderConcurrency(1))
	own, err := protocol.Compress(protocol.CodecZstd, nil, raw)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{"own": own, "franz-go": franz.EncodeAll(raw, nil), "single-segment": single.EncodeAll(raw, nil)}
	raw = nil

	// The topic, made by a first produce with auto-creation.
	c := memDial(t, p.addr)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	meta.AllowAutoTopicCreation = true
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("bombs")
	meta.Topics = append(meta.Topics, mt)
	for i := range 20 {
		var resp kmsg.MetadataResponse
		resp.Version = 9
		if err := resp.ReadFrom(memRequest(t, c, meta, int32(i))); err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) > 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	c.Close()
	base = max(base, p.rss())

	for name, body := range bodies {
		batch := zstdBatch(body)
		stop := make(chan struct{})
		peak := p.peakRSS(stop)
		codes := make([]int16, 16)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nc := memDial(t, p.addr)
				defer nc.Close()
				req := kmsg.NewPtrProduceRequest()
				req.Version = 9
				req.Acks = 1
				req.TimeoutMillis = 30000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "bombs"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = batch
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				var resp kmsg.ProduceResponse
				resp.Version = 9
				if err := resp.ReadFrom(memRequest(t, nc, req, int32(i))); err != nil {
					t.Error(err)
					return
				}
				codes[i] = resp.Topics[0].Partitions[0].ErrorCode
			}()
		}
		wg.Wait()
		close(stop)
		growth := <-peak - base
		t.Logf("%s: 16 produces of a %d byte batch (90 MiB of zeros) in %v: error codes %v, peak RSS growth %s",
			name, len(batch), time.Since(start).Round(time.Millisecond), codes, memMiB(growth))
		want := int16(0)
		if name == "single-segment" {
			want = 2 // CORRUPT_MESSAGE: a 90 MiB window is refused
		}
		for _, code := range codes {
			if code != want {
				t.Errorf("%s: error code %d, want %d", name, code, want)
			}
		}
		if growth > memBudget {
			t.Errorf("%s: peak RSS grew by %s, budget %s", name, memMiB(growth), memMiB(memBudget))
		}
	}
	after := p.settle(base, memReturned, memSettle)
	t.Logf("after the bombs: RSS %s (baseline %s)", memMiB(after), memMiB(base))
	if after > base+memReturned {
		t.Errorf("RSS %s %v after the bombs, want within %s of the baseline %s", memMiB(after), memSettle, memMiB(memReturned), memMiB(base))
	}
}

// zstdBatch wraps a zstd records section holding one record in a batch
// header, as a producer without idempotence writes it.
func zstdBatch(body []byte) []byte {
	be := binary.BigEndian
	b := make([]byte, protocol.BatchHeaderSize, protocol.BatchHeaderSize+len(body))
	now := uint64(time.Now().UnixMilli())
	be.PutUint32(b[8:], uint32(len(b)+len(body)-12)) // batch length
	be.PutUint32(b[12:], 0xffffffff)                 // partition leader epoch
	b[16] = 2                                        // magic
	be.PutUint16(b[21:], uint16(protocol.CodecZstd))
	be.PutUint64(b[27:], now)                // first timestamp
	be.PutUint64(b[35:], now)                // max timestamp
	be.PutUint64(b[43:], 0xffffffffffffffff) // producer id
	be.PutUint16(b[51:], 0xffff)             // producer epoch
	be.PutUint32(b[53:], 0xffffffff)         // base sequence
	be.PutUint32(b[57:], 1)                  // records
	b = append(b, body...)
	be.PutUint32(b[17:], protocol.BatchCRC(b))
	return b
}
