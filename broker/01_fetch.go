package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
)

// Fetch (key 1), versions 4-18 (Kafka 4's range).
//
// Reads whole batches from each partition's log up to the high watermark,
// within the request's MaxBytes and each partition's PartitionMaxBytes;
// the first partition that has data returns at least one whole batch even
// if it is larger than the limits ("at least one batch", KIP-74), so a
// consumer can always make progress. When fewer than MinBytes are found and
// MaxWaitMillis > 0, the request waits in the background until an append
// to one of its partitions wakes it, or the wait ends, and reads again.
// Topics are named by id from v13. Fetch sessions (KIP-227) are in
// fetch_session.go. read_committed fetches stop at the last stable offset
// and list the aborted transactions in the range returned, so clients
// skip their records (txn_partition.go). Records go from the segment files
// to the socket without a copy where the connection allows it
// (fetch_zerocopy.go).
func init() { register(1, 4, 18, handleFetch) }

// fetchPlan is one fetch's resolved partitions: the session's (for
// incremental fetches) or the request's.
type fetchPlan struct {
	ctx         context.Context // the connection's: a long poll ends with it
	replicaID   int32           // a follower's broker id, or -1 for a consumer
	brokerEpoch int64           // a follower's broker epoch (v15+), -1 when unknown
	req         *kmsg.FetchRequest
	session     *fetchSession // nil for a sessionless fetch
	incremental bool
	parts       []*fetchSessionPart
	errs        []fetchPartError // partitions the request named that cannot be read
	zeroCopy    bool             // read records as file slices for sendfile
}

type fetchPartError struct {
	topic     string
	topicID   [16]byte
	partition int32
	code      int16
}

func handleFetch(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	plan, code := s.planFetch(req)
	if plan != nil {
		plan.ctx = r.conn.ctx
		plan.zeroCopy = !s.copyFetch && r.conn.raw != nil
	}
	if code != 0 {
		resp.ErrorCode = code
		return respond(resp)
	}
	if plan.session != nil {
		// Held until the answer is built: a client sends one fetch of a
		// session at a time, and a second one must not interleave.
		plan.session.mu.Lock()
	}
	out := s.readFetch(plan)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if out.bytes >= int(req.MinBytes) || wait <= 0 || len(plan.errs) > 0 || hasErrors(out.parts) {
		return respond(s.finishFetch(plan, out))
	}
	out.release()
	return result{wait: func() kmsg.Response {
		out := s.longPoll(plan, wait)
		return s.finishFetch(plan, out)
	}}, nil
}

// planFetch resolves the request against its session, following KIP-227's
// epoch rules, and returns a top-level error code when the session is
// unusable.
func (s *Server) planFetch(req *kmsg.FetchRequest) (*fetchPlan, int16) {
	plan := &fetchPlan{req: req, replicaID: req.ReplicaID, brokerEpoch: -1}
	if req.Version >= 15 {
		plan.replicaID, plan.brokerEpoch = req.ReplicaState.ID, req.ReplicaState.Epoch
	}
	now := s.now()
	switch {
	case req.SessionID == 0 && req.SessionEpoch == fetchSessionFinalEpoch:
	case req.SessionID == 0 && req.SessionEpoch == 0:
		plan.session = s.sessions.create(now)
	case req.SessionEpoch == fetchSessionFinalEpoch:
		s.sessions.remove(req.SessionID)
	case req.SessionEpoch == 0:
		s.sessions.remove(req.SessionID)
		plan.session = s.sessions.create(now)
	default:
		sess := s.sessions.get(req.SessionID)
		if sess == nil {
			return nil, kerr.FetchSessionIDNotFound.Code
		}
		sess.mu.Lock()
		ok := sess.epoch == req.SessionEpoch
		sess.mu.Unlock()
		if !ok {
			return nil, kerr.InvalidFetchSessionEpoch.Code
		}
		plan.session = sess
		plan.incremental = true
	}

	img := s.meta.Image()
	var reqParts []*fetchSessionPart
	for i := range req.Topics {
		rt := &req.Topics[i]
		name, id := rt.Topic, rt.TopicID
		if req.Version >= 13 {
			t, ok := img.TopicByID(id)
			if !ok {
				for _, rp := range rt.Partitions {
					plan.errs = append(plan.errs, fetchPartError{topicID: id, partition: rp.Partition, code: kerr.UnknownTopicID.Code})
				}
				continue
			}
			name = t.Name
		} else if t, ok := img.Topic(name); ok {
			id = t.ID
		}
		for _, rp := range rt.Partitions {
			reqParts = append(reqParts, &fetchSessionPart{
				topic: name, topicID: id, partition: rp.Partition,
				fetchOffset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, leaderEpoch: rp.CurrentLeaderEpoch,
			})
		}
	}
	if plan.session == nil {
		plan.parts = reqParts
		return plan, 0
	}
	sess := plan.session
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.used = now
	for _, p := range reqParts {
		sess.upsert(*p)
	}
	if plan.incremental {
		for _, ft := range req.ForgottenTopics {
			name := ft.Topic
			if req.Version >= 13 {
				if t, ok := img.TopicByID(ft.TopicID); ok {
					name = t.Name
				}
			}
			for _, p := range ft.Partitions {
				sess.remove(name, p)
			}
		}
	}
	for _, k := range sess.order {
		plan.parts = append(plan.parts, sess.parts[k])
	}
	return plan, 0
}

// readFetch reads every planned partition once: the answer's partitions in
// plan order, with file slices for records read for sendfile, and the
// bytes of records found. The caller releases the slices or passes them
// on to finishFetch.
func (s *Server) readFetch(plan *fetchPlan) fetchRead {
	req := plan.req
	remaining := int(req.MaxBytes)
	if req.Version < 3 || remaining <= 0 {
		remaining = int(^uint32(0) >> 1)
	}
	minOne := true
	total := 0
	out := make([]kmsg.FetchResponseTopicPartition, len(plan.parts))
	var slices []*storage.FileSlice
	if plan.zeroCopy {
		slices = make([]*storage.FileSlice, len(plan.parts))
	}
	for i, fp := range plan.parts {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = fp.partition
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		rp.PreferredReadReplica = -1
		// Kafka sends empty records, never null: librdkafka refuses a
		// null record set.
		rp.RecordBatches = []byte{}
		p := s.leaderPartition(fp.topic, fp.partition)
		if p == nil {
			rp.ErrorCode = s.partitionMissingCode(fp.topic, fp.partition)
			out[i] = rp
			continue
		}
		if code := checkLeaderEpoch(fp.leaderEpoch, p.leaderEpoch.Load()); code != 0 {
			rp.ErrorCode = code
			out[i] = rp
			continue
		}
		// A follower's fetch offset is its log end: it moves the high
		// watermark, and the follower reads up to the leader's log end.
		follower := plan.replicaID >= 0
		if follower {
			if err := s.followerFetched(p, plan.replicaID, plan.brokerEpoch, fp.fetchOffset); err != nil {
				rp.ErrorCode = errCode(err)
				out[i] = rp
				continue
			}
		}
		hw := p.highWatermark()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, p.lso.Load(), p.log.LogStartOffset()
		readCommitted := req.IsolationLevel == 1 && !follower
		maxOffset := hw
		if follower {
			maxOffset = p.log.LogEndOffset()
		}
		if readCommitted {
			lso, err := s.lastStableOffset(p)
			if err != nil {
				s.log.Error("fetch: transactions", "topic", fp.topic, "partition", fp.partition, "err", err)
				rp.ErrorCode = kerr.KafkaStorageError.Code
				out[i] = rp
				continue
			}
			rp.LastStableOffset, maxOffset = lso, lso
		}
		limit := min(int(fp.maxBytes), remaining)
		if limit <= 0 && !minOne {
			out[i] = rp
			continue
		}
		read := p.log.Read
		if plan.zeroCopy {
			read = p.log.ReadSlice
		}
		rr, err := read(fp.fetchOffset, int32(max(limit, 0)), maxOffset, minOne)
		switch {
		case errors.Is(err, storage.ErrOffsetOutOfRange):
			rp.ErrorCode = kerr.OffsetOutOfRange.Code
		case err != nil && (errors.Is(err, storage.ErrClosed) || s.parts.get(fp.topic, fp.partition) != p):
			// The topic was deleted (or recreated) while this fetch read
			// it: not a disk failure.
			rp.ErrorCode = s.partitionMissingCode(fp.topic, fp.partition)
			if rp.ErrorCode == kerr.NotLeaderForPartition.Code {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
		case err != nil:
			s.log.Error("fetch read", "topic", fp.topic, "partition", fp.partition, "offset", fp.fetchOffset, "err", err)
			s.storageFailed(p, err)
			rp.ErrorCode = kerr.KafkaStorageError.Code
		default:
			n, last := len(rr.Data), int64(-1)
			if rr.Slice != nil {
				slices[i] = rr.Slice
				n, last = int(rr.Slice.Len()), rr.Slice.LastOffset()
			} else if n > 0 {
				rp.RecordBatches = rr.Data
				last = lastOffsetOf(rr.Data)
			}
			if n > 0 && readCommitted {
				aborted, err := s.abortedIn(p, fp.fetchOffset, last+1)
				if err != nil {
					// Records without their aborted transactions would show
					// a consumer aborted data: answer none.
					s.log.Error("fetch: aborted transactions", "topic", fp.topic, "partition", fp.partition, "offset", fp.fetchOffset, "err", err)
					rp.ErrorCode = kerr.KafkaStorageError.Code
					if errors.Is(err, storage.ErrOffsetOutOfRange) {
						rp.ErrorCode = kerr.OffsetOutOfRange.Code
					}
					rp.RecordBatches = []byte{}
					if rr.Slice != nil {
						rr.Slice.Release()
						slices[i] = nil
					}
					out[i] = rp
					continue
				}
				rp.AbortedTransactions = abortedFor(aborted)
			}
			if n > 0 {
				minOne = false
				remaining -= n
				total += n
			}
		}
		out[i] = rp
	}
	return fetchRead{parts: out, slices: slices, bytes: total}
}

// checkLeaderEpoch compares a client's idea of the leader epoch with ours
// (KIP-320): -1 skips the check.
func checkLeaderEpoch(client, ours int32) int16 {
	switch {
	case client < 0 || client == ours:
		return 0
	case client < ours:
		return kerr.FencedLeaderEpoch.Code
	}
	return kerr.UnknownLeaderEpoch.Code
}

func hasErrors(parts []kmsg.FetchResponseTopicPartition) bool {
	for i := range parts {
		if parts[i].ErrorCode != 0 {
			return true
		}
	}
	return false
}

// longPoll waits for appends to the plan's partitions until MinBytes are
// there or the wait ends, then reads again.
func (s *Server) longPoll(plan *fetchPlan, wait time.Duration) fetchRead {
	wake := make(chan struct{}, 1)
	for _, fp := range plan.parts {
		if p := s.parts.get(fp.topic, fp.partition); p != nil {
			p.addWaiter(wake)
			defer p.removeWaiter(wake)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// Read after registering, so an append between the first read and
		// the registration is not missed.
		out := s.readFetch(plan)
		if out.bytes >= int(plan.req.MinBytes) || hasErrors(out.parts) {
			return out
		}
		select {
		case <-wake:
			out.release()
		case <-timer.C:
			out.release()
			return s.readFetch(plan)
		case <-plan.ctx.Done():
			return out
		}
	}
}

// finishFetch builds the response from the partitions read: all of them
// for a full fetch, only those with news for an incremental one. It updates
// the session and releases it. Records in file slices make it a
// zeroCopyFetch, which the connection's writer sends.
func (s *Server) finishFetch(plan *fetchPlan, read fetchRead) kmsg.Response {
	req := plan.req
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if sess := plan.session; sess != nil {
		defer sess.mu.Unlock()
		resp.SessionID = sess.id
		sess.epoch++
		if sess.epoch <= 0 {
			sess.epoch = 1
		}
	}
	var cur *kmsg.FetchResponseTopic
	var files []fileRecords
	add := func(topic string, id [16]byte, rp kmsg.FetchResponseTopicPartition, slice *storage.FileSlice) {
		if cur == nil || cur.Topic != topic || cur.TopicID != id {
			resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
			cur = &resp.Topics[len(resp.Topics)-1]
			cur.Topic, cur.TopicID = topic, id
		}
		if slice != nil {
			files = append(files, fileRecords{topic: len(resp.Topics) - 1, partition: len(cur.Partitions), slice: slice})
		}
		cur.Partitions = append(cur.Partitions, rp)
	}
	for i, fp := range plan.parts {
		rp := read.parts[i]
		var slice *storage.FileSlice
		if read.slices != nil {
			slice = read.slices[i]
		}
		changed := len(rp.RecordBatches) > 0 || slice != nil || rp.ErrorCode != 0 ||
			rp.HighWatermark != fp.sentHW || rp.LastStableOffset != fp.sentLSO || rp.LogStartOffset != fp.sentLogStart
		if plan.incremental && !changed {
			continue
		}
		if plan.session != nil {
			fp.sentHW, fp.sentLSO, fp.sentLogStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
		}
		add(fp.topic, fp.topicID, rp, slice)
	}
	for _, pe := range plan.errs {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = pe.partition
		rp.ErrorCode = pe.code
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
		rp.PreferredReadReplica = -1
		rp.RecordBatches = []byte{}
		add(pe.topic, pe.topicID, rp, nil)
	}
	if len(files) > 0 {
		return &zeroCopyFetch{FetchResponse: resp, records: files}
	}
	return resp
}

// lastOffsetOf is the last offset of the last batch in data.
func lastOffsetOf(data []byte) int64 {
	last := int64(-1)
	for len(data) > 0 {
		_, rest, h, err := protocol.NextBatch(data)
		if err != nil {
			break
		}
		last = h.LastOffset()
		data = rest
	}
	return last
}

func abortedFor(txns []abortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(txns))
	for i, t := range txns {
		out[i] = kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		out[i].ProducerID, out[i].FirstOffset = t.ProducerID, t.FirstOffset
	}
	return out
}
