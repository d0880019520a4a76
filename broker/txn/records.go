package txn

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// Record is one __transaction_state record: a TxnMetadataKey and a
// TxnMetadataValue, each prefixed by its int16 version. A nil Value is a
// tombstone. It is the coordinator runtime's record type (coord.Record),
// so one Store implementation serves every internal topic.
type Record = coord.Record

// Store appends records to a __transaction_state partition (see
// coord.Store), with the group coordinator's contract: errors that wrap a
// *kerr.Error map to the client error Kafka answers
// (NOT_LEADER_OR_FOLLOWER becomes NOT_COORDINATOR, NOT_ENOUGH_REPLICAS
// becomes COORDINATOR_NOT_AVAILABLE).
type Store = coord.Store

// Names of the internal topics transactions touch.
const (
	// TransactionStateTopic is where transactional ids are persisted.
	TransactionStateTopic = "__transaction_state"
	// ConsumerOffsetsTopic is the topic AddOffsetsToTxn adds a partition of.
	ConsumerOffsetsTopic = "__consumer_offsets"
)

// Kafka writes TxnMetadataKey version 0 and TxnMetadataValue version 0
// under transaction.version 0, version 1 (flexible, with the previous and
// next producer ids and the client's transaction version as tagged fields)
// from transaction.version 1.
const (
	txnKeyVersion      = 0
	txnValueVersionMax = 1
)

// PartitionFor returns the __transaction_state partition of a
// transactional id, exactly as Kafka: Utils.abs(id.hashCode()) %
// partitions, the same function as the group coordinator's
// (coord.PartitionFor).
func PartitionFor(transactionalID string, partitions int32) int32 {
	return coord.PartitionFor(transactionalID, partitions)
}

func txnKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: txnKeyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

// txnRecord encodes a transition as Kafka's TransactionLog.valueToBytes:
// an Empty transaction has a null partition list.
func txnRecord(id string, t transit, serverTV int16) Record {
	v := kmsg.NewTxnMetadataValue()
	if serverTV >= TV1 {
		v.Version = 1
		v.PreviousProducerID = t.prevProducerID
		v.NextProducerID = t.nextProducerID
		v.ClientTransactionVersion = t.tv
	}
	v.ProducerID = t.producerID
	v.ProducerEpoch = t.producerEpoch
	v.TimeoutMillis = t.timeoutMs
	v.State = kmsg.TransactionState(t.state)
	v.LastUpdateTimestamp = t.lastUpdateMs
	v.StartTimestamp = t.startMs
	if t.state != stateEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range t.partitions.sorted() {
			n := len(v.Topics)
			if n == 0 || v.Topics[n-1].Topic != tp.Topic {
				v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic})
				n++
			}
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
		}
	}
	return Record{Key: txnKey(id), Value: v.AppendTo(nil)}
}

func txnTombstone(id string) Record { return Record{Key: txnKey(id)} }

// groupTopics groups sorted partitions by topic, for responses.
func groupTopics(parts []TopicPartition) (topics []string, partitions [][]int32) {
	for _, tp := range parts {
		if n := len(topics); n == 0 || topics[n-1] != tp.Topic {
			topics = append(topics, tp.Topic)
			partitions = append(partitions, nil)
		}
		partitions[len(partitions)-1] = append(partitions[len(partitions)-1], tp.Partition)
	}
	return topics, partitions
}
