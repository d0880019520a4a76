package share

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Config is the share coordinator's configuration: Kafka's group.share.*
// broker configs and what the broker tells it about topics.
type Config struct {
	// StatePartitions is the partition count of __share_group_state
	// (share.coordinator.state.topic.num.partitions).
	StatePartitions int32
	// Shards is how many coordinator goroutines serve the partitions.
	Shards int
	// UpdatesPerSnapshot is how many ShareUpdate records of a share
	// partition follow its ShareSnapshot before the next snapshot
	// (share.coordinator.snapshot.update.records.per.snapshot); 0 writes
	// snapshots only.
	UpdatesPerSnapshot int
	// SessionTimeoutMs is group.share.session.timeout.ms: a member that
	// sends no heartbeat for this long leaves the group.
	SessionTimeoutMs int32
	// HeartbeatIntervalMs is group.share.heartbeat.interval.ms, told to
	// members in every heartbeat answer.
	HeartbeatIntervalMs int32
	// AssignmentIntervalMs is group.share.assignment.interval.ms (Kafka
	// 4.4): the least time between two target assignments of a share
	// group; a group's share.assignment.interval.ms overrides it. Joins
	// and leaves in between wait for the next target; 0 computes one on
	// every change.
	AssignmentIntervalMs int32
	// RecordLockDurationMs is group.share.record.lock.duration.ms: how
	// long an acquired record stays with its consumer.
	RecordLockDurationMs int32
	// DeliveryCountLimit is group.share.delivery.count.limit: a record
	// delivered this many times is archived instead of released.
	DeliveryCountLimit int32
	// PartitionMaxRecordLocks is group.share.partition.max.record.locks:
	// the most offsets a share partition keeps in flight.
	PartitionMaxRecordLocks int32
	// MaxSize is group.share.max.size, the most members of a share group.
	MaxSize int32
	// AutoOffsetReset is where a share partition starts when the group
	// first consumes it, "latest" or "earliest" (share.auto.offset.reset;
	// a group's own config overrides it).
	AutoOffsetReset string
	// ReadCommitted is share.isolation.level=read_committed for groups
	// that set nothing (a group's own config overrides it).
	ReadCommitted bool
	// Topics is the broker's view of the topics, for assignments and for
	// topic names.
	Topics TopicView
	// Offsets reads a partition's log start offset and high watermark, if
	// this node leads it. It must not block: the shard calls it.
	Offsets func(topic string, partition int32) (logStart, highWatermark int64, ok bool)
	// LeaderEpoch reads a partition's leader epoch, which share-partition
	// snapshots record as Kafka's do; nil or a negative answer records -1.
	// It must not block.
	LeaderEpoch func(topic string, partition int32) int32
	// GroupConfig reads a group's config override (share.auto.offset.reset,
	// share.isolation.level, share.record.lock.duration.ms,
	// share.delivery.count.limit, share.session.timeout.ms,
	// share.heartbeat.interval.ms); nil means none. It must not block.
	GroupConfig func(group, name string) (string, bool)
	// Persister reaches the share coordinator of groups another node
	// serves, for the share partitions this node leads (state.go); nil
	// keeps every share partition's state here (a single node, tests).
	Persister Persister
	// Logger gets the coordinator's warnings.
	Logger *slog.Logger
}

// TopicInfo is what the coordinator needs of a topic.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// TopicView lists the topics by name.
type TopicView interface {
	Topics() map[string]TopicInfo
}

// DefaultConfig is Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		StatePartitions:         50,
		Shards:                  1,
		UpdatesPerSnapshot:      500,
		SessionTimeoutMs:        45_000,
		HeartbeatIntervalMs:     5_000,
		AssignmentIntervalMs:    1_000,
		RecordLockDurationMs:    30_000,
		DeliveryCountLimit:      5,
		PartitionMaxRecordLocks: 2_000,
		MaxSize:                 200,
		AutoOffsetReset:         "latest",
		Logger:                  slog.Default(),
	}
}

func (c *Config) validate() error {
	switch {
	case c.StatePartitions <= 0:
		return fmt.Errorf("share.coordinator.state.topic.num.partitions %d must be positive", c.StatePartitions)
	case c.Shards <= 0:
		return fmt.Errorf("shards %d must be positive", c.Shards)
	case c.HeartbeatIntervalMs <= 0 || c.SessionTimeoutMs <= c.HeartbeatIntervalMs:
		return fmt.Errorf("group.share.heartbeat.interval.ms %d must be positive and below group.share.session.timeout.ms %d", c.HeartbeatIntervalMs, c.SessionTimeoutMs)
	case c.AssignmentIntervalMs < 0:
		return fmt.Errorf("group.share.assignment.interval.ms %d must not be negative", c.AssignmentIntervalMs)
	case c.RecordLockDurationMs <= 0:
		return fmt.Errorf("group.share.record.lock.duration.ms %d must be positive", c.RecordLockDurationMs)
	case c.DeliveryCountLimit < 2 || c.DeliveryCountLimit > 10:
		return fmt.Errorf("group.share.delivery.count.limit %d must be in [2, 10]", c.DeliveryCountLimit)
	case c.PartitionMaxRecordLocks <= 0:
		return fmt.Errorf("group.share.partition.max.record.locks %d must be positive", c.PartitionMaxRecordLocks)
	case c.MaxSize <= 0:
		return fmt.Errorf("group.share.max.size %d must be positive", c.MaxSize)
	case c.AutoOffsetReset != "latest" && c.AutoOffsetReset != "earliest":
		return fmt.Errorf("share.auto.offset.reset %q must be latest or earliest", c.AutoOffsetReset)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Error codes the coordinator answers.
var (
	errInvalidRequest           = kerr.InvalidRequest.Code
	errInvalidRecordState       = kerr.InvalidRecordState.Code
	errNotCoordinator           = kerr.NotCoordinator.Code
	errLoadInProgress           = kerr.CoordinatorLoadInProgress.Code
	errUnknownMemberID          = kerr.UnknownMemberID.Code
	errFencedMemberEpoch        = kerr.FencedMemberEpoch.Code
	errGroupIDNotFound          = kerr.GroupIDNotFound.Code
	errGroupMaxSizeReached      = kerr.GroupMaxSizeReached.Code
	errNonEmptyGroup            = kerr.NonEmptyGroup.Code
	errShareSessionNotFound     = kerr.ShareSessionNotFound.Code
	errInvalidShareSessionEpoch = kerr.InvalidShareSessionEpoch.Code
	errUnknownTopicID           = kerr.UnknownTopicID.Code
	errNotLeader                = kerr.NotLeaderForPartition.Code
	errTopicAuthorizationFailed = kerr.TopicAuthorizationFailed.Code
)
