package group

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Config holds the coordinator's settings. Field names follow Kafka's broker
// configs; DefaultConfig returns Kafka's defaults.
type Config struct {
	// OffsetsTopicPartitions is offsets.topic.num.partitions: the number of
	// __consumer_offsets partitions, which decides where a group lives.
	OffsetsTopicPartitions int32
	// Shards is the number of coordinator goroutines. Partition p is owned by
	// shard p % Shards, so every group of a partition lives on one shard.
	Shards int

	// GroupMinSessionTimeoutMs is group.min.session.timeout.ms.
	GroupMinSessionTimeoutMs int32
	// GroupMaxSessionTimeoutMs is group.max.session.timeout.ms.
	GroupMaxSessionTimeoutMs int32
	// GroupInitialRebalanceDelayMs is group.initial.rebalance.delay.ms: how
	// long the first rebalance of an empty group waits for more members.
	GroupInitialRebalanceDelayMs int32
	// GroupMaxSize is group.max.size.
	GroupMaxSize int32
	// GroupNewMemberJoinTimeoutMs bounds how long a new member's JoinGroup may
	// stay parked (Kafka's classic new member join timeout, 5 minutes).
	GroupNewMemberJoinTimeoutMs int32

	// OffsetMetadataMaxBytes is offset.metadata.max.bytes.
	OffsetMetadataMaxBytes int32
	// OffsetsRetentionMs is offsets.retention.minutes in milliseconds.
	OffsetsRetentionMs int64
	// OffsetsRetentionCheckIntervalMs is offsets.retention.check.interval.ms.
	OffsetsRetentionCheckIntervalMs int64

	// Logger receives the coordinator's logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		OffsetsTopicPartitions:          50,
		Shards:                          4,
		GroupMinSessionTimeoutMs:        6000,
		GroupMaxSessionTimeoutMs:        1800000,
		GroupInitialRebalanceDelayMs:    3000,
		GroupMaxSize:                    math.MaxInt32,
		GroupNewMemberJoinTimeoutMs:     300000,
		OffsetMetadataMaxBytes:          4096,
		OffsetsRetentionMs:              7 * 24 * int64(time.Hour/time.Millisecond),
		OffsetsRetentionCheckIntervalMs: 600000,
	}
}

func (c Config) validate() error {
	switch {
	case c.OffsetsTopicPartitions <= 0:
		return fmt.Errorf("offsets.topic.num.partitions %d must be positive", c.OffsetsTopicPartitions)
	case c.Shards <= 0:
		return fmt.Errorf("shards %d must be positive", c.Shards)
	case c.GroupMinSessionTimeoutMs < 0 || c.GroupMaxSessionTimeoutMs < c.GroupMinSessionTimeoutMs:
		return fmt.Errorf("group session timeout bounds [%d, %d] are invalid", c.GroupMinSessionTimeoutMs, c.GroupMaxSessionTimeoutMs)
	case c.GroupInitialRebalanceDelayMs < 0:
		return fmt.Errorf("group.initial.rebalance.delay.ms %d must not be negative", c.GroupInitialRebalanceDelayMs)
	case c.GroupMaxSize <= 0:
		return fmt.Errorf("group.max.size %d must be positive", c.GroupMaxSize)
	case c.GroupNewMemberJoinTimeoutMs <= 0:
		return fmt.Errorf("new member join timeout %d must be positive", c.GroupNewMemberJoinTimeoutMs)
	case c.OffsetMetadataMaxBytes < 0:
		return fmt.Errorf("offset.metadata.max.bytes %d must not be negative", c.OffsetMetadataMaxBytes)
	case c.OffsetsRetentionMs <= 0:
		return fmt.Errorf("offsets.retention.ms %d must be positive", c.OffsetsRetentionMs)
	case c.OffsetsRetentionCheckIntervalMs <= 0:
		return fmt.Errorf("offsets.retention.check.interval.ms %d must be positive", c.OffsetsRetentionCheckIntervalMs)
	}
	return nil
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
