package image

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// NewUUID returns a random (version 4) UUID in the form Kafka's
// Uuid.randomUuid gives: never all zero, never Kafka's reserved
// METADATA_TOPIC_ID (0...01), and never one whose string form starts with
// '-', which would read as a command-line flag.
func NewUUID() [16]byte {
	for {
		var id [16]byte
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if UUIDString(id)[0] != '-' {
			return id
		}
	}
}

// UUIDString formats id as Kafka does: URL-safe base64 without padding.
func UUIDString(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// ParseUUID parses the form UUIDString writes.
func ParseUUID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return id, fmt.Errorf("parse uuid %q: %w", s, err)
	}
	if len(b) != len(id) {
		return id, fmt.Errorf("parse uuid %q: %d bytes, want 16", s, len(b))
	}
	copy(id[:], b)
	return id, nil
}
