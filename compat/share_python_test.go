package compat

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/compat/harness"
)

// TestConfluentShareConsumer runs share.consume, the Java client's share
// group scenario, through librdkafka's ShareConsumer (KIP-932) in
// confluent-kafka 2.16.1 (python/confluent_scenarios.py): against a
// gregor and, with the Kafka reference, against Kafka 4.4, where it must
// pass too. Debian's confluent-kafka 1.7 has no share consumer; the
// harness's shared scenario list does not have this one, so it runs here
// as TestJava runs the Java client's extras.
func TestConfluentShareConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("the share consumer scenario runs in the full suite only")
	}
	if err := exec.Command(pyVenv, "-c", "import confluent_kafka; confluent_kafka.ShareConsumer").Run(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s has no confluent_kafka.ShareConsumer (%v): run make compat-deps", pyVenv, err)
		}
		t.Fatal(err)
	}
	targets := []string{harness.TargetGregor}
	if useKafka() {
		startKafkaRefs()
		targets = append(targets, harness.TargetKafka)
	}
	for _, tg := range targets {
		t.Run(tg, func(t *testing.T) {
			e := &env{client: "confluent-kafka-python-2", target: tg}
			logTail := func(int) string { return "" }
			switch tg {
			case harness.TargetKafka:
				refs := kafkaReference(t)
				e.addr, e.strict, logTail = refs.main.Addr, refs.strict.Addr, refs.main.Tail
			default:
				main := startGregor(t, nil)
				strict := startGregor(t, map[string]string{"auto.create.topics.enable": "false"})
				e.addr, e.strict, logTail = main.Addr, strict.Addr, main.Tail
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			note, err := runScript(ctx, e, []string{pyVenv, "python/confluent_scenarios.py"}, "share.consume")
			if err != nil {
				t.Fatalf("share.consume on %s: %v\nbroker log tail:\n%s", tg, err, logTail(1500))
			}
			t.Logf("RESULT %s confluent-kafka-python-2 share.consume pass %.1fs %s", tg, time.Since(start).Seconds(), note)
		})
	}
}
