package txn

import (
	"fmt"
	"log/slog"
	"time"
)

// Transaction versions (the transaction.version feature level). Version 2 is
// KIP-890's: every EndTxn bumps the producer epoch and brokers add
// partitions to transactions on the producer's behalf.
const (
	TV0 int16 = 0
	TV1 int16 = 1
	TV2 int16 = 2
)

// Config holds the coordinator's settings. Field names follow Kafka's broker
// configs; DefaultConfig returns Kafka's defaults.
type Config struct {
	// TransactionStateTopicPartitions is transaction.state.log.num.partitions:
	// the number of __transaction_state partitions, which decides where a
	// transactional id lives.
	TransactionStateTopicPartitions int32
	// Shards is the number of coordinator goroutines. Partition p is owned by
	// shard p % Shards.
	Shards int

	// TransactionMaxTimeoutMs is transaction.max.timeout.ms: InitProducerId
	// asking for a longer transaction timeout answers
	// INVALID_TRANSACTION_TIMEOUT.
	TransactionMaxTimeoutMs int32
	// TransactionalIDExpirationMs is transactional.id.expiration.ms: a
	// transactional id without a transaction in progress that has not been
	// updated for this long is removed.
	TransactionalIDExpirationMs int64
	// AbortTimedOutTransactionCleanupIntervalMs is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms: how often
	// transactions open longer than their timeout are aborted.
	AbortTimedOutTransactionCleanupIntervalMs int64
	// RemoveExpiredTransactionalIDCleanupIntervalMs is
	// transaction.remove.expired.transaction.cleanup.interval.ms: how often
	// expired transactional ids are removed.
	RemoveExpiredTransactionalIDCleanupIntervalMs int64

	// TransactionVersion is the cluster's finalized transaction.version
	// feature level (0, 1 or 2). Versions 1 and up write TxnMetadataValue
	// version 1 (flexible, with the KIP-890 tagged fields); aborts the
	// coordinator starts itself (timeouts, fencing) use this version.
	TransactionVersion int16

	// MarkerRetryBackoffMs is how long a transaction marker that failed with a
	// retriable error (NOT_LEADER_OR_FOLLOWER and the like) waits before it is
	// sent again, and how long a failed completion record waits before it is
	// appended again.
	MarkerRetryBackoffMs int64

	// RequestTimeoutMs bounds each append to __transaction_state, each
	// marker write and each producer id allocation, as Kafka's coordinator
	// bounds its appends and marker requests with request.timeout.ms: one
	// whose answer never comes (a high watermark that stopped moving)
	// fails as REQUEST_TIMED_OUT and is retried, rather than holding its
	// transactional id in a pending transition for ever.
	RequestTimeoutMs int64

	// Logger receives the coordinator's logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		TransactionStateTopicPartitions:               50,
		Shards:                                        4,
		TransactionMaxTimeoutMs:                       900000,
		TransactionalIDExpirationMs:                   7 * 24 * int64(time.Hour/time.Millisecond),
		AbortTimedOutTransactionCleanupIntervalMs:     10000,
		RemoveExpiredTransactionalIDCleanupIntervalMs: 3600000,
		TransactionVersion:                            TV2,
		MarkerRetryBackoffMs:                          100,
		RequestTimeoutMs:                              30000,
	}
}

func (c Config) validate() error {
	switch {
	case c.TransactionStateTopicPartitions <= 0:
		return fmt.Errorf("transaction.state.log.num.partitions %d must be positive", c.TransactionStateTopicPartitions)
	case c.Shards <= 0:
		return fmt.Errorf("shards %d must be positive", c.Shards)
	case c.TransactionMaxTimeoutMs <= 0:
		return fmt.Errorf("transaction.max.timeout.ms %d must be positive", c.TransactionMaxTimeoutMs)
	case c.TransactionalIDExpirationMs <= 0:
		return fmt.Errorf("transactional.id.expiration.ms %d must be positive", c.TransactionalIDExpirationMs)
	case c.AbortTimedOutTransactionCleanupIntervalMs <= 0:
		return fmt.Errorf("transaction.abort.timed.out.transaction.cleanup.interval.ms %d must be positive", c.AbortTimedOutTransactionCleanupIntervalMs)
	case c.RemoveExpiredTransactionalIDCleanupIntervalMs <= 0:
		return fmt.Errorf("transaction.remove.expired.transaction.cleanup.interval.ms %d must be positive", c.RemoveExpiredTransactionalIDCleanupIntervalMs)
	case c.TransactionVersion < TV0 || c.TransactionVersion > TV2:
		return fmt.Errorf("transaction.version %d must be 0, 1 or 2", c.TransactionVersion)
	case c.MarkerRetryBackoffMs <= 0:
		return fmt.Errorf("marker retry backoff %d must be positive", c.MarkerRetryBackoffMs)
	case c.RequestTimeoutMs <= 0:
		return fmt.Errorf("request timeout %d must be positive", c.RequestTimeoutMs)
	}
	return nil
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
