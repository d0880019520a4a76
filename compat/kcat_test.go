package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/brokertest"
)

// needTool finds a client tool. CI installs every one (make compat-deps),
// so there a missing tool fails the test; elsewhere it skips.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed: run make compat-deps", name)
		}
		t.Skipf("%s is not installed: run make compat-deps", name)
	}
	return p
}

func runKcat(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(needTool(t, "kcat"), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestKcatMetadata(t *testing.T) {
	addr := brokertest.Start(t)
	// Producing to a new topic auto-creates it.
	runKcat(t, []byte("k:v\n"), "-b", addr, "-P", "-t", "listed", "-K:")
	out := runKcat(t, nil, "-b", addr, "-L", "-J")
	var md struct {
		Brokers []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(out, &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].ID != 1 || md.Brokers[0].Name != addr {
		t.Fatalf("brokers %+v, want node 1 at %s", md.Brokers, addr)
	}
	found := false
	for _, tp := range md.Topics {
		if tp.Topic == "listed" {
			found = len(tp.Partitions) == 1 && tp.Partitions[0].Leader == 1
		}
	}
	if !found {
		t.Fatalf("topic not listed as one partition led by 1: %s", out)
	}
}

// TestKcatProduceConsume produces 1,000 keyed records with a header
// through librdkafka with each codec, and reads them back byte-exact.
func TestKcatProduceConsume(t *testing.T) {
	addr := brokertest.Start(t)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "kcat-" + codec
			var in bytes.Buffer
			var want []string
			for i := 0; i < 1000; i++ {
				k, v := fmt.Sprintf("key-%d", i), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%37))
				fmt.Fprintf(&in, "%s\t%s\n", k, v)
				want = append(want, fmt.Sprintf("%s|%s|codec=%s|%d", k, v, codec, i))
			}
			runKcat(t, in.Bytes(), "-b", addr, "-P", "-t", topic, "-p", "0", "-K", "\t", "-z", codec, "-H", "codec="+codec,
				"-X", "linger.ms=5")
			out := runKcat(t, nil, "-b", addr, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k|%s|%h|%o\n")
			got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(got) != len(want) {
				t.Fatalf("consumed %d records, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("record %d: %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
}
