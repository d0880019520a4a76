package txn

// initResult is InitProducerId's answer.
type initResult struct {
	producerID int64
	epoch      int16
	code       int16
}

func initError(code int16) initResult {
	return initResult{producerID: noProducerID, epoch: noProducerEpoch, code: code}
}

// producerIDEpoch is the producer id and epoch a KIP-360 InitProducerId
// (v3+) says the producer holds.
type producerIDEpoch struct {
	id    int64
	epoch int16
}

// initProducerID is Kafka's handleInitProducerId for a transactional id
// whose timeout is already validated. spare is a producer id allocated for
// this request by an earlier pass, or noProducerID: allocation is I/O, so a
// pass that needs an id asks for one and runs again with it.
func (m *machine) initProducerID(id string, timeoutMs int32, expected *producerIDEpoch, spare int64, reply func(initResult)) {
	p, t, code := m.lookup(id)
	if code != 0 {
		reply(initError(code))
		return
	}
	again := func() {
		m.fx.allocateProducerID(func(pid int64, err error) {
			if err != nil {
				m.log.Warn("allocate producer id", "transactional_id", id, "err", err)
				reply(initError(allocErrorCode(err)))
				return
			}
			m.initProducerID(id, timeoutMs, expected, pid, reply)
		})
	}
	if t == nil {
		if spare == noProducerID {
			again()
			return
		}
		t = newTxnMeta(id, p.id, spare, timeoutMs, m.nowMs())
		p.txns[id] = t
		spare = noProducerID
	}

	if t.pending != stateNone {
		reply(initError(errConcurrentTransactions))
		return
	}
	if expected != nil && !validInitProducer(t, *expected) {
		reply(initError(errProducerFenced))
		return
	}
	var tr transit
	var err error
	switch t.state {
	case statePrepareAbort, statePrepareCommit:
		reply(initError(errConcurrentTransactions))
		return
	case stateEmpty, stateCompleteAbort, stateCompleteCommit:
		if t.exhausted() && (expected == nil || expected.epoch == t.producerEpoch) {
			if spare == noProducerID {
				again()
				return
			}
			tr, err = t.prepareRotation(spare, timeoutMs, m.nowMs(), expected != nil)
		} else {
			tr, code, err = t.prepareIncrementEpoch(timeoutMs, epochOf(expected), m.nowMs())
			if code != 0 {
				reply(initError(code))
				return
			}
		}
	case stateOngoing:
		// Abort the open transaction under a bumped epoch, which is never
		// returned: the client retries on CONCURRENT_TRANSACTIONS and its
		// retry bumps the epoch again (or rotates the producer id).
		m.fenceAndAbort(t, func(code int16) {
			if code == 0 {
				code = errConcurrentTransactions
			}
			reply(initError(code))
		})
		return
	default:
		m.log.Error("InitProducerId found an impossible state", "transactional_id", id, "state", t.state.String())
		reply(initError(errUnknownServerError))
		return
	}
	if err != nil {
		m.log.Error("prepare InitProducerId", "err", err)
		reply(initError(errUnknownServerError))
		return
	}
	m.appendTransit(t, p.coordinatorEpoch, tr, nil, func(code int16) {
		if code != 0 {
			reply(initError(code))
			return
		}
		m.log.Debug("initialized transactional id", "transactional_id", id, "producer_id", tr.producerID, "epoch", tr.producerEpoch)
		reply(initResult{producerID: tr.producerID, epoch: tr.producerEpoch})
	})
}

// validInitProducer is Kafka's isValidProducerId: a KIP-360 caller is
// fenced unless the id was just created, it names the current producer id,
// or it names the previous one with an exhausted epoch (a retry of a
// rotation whose answer was lost).
func validInitProducer(t *txnMeta, e producerIDEpoch) bool {
	return t.producerEpoch == noProducerEpoch || e.id == t.producerID ||
		(e.id == t.prevProducerID && epochExhausted(e.epoch))
}

func epochOf(e *producerIDEpoch) *int16 {
	if e == nil {
		return nil
	}
	return &e.epoch
}

// fenceAndAbort bumps the epoch of an Ongoing transaction and aborts it, as
// the coordinator does for a new producer of the same transactional id and
// for a timed-out transaction. done gets the abort's error code.
func (m *machine) fenceAndAbort(t *txnMeta, done func(code int16)) {
	tr, err := t.prepareFenceEpoch()
	if err != nil {
		m.log.Error("fence producer", "err", err)
		done(errUnknownServerError)
		return
	}
	m.endTxn(t.id, tr.producerID, tr.producerEpoch, false, false, m.cfg.TransactionVersion, noProducerID,
		func(code int16, _ int64, _ int16) { done(code) })
	// The abort takes over the fence's pending state as soon as it prepares
	// its own transition; if it failed before that, nothing is pending.
	if t.pending == statePrepareEpochFence {
		t.pending = stateNone
	}
}
