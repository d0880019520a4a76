package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestServeConfigFile starts gregor from a Kafka 4 KRaft combined-mode
// server.properties, as Kafka users write it, and checks that its values
// are in force: num.partitions for auto-created topics, log.dirs, an
// unknown property that is only logged.
func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	port, cport := freePort(t), freePort(t)
	props := fmt.Sprintf(`# A Kafka 4 combined-mode node
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
inter.broker.listener.name=PLAINTEXT
log.dirs=%[3]s
num.partitions=3
auto.create.topics.enable=true
offsets.topic.replication.factor=1
some.plugin.setting=ignored
`, port, cport, filepath.Join(dir, "logs"))
	path := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startGregorArgs(t, "serve", "--config", path)
	if !strings.Contains(p.log(), "some.plugin.setting") {
		t.Errorf("unknown property not logged:\n%s", p.log())
	}
	cl := newClient(t, p.addr, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("auto"))
	if err := cl.ProduceSync(testContext(t, 30*time.Second), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tds, err := kadm.NewClient(cl).ListTopics(testContext(t, 30*time.Second), "auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tds["auto"].Partitions); n != 3 {
		t.Fatalf("auto-created topic has %d partitions, num.partitions=3", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "logs", "meta.properties")); err != nil {
		t.Fatalf("log.dirs not used: %v", err)
	}
}

// TestServeRejectsInvalidValue: an invalid value stops start-up with a
// message that names the property.
func TestServeRejectsInvalidValue(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(gregorBin, "serve", "--data-dir", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--override", "num.partitions=zero")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("gregor started with num.partitions=zero:\n%s", out)
	}
	if !strings.Contains(string(out), "num.partitions") {
		t.Fatalf("error does not name the property:\n%s", out)
	}
}
