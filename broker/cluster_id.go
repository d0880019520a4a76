package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// FixClusterIDAdvice says how to give every node of a cluster the same
// cluster id, for the errors that find they do not share one.
const FixClusterIDAdvice = "run `gregor random-uuid` once, then `gregor format --cluster-id <that id> --config server.properties` on each node " +
	"(or set cluster.id to that id in every node's server.properties)"

// resolveClusterID picks the cluster id: the one the formatted log dirs
// hold in meta.properties (which a configured cluster.id must match), else
// the configured one, else, for a single-node cluster only, a new random
// one (an empty data dir is formatted on first start, with no separate
// step). The nodes of a multi-node quorum must share one id, so a node of
// one whose dirs are not formatted stops here and says how to format them.
func resolveClusterID(fsys vfs.FS, cfg *config.Broker) (string, error) {
	formatted, formattedDir := "", ""
	for _, dir := range formatDirs(cfg) {
		data, err := vfs.ReadFile(fsys, filepath.Join(dir, "meta.properties"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("read meta.properties in %s: %w", dir, err)
		}
		props, err := config.ReadProperties(bytes.NewReader(data))
		if err != nil {
			return "", fmt.Errorf("parse meta.properties in %s: %w", dir, err)
		}
		id := props["cluster.id"]
		if id == "" {
			continue
		}
		if formatted != "" && id != formatted {
			return "", fmt.Errorf("log dir %s is formatted for cluster %s but %s for cluster %s: a node's dirs belong to one cluster; %s",
				formattedDir, formatted, dir, id, FixClusterIDAdvice)
		}
		formatted, formattedDir = id, dir
	}
	switch {
	case formatted != "" && cfg.ClusterID != "" && cfg.ClusterID != formatted:
		return "", fmt.Errorf("cluster.id is %s but log dir %s is formatted for cluster %s; %s",
			cfg.ClusterID, formattedDir, formatted, FixClusterIDAdvice)
	case formatted != "":
		return formatted, nil
	case cfg.ClusterID != "":
		return cfg.ClusterID, nil
	case !singleNode(cfg):
		return "", fmt.Errorf("log dirs %s are not formatted and node %d is one of a multi-node quorum (controller.quorum.voters %s), "+
			"whose nodes must share one cluster id: %s", strings.Join(formatDirs(cfg), ","), cfg.NodeID, votersString(cfg), FixClusterIDAdvice)
	}
	return NewClusterID(), nil
}

// singleNode reports whether cfg describes a cluster of this node alone:
// no other voter and no bootstrap controllers to learn them from.
func singleNode(cfg *config.Broker) bool {
	if len(cfg.ControllerQuorumBootstrapServers) > 0 {
		return false
	}
	for id := range cfg.ControllerQuorumVoters {
		if id != cfg.NodeID {
			return false
		}
	}
	return true
}

func votersString(cfg *config.Broker) string {
	var parts []string
	for id, addr := range cfg.ControllerQuorumVoters {
		parts = append(parts, fmt.Sprintf("%d@%s", id, addr))
	}
	parts = append(parts, cfg.ControllerQuorumBootstrapServers...)
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// formatDirs are the dirs that hold meta.properties: the log dirs and the
// metadata log dir, once each.
func formatDirs(cfg *config.Broker) []string {
	var dirs []string
	for _, d := range append(slices.Clone(cfg.LogDirs), cfg.MetadataDir()) {
		d = filepath.Clean(d)
		if d != "." && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// FormatResult is what Format did to one dir.
type FormatResult struct {
	Dir string
	// Skipped is set for a dir that was formatted already (left as it is
	// under ignoreFormatted).
	Skipped bool
}

// Format writes meta.properties for clusterID into every log dir and the
// metadata log dir of cfg, as kafka-storage format does. A dir formatted
// already is an error unless ignoreFormatted, when it is skipped (its
// cluster id must then be clusterID). Nothing is written if any dir would
// fail this check.
func Format(fsys vfs.FS, cfg *config.Broker, clusterID string, ignoreFormatted bool, now time.Time) ([]FormatResult, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	if err := checkClusterIDForm(clusterID); err != nil {
		return nil, err
	}
	dirs := formatDirs(cfg)
	if len(dirs) == 0 {
		return nil, errors.New("format: log.dirs is empty")
	}
	// Check every dir before writing any, so that a refusal leaves the
	// node as it was.
	for _, d := range dirs {
		data, err := vfs.ReadFile(fsys, filepath.Join(d, "meta.properties"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("format: read meta.properties in %s: %w", d, err)
		}
		if !ignoreFormatted {
			return nil, fmt.Errorf("log directory %s is already formatted; use --ignore-formatted to ignore this directory and format the others", d)
		}
		props, err := config.ReadProperties(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("format: parse meta.properties in %s: %w", d, err)
		}
		if id := props["cluster.id"]; id != clusterID {
			return nil, fmt.Errorf("log directory %s is formatted for cluster %s, not %s", d, id, clusterID)
		}
	}
	var out []FormatResult
	for _, d := range dirs {
		_, err := storage.FormatDir(fsys, d, clusterID, cfg.NodeID, now)
		if errors.Is(err, storage.ErrFormatted) {
			out = append(out, FormatResult{Dir: d, Skipped: true})
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, FormatResult{Dir: d})
	}
	return out, nil
}

// checkClusterIDForm accepts a cluster id in the form kafka-storage
// random-uuid prints: 16 bytes in URL-safe base64 without padding.
func checkClusterIDForm(id string) error {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) != 16 {
		return fmt.Errorf("cluster id %q is not a UUID in URL-safe base64 without padding (22 characters, as `gregor random-uuid` prints)", id)
	}
	return nil
}

// NewClusterID returns a random cluster id in Kafka's form: a UUID in
// URL-safe base64 without padding (22 characters), as kafka-storage
// random-uuid prints.
func NewClusterID() string {
	id := newUUID()
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// newUUID returns a random version 4 UUID.
func newUUID() [16]byte {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// errOtherClusters marks the error of a node whose quorum cannot form
// because its voters belong to other clusters.
var errOtherClusters = errors.New("cannot form a quorum")

// watchOtherClusters returns ctx canceled, with the cause from
// quorumOfOtherClusters, as soon as the voters found to belong to other
// clusters leave this node no majority; stop ends the watch.
func (s *Server) watchOtherClusters(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if s.quorum == nil {
		return ctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if err := s.quorumOfOtherClusters(); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// quorumOfOtherClusters returns an error when the voters found to belong
// to other clusters leave this node no majority: a quorum that can never
// form, which waiting would only hide (each node formatted with its own
// cluster id).
func (s *Server) quorumOfOtherClusters() error {
	wrong := s.quorum.WrongClusterPeers()
	voters := voterIDs(s.cfg)
	var others []string
	for _, id := range voters {
		if c, ok := wrong[id]; ok {
			others = append(others, fmt.Sprintf("node %d has cluster %s", id, c))
		}
	}
	// Without the others, the voters left must still be a majority.
	if len(voters)-len(others) > len(voters)/2 {
		return nil
	}
	slices.Sort(others)
	return fmt.Errorf("node %d (cluster %s) %w: %s; the nodes of a cluster must share one cluster id: %s",
		s.cfg.NodeID, s.meta.Image().ClusterID, errOtherClusters, strings.Join(others, ", "), FixClusterIDAdvice)
}
