package image

import (
	"fmt"
	"strings"
)

// maxTopicNameLen is Kafka's Topic.MAX_NAME_LENGTH: 255 less room for a
// partition suffix in directory names.
const maxTopicNameLen = 249

// ClusterMetadataTopic is the name of Kafka's metadata topic; no user topic
// may take it.
const ClusterMetadataTopic = "__cluster_metadata"

// ValidateTopicName applies Kafka's Topic.validate: a name is 1 to 249
// characters of ASCII letters, digits, '.', '_' and '-', and is not "." or
// "..". The messages are Kafka's.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("Topic name is illegal, it can't be empty")
	case name == "." || name == "..":
		return fmt.Errorf("Topic name cannot be \".\" or \"..\"")
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("Topic name is illegal, it can't be longer than %d characters, topic name: %s", maxTopicNameLen, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("Topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

// HasCollisionChars reports whether name contains '.' or '_', the characters
// Kafka's metric names cannot tell apart.
func HasCollisionChars(name string) bool { return strings.ContainsAny(name, "._") }

// UnifyCollisionChars maps '.' to '_', as Kafka's Topic.unifyCollisionChars.
func UnifyCollisionChars(name string) string { return strings.ReplaceAll(name, ".", "_") }
