package txn

import (
	"fmt"
	"iter"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// replay rebuilds the transactional ids of a partition from its records,
// in log order, as Kafka's TransactionStateManager.loadTransactionMetadata:
// the last record of an id wins and a tombstone removes it. Keys of an
// unknown version are skipped, as Kafka skips them; a record that does not
// decode, a value of an unknown version or an unknown state fails the load.
func replay(partition int32, records iter.Seq2[Record, error], log *slog.Logger) (map[string]*txnMeta, error) {
	txns := make(map[string]*txnMeta)
	n := 0
	for r, err := range records {
		if err != nil {
			return nil, fmt.Errorf("read %s-%d record %d: %w", TransactionStateTopic, partition, n, err)
		}
		if err := replayOne(txns, partition, r, log); err != nil {
			return nil, fmt.Errorf("replay %s-%d record %d: %w", TransactionStateTopic, partition, n, err)
		}
		n++
	}
	return txns, nil
}

func replayOne(txns map[string]*txnMeta, partition int32, r Record, log *slog.Logger) error {
	version, ok := coord.KeyVersion(r.Key)
	if !ok {
		return fmt.Errorf("key of %d bytes has no version", len(r.Key))
	}
	if version != txnKeyVersion {
		log.Warn("skip __transaction_state record with unknown key version", "partition", partition, "version", version)
		return nil
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(r.Key); err != nil {
		return fmt.Errorf("decode transaction key: %w", err)
	}
	if r.Value == nil {
		delete(txns, k.TransactionalID)
		return nil
	}
	t, err := decodeValue(k.TransactionalID, partition, r.Value)
	if err != nil {
		return err
	}
	txns[k.TransactionalID] = t
	return nil
}

// decodeValue reads a TxnMetadataValue as Kafka's readTxnRecordValue. The
// last epoch is not persisted: it is -1 after a load.
func decodeValue(id string, partition int32, value []byte) (*txnMeta, error) {
	version, ok := coord.KeyVersion(value)
	if !ok {
		return nil, fmt.Errorf("value of %q has %d bytes and no version", id, len(value))
	}
	if version < 0 || version > txnValueVersionMax {
		return nil, fmt.Errorf("value of %q has unknown version %d", id, version)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("decode transaction value of %q: %w", id, err)
	}
	state := txnState(v.State)
	if state < stateEmpty || state > statePrepareEpochFence {
		return nil, fmt.Errorf("transaction value of %q has unknown state %d", id, v.State)
	}
	t := &txnMeta{
		id:                id,
		partition:         partition,
		producerID:        v.ProducerID,
		prevProducerID:    v.PreviousProducerID,
		nextProducerID:    v.NextProducerID,
		producerEpoch:     v.ProducerEpoch,
		lastProducerEpoch: noProducerEpoch,
		timeoutMs:         v.TimeoutMillis,
		state:             state,
		pending:           stateNone,
		partitions:        tpSet{},
		startMs:           v.StartTimestamp,
		lastUpdateMs:      v.LastUpdateTimestamp,
		tv:                v.ClientTransactionVersion,
	}
	if state != stateEmpty {
		for _, topic := range v.Topics {
			for _, p := range topic.Partitions {
				t.partitions[TopicPartition{topic.Topic, p}] = struct{}{}
			}
		}
	}
	return t, nil
}
