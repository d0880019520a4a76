package group

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
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

	// ConsumerGroupSessionTimeoutMs is group.consumer.session.timeout.ms:
	// a KIP-848 member that sends no heartbeat for this long is fenced.
	ConsumerGroupSessionTimeoutMs int32
	// ConsumerGroupHeartbeatIntervalMs is
	// group.consumer.heartbeat.interval.ms, which ConsumerGroupHeartbeat
	// answers tell members to wait between heartbeats.
	ConsumerGroupHeartbeatIntervalMs int32
	// ConsumerGroupAssignmentIntervalMs is
	// group.consumer.assignment.interval.ms (Kafka 4.4, KIP-1263): the
	// least time between two target assignments of a KIP-848 group. The
	// group epoch still moves with every join or leave; until the interval
	// has passed since the last target, members reconcile towards that
	// target, and the first heartbeat after it computes the next one for
	// all the changes in between. 0 computes on every epoch bump.
	ConsumerGroupAssignmentIntervalMs int32
	// ConsumerGroupConfig returns a consumer group's group-level overrides
	// (consumer.assignment.interval.ms); nil means none. It is called on
	// the coordinator's goroutines and must not block.
	ConsumerGroupConfig func(groupID string) ConsumerGroupOverrides
	// ConsumerGroupMaxSize is group.consumer.max.size.
	ConsumerGroupMaxSize int32
	// ConsumerGroupAssignors is group.consumer.assignors: the server-side
	// assignors members may ask for, among "uniform" and "range"; the
	// first is the default.
	ConsumerGroupAssignors []string
	// ConsumerGroupMigrationPolicy is group.consumer.migration.policy:
	// "bidirectional" (the default), "upgrade", "downgrade" or "disabled",
	// which online conversions between a live classic group and a
	// consumer group are allowed. Empty groups convert either way.
	ConsumerGroupMigrationPolicy string
	// StreamsGroupSessionTimeoutMs is group.streams.session.timeout.ms.
	StreamsGroupSessionTimeoutMs int32
	// StreamsGroupHeartbeatIntervalMs is group.streams.heartbeat.interval.ms.
	StreamsGroupHeartbeatIntervalMs int32
	// StreamsGroupMaxSize is group.streams.max.size.
	StreamsGroupMaxSize int32
	// StreamsGroupNumStandbyReplicas is group.streams.num.standby.replicas:
	// the standby replicas of each stateful task.
	StreamsGroupNumStandbyReplicas int32
	// StreamsGroupTaskOffsetIntervalMs is
	// group.streams.task.offset.interval.ms, which heartbeat answers pass
	// on to members.
	StreamsGroupTaskOffsetIntervalMs int32
	// StreamsGroupAcceptableRecoveryLag is
	// group.streams.acceptable.recovery.lag, passed on to members.
	StreamsGroupAcceptableRecoveryLag int64
	// StreamsGroupInitialRebalanceDelayMs is
	// group.streams.initial.rebalance.delay.ms: how long the first target
	// assignment of an empty group waits for more members.
	StreamsGroupInitialRebalanceDelayMs int32
	// StreamsGroupAssignmentIntervalMs is
	// group.streams.assignment.interval.ms: the least time between two
	// target assignments of a streams group.
	StreamsGroupAssignmentIntervalMs int32
	// StreamsGroupRackAwareAssignmentTags is
	// group.streams.rack.aware.assignment.tags: client tag keys every
	// member is told to set (MISSING_CLIENT_TAGS); the assignor does not
	// use them, as Kafka 4.4's.
	StreamsGroupRackAwareAssignmentTags []string
	// StreamsGroupConfig returns a streams group's group-level overrides
	// (streams.session.timeout.ms, streams.heartbeat.interval.ms,
	// streams.num.standby.replicas); nil means none. It is called on the
	// coordinator's goroutines and must not block.
	StreamsGroupConfig func(groupID string) StreamsGroupOverrides

	// Topics is the broker's view of the topics, which consumer groups
	// assign. Nil means no topics exist. Call Coordinator.TopicsChanged
	// after the view changes.
	Topics TopicsView

	// Logger receives the coordinator's logs; nil means slog.Default().
	Logger *slog.Logger
}

// TopicsView tells the coordinator which topics exist, for the server-side
// assignment of KIP-848 consumer groups.
type TopicsView interface {
	// Topics returns every topic by name. The coordinator keeps the map
	// it gets, so the view must not change it afterwards. It is called
	// on the coordinator's goroutines, at the first use after
	// Coordinator.TopicsChanged, and must not block.
	Topics() map[string]TopicInfo
}

// TopicNamesView is a TopicsView that also gives the names by id of the
// topics it returns, which the coordinator would otherwise make from the
// map on every change, a pass over every topic. The coordinator keeps
// both maps: the view must not change them afterwards.
type TopicNamesView interface {
	TopicsView
	TopicsAndNames() (map[string]TopicInfo, map[[16]byte]string)
}

// TopicInfo is what an assignment needs to know of a topic.
type TopicInfo struct {
	// ID is the topic's UUID, which ConsumerGroupHeartbeat names it by.
	ID [16]byte
	// Partitions is the topic's partition count.
	Partitions int32
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		OffsetsTopicPartitions:            50,
		Shards:                            4,
		GroupMinSessionTimeoutMs:          6000,
		GroupMaxSessionTimeoutMs:          1800000,
		GroupInitialRebalanceDelayMs:      3000,
		GroupMaxSize:                      math.MaxInt32,
		GroupNewMemberJoinTimeoutMs:       300000,
		OffsetMetadataMaxBytes:            4096,
		OffsetsRetentionMs:                7 * 24 * int64(time.Hour/time.Millisecond),
		OffsetsRetentionCheckIntervalMs:   600000,
		ConsumerGroupSessionTimeoutMs:     45000,
		ConsumerGroupHeartbeatIntervalMs:  5000,
		ConsumerGroupMaxSize:              math.MaxInt32,
		ConsumerGroupAssignmentIntervalMs: 1000,
		ConsumerGroupAssignors:            []string{uniformAssignorName, rangeAssignorName},
		ConsumerGroupMigrationPolicy:      MigrationBidirectional,

		StreamsGroupSessionTimeoutMs:      45000,
		StreamsGroupHeartbeatIntervalMs:   5000,
		StreamsGroupMaxSize:               math.MaxInt32,
		StreamsGroupNumStandbyReplicas:    0,
		StreamsGroupTaskOffsetIntervalMs:  60000,
		StreamsGroupAcceptableRecoveryLag: 10000,

		StreamsGroupInitialRebalanceDelayMs: 3000,
		StreamsGroupAssignmentIntervalMs:    1000,
	}
}

// ConsumerGroupOverrides are a consumer group's group configs.
type ConsumerGroupOverrides struct {
	// AssignmentIntervalMs is consumer.assignment.interval.ms; -1 means
	// the broker's.
	AssignmentIntervalMs int32
	// SessionTimeoutMs is consumer.session.timeout.ms; 0 means the
	// broker's.
	SessionTimeoutMs int32
	// HeartbeatIntervalMs is consumer.heartbeat.interval.ms; 0 means the
	// broker's.
	HeartbeatIntervalMs int32
}

// StreamsGroupOverrides are a streams group's group configs; a zero or
// negative field (-1 for standby replicas, the initial delay and the
// assignment interval) means the broker's value.
type StreamsGroupOverrides struct {
	SessionTimeoutMs        int32
	HeartbeatIntervalMs     int32
	NumStandbyReplicas      int32
	InitialRebalanceDelayMs int32
	// AssignmentIntervalMs is streams.assignment.interval.ms; -1 means
	// the broker's.
	AssignmentIntervalMs int32
	// RackAwareAssignmentTags is streams.rack.aware.assignment.tags; nil
	// means the broker's, an empty slice none.
	RackAwareAssignmentTags []string
	// TaskOffsetIntervalMs is streams.task.offset.interval.ms and
	// AcceptableRecoveryLag streams.acceptable.recovery.lag, passed on to
	// members; -1 means the broker's.
	TaskOffsetIntervalMs  int32
	AcceptableRecoveryLag int64
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
	case c.ConsumerGroupSessionTimeoutMs <= 0:
		return fmt.Errorf("group.consumer.session.timeout.ms %d must be positive", c.ConsumerGroupSessionTimeoutMs)
	case c.ConsumerGroupHeartbeatIntervalMs <= 0 || c.ConsumerGroupHeartbeatIntervalMs >= c.ConsumerGroupSessionTimeoutMs:
		return fmt.Errorf("group.consumer.heartbeat.interval.ms %d must be positive and below group.consumer.session.timeout.ms %d", c.ConsumerGroupHeartbeatIntervalMs, c.ConsumerGroupSessionTimeoutMs)
	case c.ConsumerGroupAssignmentIntervalMs < 0:
		return fmt.Errorf("group.consumer.assignment.interval.ms %d must not be negative", c.ConsumerGroupAssignmentIntervalMs)
	case c.ConsumerGroupMaxSize <= 0:
		return fmt.Errorf("group.consumer.max.size %d must be positive", c.ConsumerGroupMaxSize)
	case len(c.ConsumerGroupAssignors) == 0:
		return fmt.Errorf("group.consumer.assignors must name at least one assignor")
	case c.StreamsGroupSessionTimeoutMs <= 0:
		return fmt.Errorf("group.streams.session.timeout.ms %d must be positive", c.StreamsGroupSessionTimeoutMs)
	case c.StreamsGroupHeartbeatIntervalMs <= 0 || c.StreamsGroupHeartbeatIntervalMs >= c.StreamsGroupSessionTimeoutMs:
		return fmt.Errorf("group.streams.heartbeat.interval.ms %d must be positive and below group.streams.session.timeout.ms %d", c.StreamsGroupHeartbeatIntervalMs, c.StreamsGroupSessionTimeoutMs)
	case c.StreamsGroupMaxSize <= 0:
		return fmt.Errorf("group.streams.max.size %d must be positive", c.StreamsGroupMaxSize)
	case c.StreamsGroupInitialRebalanceDelayMs < 0:
		return fmt.Errorf("group.streams.initial.rebalance.delay.ms %d must not be negative", c.StreamsGroupInitialRebalanceDelayMs)
	case c.StreamsGroupAssignmentIntervalMs < 0:
		return fmt.Errorf("group.streams.assignment.interval.ms %d must not be negative", c.StreamsGroupAssignmentIntervalMs)
	case c.StreamsGroupNumStandbyReplicas < 0:
		return fmt.Errorf("group.streams.num.standby.replicas %d must not be negative", c.StreamsGroupNumStandbyReplicas)
	}
	switch strings.ToLower(c.ConsumerGroupMigrationPolicy) {
	case MigrationDisabled, MigrationUpgrade, MigrationDowngrade, MigrationBidirectional:
	default:
		return fmt.Errorf("group.consumer.migration.policy %q must be one of disabled, upgrade, downgrade, bidirectional", c.ConsumerGroupMigrationPolicy)
	}
	for _, name := range c.ConsumerGroupAssignors {
		if assignorByName(name) == nil {
			return fmt.Errorf("group.consumer.assignors: unknown assignor %q (known: uniform, range)", name)
		}
	}
	return nil
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
