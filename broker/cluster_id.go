package broker

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/vfs"
)

// resolveClusterID picks the cluster id: the configured one, else the one
// a formatted log dir holds in meta.properties, else a new random one (an
// empty data dir is formatted on first start, with no separate step).
func resolveClusterID(fsys vfs.FS, cfg *config.Broker) (string, error) {
	if cfg.ClusterID != "" {
		return cfg.ClusterID, nil
	}
	for _, dir := range cfg.LogDirs {
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
		if id := props["cluster.id"]; id != "" {
			return id, nil
		}
	}
	return NewClusterID(), nil
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
