package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

// scenario drives a single-node controller from a script.
type scenario struct {
	t    *testing.T
	dir  string
	node *testNode
	ctrl *Controller
	ids  atomic.Uint32
}

func (s *scenario) start() {
	n, err := startWith(nodeConfig{Config: raftnode.Config{NodeID: 1, Dir: s.dir, Logger: discardLogger(), ClusterID: "scenario"}})
	if err != nil {
		s.t.Fatal(err)
	}
	s.node = n
	s.ctrl = n.Controller()
	// Deterministic topic IDs make replica placement reproducible.
	s.ctrl.newID = func() [16]byte {
		k := s.ids.Add(1)
		return [16]byte{0: 0x10, 6: 0x40, 8: 0x80, 14: byte(k >> 8), 15: byte(k)}
	}
}

func (s *scenario) stop() {
	if err := s.node.Close(); err != nil {
		s.t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return "error: " + err.Error()
	}
	if m := ErrorMessage(err); m != nil {
		return ke.Message + ": " + *m
	}
	return ke.Message
}

func parseInt32s(s string) []int32 {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			panic(err)
		}
		out = append(out, int32(v))
	}
	if out == nil {
		out = []int32{}
	}
	return out
}

func atoi(s string, def int) int {
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return v
}

func (s *scenario) run(c *scriptCase) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out strings.Builder
	switch c.cmd {
	case "register-broker":
		reg := image.RegisterBrokerRecord{BrokerID: int32(atoi(c.args["id"], 0))}
		inc := atoi(c.args["incarnation"], int(reg.BrokerID))
		reg.IncarnationID[15] = byte(inc)
		epoch, err := s.ctrl.RegisterBroker(ctx, reg)
		if err != nil {
			return errString(err)
		}
		return fmt.Sprintf("epoch=%d", epoch)
	case "fence-broker":
		id := int32(atoi(c.args["id"], 0))
		b, ok := s.node.Image().Broker(id)
		if !ok {
			return "no such broker"
		}
		_, err := s.node.Propose(ctx, &image.BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: b.Epoch, Fenced: true})
		return errString(err)
	case "create-topics":
		var reqs []CreateTopic
		for _, line := range c.input {
			f := strings.Fields(line)
			name := f[0]
			if name == "''" {
				name = ""
			}
			args := parseArgs(f[1:])
			ct := CreateTopic{
				Name:              name,
				NumPartitions:     int32(atoi(args["partitions"], 1)),
				ReplicationFactor: int16(atoi(args["rf"], 1)),
			}
			if v, ok := args["configs"]; ok {
				ct.Configs = map[string]string{}
				for _, kv := range strings.Split(v, ",") {
					k, v, _ := strings.Cut(kv, ":")
					ct.Configs[k] = v
				}
			}
			if v, ok := args["assign"]; ok {
				ct.Assignments = map[int32][]int32{}
				for _, pa := range strings.Split(v, "/") {
					p, rs, _ := strings.Cut(pa, ":")
					ct.Assignments[int32(atoi(p, 0))] = parseInt32s(rs)
				}
			}
			reqs = append(reqs, ct)
		}
		for _, r := range s.ctrl.CreateTopics(ctx, reqs, c.has("validate-only")) {
			if r.Err == nil {
				if r.ID == ([16]byte{}) {
					s.t.Errorf("topic %s created with the zero ID", r.Name)
				}
				fmt.Fprintf(&out, "%s: ok partitions=%d rf=%d\n", r.Name, r.NumPartitions, r.ReplicationFactor)
			} else {
				fmt.Fprintf(&out, "%s: %s\n", r.Name, errString(r.Err))
			}
		}
	case "delete-topics":
		var names []string
		var ids [][16]byte
		for _, line := range c.input {
			k, v, _ := strings.Cut(line, "=")
			switch {
			case k == "name":
				names = append(names, v)
			case v == "zero":
				ids = append(ids, [16]byte{})
			case v == "unknown":
				ids = append(ids, [16]byte{0xff})
			default:
				t, ok := s.node.Image().Topic(v)
				if !ok {
					return "no topic " + v
				}
				ids = append(ids, t.ID)
			}
		}
		for _, r := range s.ctrl.DeleteTopics(ctx, names, ids) {
			name := r.Name
			if name == "" {
				name = "<unknown>"
			}
			fmt.Fprintf(&out, "%s: %s\n", name, errString(r.Err))
		}
	case "create-partitions":
		var reqs []CreatePartitions
		for _, line := range c.input {
			f := strings.Fields(line)
			args := parseArgs(f[1:])
			r := CreatePartitions{Topic: f[0], Count: int32(atoi(args["count"], 0))}
			if v, ok := args["assign"]; ok {
				for _, rs := range strings.Split(v, "/") {
					r.Assignments = append(r.Assignments, parseInt32s(rs))
				}
			}
			reqs = append(reqs, r)
		}
		for _, r := range s.ctrl.CreatePartitions(ctx, reqs, c.has("validate-only")) {
			fmt.Fprintf(&out, "%s: %s\n", r.Topic, errString(r.Err))
		}
	case "alter-configs":
		typ := map[string]int8{"topic": image.ResourceTopic, "broker": image.ResourceBroker}[c.args["type"]]
		if typ == 0 {
			typ = int8(atoi(c.args["type"], 0))
		}
		set := map[string]*string{}
		for _, line := range c.input {
			if k, ok := strings.CutPrefix(line, "-"); ok {
				set[k] = nil
			} else {
				k, v, _ := strings.Cut(line, "=")
				set[k] = &v
			}
		}
		return errString(s.ctrl.AlterConfigs(ctx, typ, c.args["name"], set, c.has("validate-only")))
	case "allocate-pids":
		first, count, err := s.ctrl.AllocateProducerIDs(ctx, int32(atoi(c.args["broker"], 0)))
		if err != nil {
			return errString(err)
		}
		return fmt.Sprintf("first=%d count=%d", first, count)
	case "restart":
		s.stop()
		s.start()
		return "ok"
	case "describe":
		return describeImage(s.node.Image())
	default:
		s.t.Fatalf("line %d: unknown command %q", c.line, c.cmd)
	}
	return out.String()
}

func describeImage(img *image.Image) string {
	var out strings.Builder
	for _, b := range img.Brokers() {
		fmt.Fprintf(&out, "broker %d epoch=%d fenced=%v\n", b.ID, b.Epoch, b.Fenced)
	}
	for _, name := range []string{"", "1", "2", "3"} {
		if cfg := img.BrokerConfigs(name); len(cfg) > 0 {
			fmt.Fprintf(&out, "broker-config %q %s\n", name, configString(cfg))
		}
	}
	for _, t := range img.Topics() {
		fmt.Fprintf(&out, "topic %s partitions=%d configs=%s\n", t.Name, len(t.Partitions), configString(t.Configs))
		for _, p := range t.Partitions {
			fmt.Fprintf(&out, "  %d replicas=%v isr=%v leader=%d epochs=%d/%d\n", p.Partition, p.Replicas, p.ISR, p.Leader, p.LeaderEpoch, p.PartitionEpoch)
		}
	}
	if img.NextProducerID() > 0 {
		fmt.Fprintf(&out, "next-producer-id %d\n", img.NextProducerID())
	}
	return out.String()
}

func configString(cfg map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		parts = append(parts, k+"="+cfg[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestControllerScripts(t *testing.T) {
	for _, name := range []string{"create_topics", "delete_topics", "partitions_configs", "brokers"} {
		t.Run(name, func(t *testing.T) {
			s := &scenario{t: t, dir: t.TempDir()}
			s.start()
			defer s.stop()
			runScript(t, "testdata/"+name+".txt", s.run)
		})
	}
}

func TestConcurrentCreateSameTopic(t *testing.T) {
	_, c := startController(t, t.TempDir())
	const callers = 16
	var wg sync.WaitGroup
	results := make([]CreateTopicResult, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.CreateTopics(ctxT(t), []CreateTopic{{Name: "same", NumPartitions: 1, ReplicationFactor: 1}}, false)[0]
		}()
	}
	wg.Wait()
	ok := 0
	for _, r := range results {
		switch {
		case r.Err == nil:
			ok++
		case !errors.Is(r.Err, kerr.TopicAlreadyExists):
			t.Fatalf("unexpected error %v", r.Err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d creates succeeded, want exactly 1", ok, callers)
	}
}

func TestControllerContext(t *testing.T) {
	n, c := startController(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := c.CreateTopics(ctx, []CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1}}, false)
	if !errors.Is(res[0].Err, kerr.RequestTimedOut) {
		t.Fatalf("canceled CreateTopics: %v", res[0].Err)
	}
	if _, ok := n.Image().Topic("a"); ok {
		t.Fatal("canceled request created its topic")
	}
	n.Close()
	if _, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 2}); !errors.Is(err, kerr.NotController) {
		t.Fatalf("RegisterBroker after Close: %v", err)
	}
}

func TestErrorHelpers(t *testing.T) {
	err := apiError(kerr.InvalidPartitions, "bad %d", 3)
	if ErrorCode(err) != kerr.InvalidPartitions.Code || *ErrorMessage(err) != "bad 3" || !errors.Is(err, kerr.InvalidPartitions) {
		t.Fatalf("code %d message %v", ErrorCode(err), ErrorMessage(err))
	}
	if ErrorCode(nil) != 0 || ErrorMessage(nil) != nil {
		t.Fatal("nil error has a code or message")
	}
	if ErrorCode(errors.New("x")) != kerr.UnknownServerError.Code {
		t.Fatal("plain error is not UNKNOWN_SERVER_ERROR")
	}
	if ErrorCode(fmt.Errorf("wrapped: %w", kerr.NotController)) != kerr.NotController.Code {
		t.Fatal("wrapped kerr lost")
	}
}

func BenchmarkProposeCreateTopic(b *testing.B) {
	_, c := startController(b, b.TempDir())
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := c.CreateTopics(ctx, []CreateTopic{{Name: "t" + strconv.Itoa(i), NumPartitions: 3, ReplicationFactor: 1}}, false)
		if res[0].Err != nil {
			b.Fatal(res[0].Err)
		}
	}
}

func BenchmarkProposeParallel(b *testing.B) {
	n := startNode(b, b.TempDir())
	var k atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := n.Propose(context.Background(), &image.FeatureLevelRecord{Name: "f", Level: int16(k.Add(1)%100 + 1)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// A controller whose node is not the active controller (one of three
// voters that never hears from the others) answers NOT_CONTROLLER.
func TestControllerNotActive(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *nodeConfig) {
		c.Voters = []uint64{1, 2, 3}
		c.Ticks = make(chan time.Time)
	})
	c := n.Controller()
	res := c.CreateTopics(ctxT(t), []CreateTopic{{Name: "a", NumPartitions: 1, ReplicationFactor: 1}}, false)
	if !errors.Is(res[0].Err, kerr.NotController) {
		t.Fatalf("CreateTopics: %v", res[0].Err)
	}
	if _, err := c.RegisterBroker(ctxT(t), image.RegisterBrokerRecord{BrokerID: 1}); !errors.Is(err, kerr.NotController) {
		t.Fatalf("RegisterBroker: %v", err)
	}
}
