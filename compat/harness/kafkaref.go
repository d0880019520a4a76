package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// KafkaRef is a running Apache Kafka reference (compat/kafka-ref): the
// 4.4.0 broker of compat/java/pom.xml in KRaft combined mode, started and
// stopped by kafka-ref.sh.
type KafkaRef struct {
	// Addr is the bootstrap address (host:port,… for several nodes).
	Addr string
	// Dir holds the nodes' configs, data and logs (node-N/server.log).
	Dir string

	script string
	nodes  int
}

// StartKafkaRef runs script (compat/kafka-ref/kafka-ref.sh) to start a
// reference of nodes nodes in dir with the broker properties props, and
// waits until it serves. The nodes are stopped when this process exits,
// even if Close is never called (the script's --owner watcher).
func StartKafkaRef(ctx context.Context, script, dir string, nodes int, props map[string]string) (*KafkaRef, error) {
	args := []string{"start", "--nodes", strconv.Itoa(nodes), "--dir", dir, "--owner", strconv.Itoa(os.Getpid())}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		args = append(args, "--set", k+"="+props[k])
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("start kafka reference in %s: %w\n%s", dir, err, stderr.String())
	}
	addr := strings.TrimSpace(stdout.String())
	if addr == "" {
		return nil, fmt.Errorf("start kafka reference in %s: no bootstrap address printed\n%s", dir, stderr.String())
	}
	return &KafkaRef{Addr: addr, Dir: dir, script: script, nodes: nodes}, nil
}

// Close stops the reference's nodes.
func (k *KafkaRef) Close() error {
	out, err := exec.Command(k.script, "stop", "--nodes", strconv.Itoa(k.nodes), "--dir", k.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("stop kafka reference in %s: %w\n%s", k.Dir, err, out)
	}
	return nil
}

// Pid is the process id of node i's JVM (1-based), from the pid file
// kafka-ref.sh keeps in the node's directory.
func (k *KafkaRef) Pid(i int) (int, error) {
	data, err := os.ReadFile(filepath.Join(k.Dir, fmt.Sprintf("node-%d", i), "pid"))
	if err != nil {
		return 0, fmt.Errorf("kafka reference node %d pid: %w", i, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("kafka reference node %d pid: %w", i, err)
	}
	return pid, nil
}

// Kill SIGKILLs the reference's nodes (a crash: no clean shutdown),
// keeping their data; Resume starts them again.
func (k *KafkaRef) Kill() error {
	out, err := exec.Command(k.script, "kill", "--nodes", strconv.Itoa(k.nodes), "--dir", k.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kill kafka reference in %s: %w\n%s", k.Dir, err, out)
	}
	return nil
}

// Resume starts killed nodes again on their data and ports and waits
// until they serve.
func (k *KafkaRef) Resume(ctx context.Context) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.script, "resume", "--nodes", strconv.Itoa(k.nodes), "--dir", k.Dir)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("resume kafka reference in %s: %w\n%s", k.Dir, err, stderr.String())
	}
	return nil
}

// Tail returns the last n bytes of the first node's server.log, for
// failure reports.
func (k *KafkaRef) Tail(n int) string { return tail(filepath.Join(k.Dir, "node-1", "server.log"), n) }

// KafkaRelease reads the Apache Kafka release the reference runs from the
// <kafka.version> property of pom (compat/java/pom.xml).
func KafkaRelease(pom string) (string, error) {
	data, err := os.ReadFile(pom)
	if err != nil {
		return "", fmt.Errorf("kafka release: %w", err)
	}
	m := kafkaVersionRE.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("kafka release: no <kafka.version> in %s", pom)
	}
	return string(m[1]), nil
}

var kafkaVersionRE = regexp.MustCompile(`<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>`)
