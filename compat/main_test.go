package compat

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/compat/harness"
)

var (
	flagResults  = flag.String("compat.results", "", "write the (client, scenario) results to this file (tab-separated)")
	flagUpdate   = flag.Bool("compat.update", false, "rewrite expected.txt with this run's outcomes")
	flagVersions = flag.String("compat.versions", "", "write the API versions Gregor advertises to this file")
	flagKafka    = flag.Bool("compat.kafka", true, "also run every scenario against the Apache Kafka reference (compat/kafka-ref) and compare (not under -short)")
	flagKafkaVer = flag.String("compat.kafka-versions", "", "write the API versions the Kafka reference advertises to this file")
)

// gregorBin is the gregor binary built once for the whole run.
var gregorBin string

// workDir holds the binary and every gregor's data; removed at the end.
var workDir string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	workDir, err = os.MkdirTemp("", "gregor-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	if bin := os.Getenv("GREGOR_BIN"); bin != "" {
		gregorBin = bin
	} else {
		root, _ := filepath.Abs("..")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		gregorBin, err = harness.Build(ctx, root, workDir, raceEnabled)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	code := m.Run()
	stopKafkaRefs()
	return code
}

// startGregor runs a gregor process for the test, stopped at its end; a
// data race or panic in the broker fails the test.
func startGregor(t testing.TB, props map[string]string) *harness.Gregor {
	t.Helper()
	g, err := harness.Start(gregorBin, workDir, harness.Options{Props: props})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("gregor at %s: %v", g.Addr, err)
		}
	})
	return g
}

// useKafka reports whether this run compares with the Kafka reference:
// make compat does; go test -short (make test) does not start a JVM.
func useKafka() bool { return *flagKafka && !testing.Short() }

// kafkaRefs are the run's two Kafka references, the counterparts of each
// client's pair of gregors: one with Kafka's defaults, one with
// auto.create.topics.enable=false (a static broker config, so a second
// broker rather than a per-scenario setting). Every client shares them;
// scenarios name their topics and groups after the client.
type kafkaRefs struct {
	main, strict *harness.KafkaRef
}

var (
	kafkaOnce  sync.Once
	kafkaReady = make(chan struct{})
	kafkaRes   kafkaRefs
	kafkaErr   error
)

// startKafkaRefs starts both references in the background, once per run;
// kafkaReference waits for them. Starting early lets the JVMs boot while
// the gregor half of the run goes on.
func startKafkaRefs() {
	kafkaOnce.Do(func() {
		go func() {
			defer close(kafkaReady)
			script, _ := filepath.Abs("kafka-ref/kafka-ref.sh")
			ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			var errMain, errStrict error
			wg.Add(2)
			go func() {
				defer wg.Done()
				kafkaRes.main, errMain = startKafkaRef(ctx, script, "kafka-main", nil)
			}()
			go func() {
				defer wg.Done()
				kafkaRes.strict, errStrict = startKafkaRef(ctx, script, "kafka-strict", map[string]string{"auto.create.topics.enable": "false"})
			}()
			wg.Wait()
			kafkaErr = errors.Join(errMain, errStrict)
			if kafkaErr == nil {
				kafkaErr = warmKafka(ctx, kafkaRes.main.Addr)
			}
		}()
	})
}

// startKafkaRef starts one single-node reference in workDir/name, with
// a second try: on a loaded machine a JVM has been seen to vanish while
// booting, and one lost boot should not cost the run its reference.
func startKafkaRef(ctx context.Context, script, name string, props map[string]string) (*harness.KafkaRef, error) {
	var err error
	for attempt := 1; attempt <= 2 && ctx.Err() == nil; attempt++ {
		if attempt > 1 {
			fmt.Fprintf(os.Stderr, "kafka reference %s did not start, trying again: %v\n", name, err)
		}
		// Each try has its own deadline: a start that hangs (seen once,
		// at no step the script's own timeouts cover) must leave the
		// second try its time.
		try, cancel := context.WithTimeout(ctx, 4*time.Minute)
		var k *harness.KafkaRef
		k, err = harness.StartKafkaRef(try, script, filepath.Join(workDir, name), 1, props)
		cancel()
		if err == nil {
			return k, nil
		}
	}
	return nil, err
}

// kafkaReference returns the running references, starting them if the
// run has not yet. A reference that does not start skips the test with a
// loud line (the machine, not gregor, failed), unless COMPAT_REQUIRE_KAFKA
// is set.
func kafkaReference(t testing.TB) kafkaRefs {
	t.Helper()
	startKafkaRefs()
	<-kafkaReady
	if kafkaErr != nil {
		if os.Getenv("COMPAT_REQUIRE_KAFKA") != "" {
			t.Fatal(kafkaErr)
		}
		kafkaMissing.Do(func() {
			fmt.Fprintf(os.Stderr, "compat: THE KAFKA REFERENCE DID NOT START; every comparison with Kafka in this run is skipped (gregor is still judged by expected.txt): %v\n", kafkaErr)
		})
		t.Skipf("the Kafka reference did not start (COMPAT_REQUIRE_KAFKA=1 fails instead): %v", kafkaErr)
	}
	return kafkaRes
}

// kafkaMissing says once per run that the reference is missing.
var kafkaMissing sync.Once

// stopKafkaRefs stops whatever references the run started and, when the
// run writes results, keeps each one's server.log beside them
// (kafka-main.log, kafka-strict.log), since the data dirs go.
func stopKafkaRefs() {
	kafkaOnce.Do(func() { close(kafkaReady) }) // never started: nothing to wait for
	// A start under way ends within its 9-minute context.
	<-kafkaReady
	for name, k := range map[string]*harness.KafkaRef{"kafka-main": kafkaRes.main, "kafka-strict": kafkaRes.strict} {
		if k == nil {
			continue
		}
		if err := k.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		if *flagResults != "" {
			log, err := os.ReadFile(filepath.Join(k.Dir, "node-1", "server.log"))
			if err == nil {
				err = os.WriteFile(filepath.Join(filepath.Dir(*flagResults), name+".log"), log, 0o644)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "keep the kafka reference's log:", err)
			}
		}
	}
}

// warmKafka has the fresh reference create its internal topics
// (__consumer_offsets and __transaction_state, 50 partitions each by
// Kafka's defaults) before any client asks for a coordinator: a
// long-running cluster has them, and creating them inside the first
// scenario's deadline would time the machine, not the client. It asks
// FindCoordinator for both kinds until each answers without error.
func warmKafka(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return fmt.Errorf("warm kafka reference: %w", err)
	}
	defer cl.Close()
	for _, typ := range []int8{0, 1} { // group, transaction
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = typ
		req.CoordinatorKeys = []string{"gregor-compat-warm-up"}
		err := waitFor(ctx, fmt.Sprintf("kafka reference: coordinator of type %d", typ), func() error {
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			for _, c := range resp.Coordinators {
				if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("warm kafka reference: %w", err)
		}
	}
	return nil
}
