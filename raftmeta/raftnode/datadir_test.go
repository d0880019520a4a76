package raftnode

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// testdata/v1-datadir is a metadata log dir written by the code before
// raftmeta was split into packages (commit 8bd3c9f): a snapshot at offset
// 14 and entries after it, for a single voter of cluster "test-cluster"
// with one broker, topics created, configured, grown and deleted, and
// producer IDs handed out. testdata/v1-image.bin is that node's final
// image, as EncodeImage wrote it. A node started on a copy of the dir
// replays both into the same image: data dirs of that version still start.
func TestStartOnV1DataDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/v1-datadir")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/v1-image.bin")
	if err != nil {
		t.Fatal(err)
	}
	want, err := image.DecodeImage(b)
	if err != nil {
		t.Fatalf("decode the old image: %v", err)
	}
	names := dirNames(t, filepath.Join(dir, metadataDirName))
	if len(names) != 2 || filepath.Ext(names[0]) != snapSuffix || filepath.Ext(names[1]) != segmentSuffix {
		t.Fatalf("fixture holds %v, want a snapshot and a segment", names)
	}

	n := startNode(t, dir, func(c *Config) { c.ClusterID = "" })
	got := n.Image()
	if got.ClusterID != "test-cluster" || got.Offset() < want.Offset() {
		t.Fatalf("started at cluster %q offset %d, want %q at %d or later", got.ClusterID, got.Offset(), want.ClusterID, want.Offset())
	}
	if !reflect.DeepEqual(got.Records(), want.Records()) {
		t.Fatalf("image after start differs:\n got %v\nwant %v", got.Records(), want.Records())
	}
	if _, ok := got.Topic("topic.05"); ok {
		t.Fatal("a topic deleted after the snapshot is back")
	}
	if tp, ok := got.Topic("topic.07"); !ok || len(tp.Partitions) != 5 {
		t.Fatal("partitions added after the snapshot are lost")
	}
	// The log keeps working where the old code left it.
	createTopic(t, n, "after-upgrade", 1)
}
