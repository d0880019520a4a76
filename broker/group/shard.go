package group

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/coord"
)

// shard is one coordinator goroutine of the runtime, owning a machine: the
// groups and offsets of the __consumer_offsets partitions mapped to it.
type shard = coord.Shard[timerKey, *machine]

// shardEffects carries out a machine's effects on its shard: timers and
// appends are the runtime's; transactional batches and markers go to the
// Store's TxnStore side, ordered with the partition's appends.
type shardEffects struct {
	*shard
	store Store
}

// appendTxn implements effects.
func (fx shardEffects) appendTxn(partition int32, txn TxnAppend, recs []Record, done func(error)) {
	fx.Write(partition, func(ctx context.Context) error {
		ts, err := fx.txnStore(partition)
		if err != nil {
			return err
		}
		return ts.AppendTxn(ctx, partition, txn, recs)
	}, done)
}

// appendMarker implements effects.
func (fx shardEffects) appendMarker(partition int32, marker TxnMarker, done func(error)) {
	fx.Write(partition, func(ctx context.Context) error {
		ts, err := fx.txnStore(partition)
		if err != nil {
			return err
		}
		return ts.AppendMarker(ctx, partition, marker)
	}, done)
}

// txnStore is the Store's TxnStore side, which transactional writes need.
func (fx shardEffects) txnStore(partition int32) (TxnStore, error) {
	ts, ok := fx.store.(TxnStore)
	if !ok {
		return nil, fmt.Errorf("write transactional records to __consumer_offsets-%d: the store does not support transactions: %w", partition, kerr.UnsupportedVersion)
	}
	return ts, nil
}
