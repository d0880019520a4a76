package txn

import "math"

// endReply answers EndTxn: an error code and, for transaction version 2,
// the producer id and epoch the producer continues with.
type endReply func(code int16, producerID int64, epoch int16)

// endTxn is Kafka's endTransaction: a client's EndTxn, or an abort the
// coordinator starts itself (fromClient false) after fencing the producer.
// tv is the client's transaction version (2 from EndTxn v5). spare is a
// producer id allocated by an earlier pass for an epoch overflow, or
// noProducerID.
func (m *machine) endTxn(id string, pid int64, epoch int16, commit, fromClient bool, tv int16, spare int64, reply endReply) {
	if id == "" {
		reply(errInvalidRequest, noProducerID, noProducerEpoch)
		return
	}
	if tv >= TV2 {
		m.endTxnV2(id, pid, epoch, commit, fromClient, tv, spare, reply)
		return
	}
	m.endTxnV1(id, pid, epoch, commit, fromClient, reply)
}

func fail(reply endReply, code int16) { reply(code, noProducerID, noProducerEpoch) }

// endTxnV1 ends a transaction of the classic protocol: the epoch stays, a
// client must present exactly the current one, and a retry of a finished
// EndTxn succeeds.
func (m *machine) endTxnV1(id string, pid int64, epoch int16, commit, fromClient bool, reply endReply) {
	p, t, code := m.lookup(id)
	switch {
	case code != 0:
		fail(reply, code)
		return
	case t == nil || t.producerID != pid:
		fail(reply, errInvalidProducerIDMapping)
		return
	case (fromClient && epoch != t.producerEpoch) || epoch < t.producerEpoch:
		fail(reply, errProducerFenced)
		return
	case t.pending != stateNone && t.pending != statePrepareEpochFence:
		fail(reply, errConcurrentTransactions)
		return
	}
	if code, done := endStateCheck(t.state, commit, false); done {
		fail(reply, code)
		return
	}
	next := statePrepareAbort
	if commit {
		next = statePrepareCommit
	}
	fenced := false
	if next == statePrepareAbort && t.pending == statePrepareEpochFence {
		// The fence's epoch becomes the transaction's before the abort is
		// written, so the abort fences the old producer.
		fenced = true
		t.pending = stateNone
		t.producerEpoch = epoch
		t.lastProducerEpoch = noProducerEpoch
	}
	tr, err := t.prepareAbortOrCommit(next, TV0, noProducerID, m.nowMs(), false, fenced)
	if err != nil {
		m.log.Error("prepare EndTxn", "err", err)
		fail(reply, errUnknownServerError)
		return
	}
	m.writePrepare(p, t, tr, pid, epoch, commit, fenced, TV0, reply)
}

// endStateCheck is the state table EndTxn shares between versions for
// states other than Ongoing: a retry of a finished EndTxn succeeds, one of
// an EndTxn whose markers are being written is CONCURRENT_TRANSACTIONS, and
// anything else is INVALID_TXN_STATE. done is false when the transaction
// may end now. retry tells the version 2 table whether the request retries
// the last EndTxn.
func endStateCheck(state txnState, commit, retry bool) (code int16, done bool) {
	switch state {
	case stateOngoing:
		return 0, false
	case stateCompleteCommit:
		if commit {
			return 0, true
		}
	case stateCompleteAbort:
		if !commit {
			return 0, true
		}
	case statePrepareCommit:
		if commit {
			return errConcurrentTransactions, true
		}
	case statePrepareAbort:
		if !commit {
			return errConcurrentTransactions, true
		}
	case stateEmpty:
	default:
		return errUnknownServerError, true
	}
	return errInvalidTxnState, true
}

// endTxnV2 ends a transaction of KIP-890's protocol: every EndTxn bumps the
// epoch, a retry is recognized by the epoch it carries (one below the
// current, or the last epoch of the previous producer id after an
// overflow), and an abort is accepted with no transaction open. The table,
// for Empty, CompleteAbort and CompleteCommit (retry = epoch one below):
//
//	                Abort          Commit
//	                retry current  retry current
//	Empty           FENCED bump    FENCED INVALID_TXN_STATE
//	CompleteAbort   NONE   bump    INVALID_TXN_STATE (both)
//	CompleteCommit  INVALID bump   NONE   INVALID_TXN_STATE
func (m *machine) endTxnV2(id string, pid int64, epoch int16, commit, fromClient bool, tv int16, spare int64, reply endReply) {
	p, t, code := m.lookup(id)
	if code != 0 {
		fail(reply, code)
		return
	}
	if t == nil {
		fail(reply, errInvalidProducerIDMapping)
		return
	}
	isFence := t.pending == statePrepareEpochFence
	retryOnOverflow := !isFence && t.prevProducerID == pid && epoch == math.MaxInt16-1 && t.producerEpoch == 0
	retryOnBump := !isFence && int32(t.producerEpoch) == int32(epoch)+1
	validEpoch := false
	if !isFence {
		switch t.state {
		case statePrepareCommit, statePrepareAbort:
			validEpoch = retryOnBump
		case stateCompleteCommit, stateCompleteAbort:
			validEpoch = retryOnBump || retryOnOverflow || epoch == t.producerEpoch
		default:
			validEpoch = epoch == t.producerEpoch
		}
	} else {
		validEpoch = (!fromClient || epoch == t.producerEpoch) && epoch >= t.producerEpoch
	}
	isRetry := retryOnBump || retryOnOverflow

	switch {
	case t.producerID != pid && !retryOnOverflow:
		fail(reply, errInvalidProducerIDMapping)
		return
	case t.pending != stateNone && !isFence:
		// Checked before the epoch: an EndTxn arriving while the previous
		// one completes must wait, not be fenced by the bump in flight.
		fail(reply, errConcurrentTransactions)
		return
	case !validEpoch:
		fail(reply, errProducerFenced)
		return
	}

	next, noPartitionAdded := statePrepareAbort, false
	switch t.state {
	case stateOngoing:
		if commit {
			next = statePrepareCommit
		}
	case stateCompleteCommit, stateCompleteAbort, stateEmpty:
		sameOutcome := (t.state == stateCompleteCommit) == commit && t.state != stateEmpty
		switch {
		case isRetry && sameOutcome:
			reply(0, t.producerID, t.producerEpoch)
			return
		case commit || isRetry:
			fail(reply, errInvalidTxnState)
			return
		}
		noPartitionAdded = true
	default:
		code, _ := endStateCheck(t.state, commit, isRetry)
		fail(reply, code)
		return
	}

	nextPID := noProducerID
	if !isFence && t.exhausted() {
		if spare == noProducerID {
			m.fx.allocateProducerID(func(newPID int64, err error) {
				if err != nil {
					m.log.Warn("allocate producer id", "transactional_id", id, "err", err)
					fail(reply, allocErrorCode(err))
					return
				}
				m.endTxnV2(id, pid, epoch, commit, fromClient, tv, newPID, reply)
			})
			return
		}
		nextPID = spare
	}
	if isFence {
		t.pending = stateNone
		t.producerEpoch = epoch
		t.lastProducerEpoch = noProducerEpoch
	}
	tr, err := t.prepareAbortOrCommit(next, tv, nextPID, m.nowMs(), noPartitionAdded, isFence)
	if err != nil {
		m.log.Error("prepare EndTxn", "err", err)
		fail(reply, errUnknownServerError)
		return
	}
	m.writePrepare(p, t, tr, pid, epoch, commit, isFence, tv, reply)
}

// writePrepare appends PrepareCommit or PrepareAbort; once durable it
// answers the client and starts writing the markers, as Kafka answers
// EndTxn before the markers are written.
func (m *machine) writePrepare(p *partitionState, t *txnMeta, tr transit, pid int64, epoch int16, commit, fenced bool, tv int16, reply endReply) {
	coordEpoch := p.coordinatorEpoch
	m.appendTransit(t, coordEpoch, tr, nil, func(code int16) {
		if code != 0 {
			if fenced && m.currentCode(t, coordEpoch) == 0 {
				// The bumped epoch stays in memory; the next fence must not
				// bump it again.
				t.failedFence = true
			}
			fail(reply, code)
			return
		}
		if code := m.currentCode(t, coordEpoch); code != 0 {
			fail(reply, code)
			return
		}
		switch {
		case t.producerID != pid:
			fail(reply, errInvalidProducerIDMapping)
			return
		case t.producerEpoch != epoch && (tv < TV2 || int32(t.producerEpoch) != int32(epoch)+1):
			fail(reply, errProducerFenced)
			return
		case t.pending != stateNone:
			fail(reply, errConcurrentTransactions)
			return
		case t.state != statePrepareCommit && t.state != statePrepareAbort,
			(t.state == statePrepareCommit) != commit:
			fail(reply, errInvalidTxnState)
			return
		}
		complete, err := t.prepareComplete(m.nowMs())
		if err != nil {
			m.log.Error("prepare transaction completion", "err", err)
			fail(reply, errUnknownServerError)
			return
		}
		if tv >= TV2 {
			reply(0, complete.producerID, complete.producerEpoch)
		} else {
			reply(0, noProducerID, noProducerEpoch)
		}
		m.startMarkers(t, coordEpoch, commit, complete)
	})
}
