package txn

// addPartitions is Kafka's handleAddPartitionsToTransaction: it adds
// partitions to the producer's transaction, starting one if none is open,
// and answers once the new partition set is durable. tv is the client's
// transaction version: 2 when a broker adds a partition on the producer's
// behalf (AddPartitionsToTxn v4+ without VerifyOnly).
func (m *machine) addPartitions(id string, pid int64, epoch int16, parts []TopicPartition, tv int16, reply func(int16)) {
	if id == "" {
		reply(errInvalidRequest)
		return
	}
	p, t, code := m.lookup(id)
	switch {
	case code != 0:
		reply(code)
		return
	case t == nil:
		reply(errInvalidProducerIDMapping)
		return
	case t.pending != stateNone:
		// Checked first: after a version 2 epoch overflow the producer
		// already uses the next producer id while the completion is
		// pending, and must wait rather than see a mapping error.
		reply(errConcurrentTransactions)
		return
	case t.producerID != pid:
		reply(errInvalidProducerIDMapping)
		return
	case t.producerEpoch != epoch:
		reply(errProducerFenced)
		return
	case t.state == statePrepareCommit || t.state == statePrepareAbort:
		reply(errConcurrentTransactions)
		return
	case t.state == stateOngoing && containsAll(t.partitions, parts):
		reply(0)
		return
	}
	tr, err := t.prepareAddPartitions(parts, m.nowMs(), tv)
	if err != nil {
		m.log.Error("prepare AddPartitionsToTxn", "err", err)
		reply(errUnknownServerError)
		return
	}
	m.appendTransit(t, p.coordinatorEpoch, tr, nil, reply)
}

func containsAll(set tpSet, parts []TopicPartition) bool {
	for _, tp := range parts {
		if _, ok := set[tp]; !ok {
			return false
		}
	}
	return true
}

// verifyPartitions is Kafka's handleVerifyPartitionsInTransaction, the
// KIP-890 check a partition leader makes before it appends a transactional
// batch: each partition answers NONE when it is in the producer's open
// transaction and TRANSACTION_ABORTABLE when it is not. A pending
// transition is not checked: partitions join only once durable and leave
// only once their marker is written. A code for the whole transaction
// comes back with nil per-partition codes.
func (m *machine) verifyPartitions(id string, pid int64, epoch int16, parts []TopicPartition) (int16, []int16) {
	if id == "" {
		return errInvalidRequest, nil
	}
	_, t, code := m.lookup(id)
	switch {
	case code != 0:
		return code, nil
	case t == nil || t.producerID != pid:
		return errInvalidProducerIDMapping, nil
	case t.producerEpoch != epoch:
		return errProducerFenced, nil
	case t.state == statePrepareCommit || t.state == statePrepareAbort:
		return errConcurrentTransactions, nil
	}
	codes := make([]int16, len(parts))
	for i, tp := range parts {
		if _, ok := t.partitions[tp]; !ok {
			codes[i] = errTransactionAbortable
		}
	}
	return 0, codes
}
