package broker

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// TestResolveClusterID: a single node formats itself with a new id; a
// node of a multi-node quorum with unformatted dirs is refused with the
// advice; a formatted dir's id wins and a configured cluster.id that
// differs from it is refused; Format writes every log dir and the
// metadata dir once each and skips formatted ones only when asked.
func TestResolveClusterID(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, filepath.Join(dir, "a"))
	if id, err := resolveClusterID(vfs.Default, cfg); err != nil || len(id) != 22 {
		t.Fatalf("single node: %q %v", id, err)
	}

	multi := *cfg
	multi.ControllerQuorumVoters = map[int32]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}
	if _, err := resolveClusterID(vfs.Default, &multi); err == nil || !strings.Contains(err.Error(), FixClusterIDAdvice) {
		t.Fatalf("unformatted node of a quorum: %v", err)
	}

	id := NewClusterID()
	multi.LogDirs = []string{filepath.Join(dir, "b"), filepath.Join(dir, "c")}
	multi.MetadataLogDir = filepath.Join(dir, "meta")
	res, err := Format(nil, &multi, id, false, time.Now())
	if err != nil || len(res) != 3 {
		t.Fatalf("format: %+v %v", res, err)
	}
	if got, err := resolveClusterID(vfs.Default, &multi); err != nil || got != id {
		t.Fatalf("formatted quorum node: %q %v, want %q", got, err, id)
	}
	if _, err := Format(nil, &multi, id, false, time.Now()); err == nil || !strings.Contains(err.Error(), "--ignore-formatted") {
		t.Errorf("format twice: %v", err)
	}
	if res, err := Format(nil, &multi, id, true, time.Now()); err != nil || len(res) != 3 || !res[0].Skipped {
		t.Errorf("format --ignore-formatted: %+v %v", res, err)
	}
	other := multi
	other.ClusterID = NewClusterID()
	if _, err := resolveClusterID(vfs.Default, &other); err == nil || !strings.Contains(err.Error(), "is formatted for cluster "+id) {
		t.Errorf("configured cluster.id against a formatted dir: %v", err)
	}
	if _, err := Format(nil, &multi, "not-an-id", false, time.Now()); err == nil {
		t.Error("format accepted a malformed cluster id")
	}
}
