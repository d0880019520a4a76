package storage

import (
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// TestReplicationOffsetCheckpoint: the high watermark the broker sets is
// written to replication-offset-checkpoint in Kafka's format and read back
// at the next start, capped at the log end.
func TestReplicationOffsetCheckpoint(t *testing.T) {
	fsys := vfs.NewMem()
	m := openTestManager(t, fsys)
	l := createTestLog(t, m, DefaultLogConfig())
	for i := 0; i < 3; i++ {
		mustAppend(t, l, batchOf(2, 1, 10), 0)
	}
	if _, ok := l.CheckpointedHighWatermark(); ok {
		t.Fatal("a new log has a checkpointed high watermark")
	}
	l.SetHighWatermark(4)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := vfs.ReadFile(fsys, m.dirs[0]+"/"+replicationOffsetFile)
	if err != nil || !strings.HasPrefix(string(data), "0\n1\n") || !strings.Contains(string(data), " 4\n") {
		t.Fatalf("replication-offset-checkpoint %q %v", data, err)
	}
	m2 := openTestManager(t, fsys)
	defer m2.Close()
	for _, l2 := range m2.Logs() {
		if hw, ok := l2.CheckpointedHighWatermark(); !ok || hw != 4 {
			t.Fatalf("checkpointed high watermark %d %v, want 4", hw, ok)
		}
	}
}
