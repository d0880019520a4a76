package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/broker/share"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/security/authz"
)

// ShareFetch (key 78), versions 1-2 (version 0 was Kafka 4.0's early
// access, removed in 4.1): a share consumer's fetch. The request opens
// (epoch 0), continues or closes (epoch -1) the member's share session,
// carries acknowledgements of records fetched before (piggy-backed), and
// acquires records of the session's partitions for the member: the
// response holds the record batches and, for each, the offsets acquired
// with their delivery counts. Version 2 adds the record-limit acquire mode
// (KIP-1206) and RENEW acknowledgements (KIP-1222).
//
// The share-partition state is the share coordinator's (broker/share):
// first the session step and acknowledgements run there, then the broker
// reads the partitions' logs from where the coordinator says, then the
// coordinator acquires what was read. With nothing acquired the request
// waits up to MaxWaitMs for new records or released ones.
func init() { register(78, 1, 2, handleShareFetch) }

func handleShareFetch(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ShareFetchRequest)
	return r.inOrder(func() kmsg.Response {
		// READ on the group before the share session is looked at, as
		// Kafka; READ on each topic is the coordinator's to apply
		// (readable), since the session holds partitions this request
		// does not name.
		if resp := s.shareGroupDenied(r, authz.OpRead, ptrOr(req.GroupID)); resp != nil {
			return resp
		}
		return s.shareFetch(r.conn, req, s.shareReadable(r))
	})
}

// ptrOr is *p, or "" for nil.
func ptrOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) shareFetch(c *conn, req *kmsg.ShareFetchRequest, readable func(string) bool) kmsg.Response {
	ctx := c.ctx
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	if req.GroupID == nil || *req.GroupID == "" || req.MemberID == nil || *req.MemberID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	names := s.topicNamesByID()
	start := share.FetchStart{Group: *req.GroupID, Member: *req.MemberID, Epoch: req.ShareSessionEpoch,
		Renew: req.Version >= 2 && req.IsRenewAck, Conn: c.id, Readable: readable}
	if req.ShareSessionEpoch == 0 {
		c.shareSessions.Store(true)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ref := share.PartitionRef{TopicID: t.TopicID, Topic: names[t.TopicID], Partition: p.Partition}
			start.Fetch = append(start.Fetch, ref)
			if len(p.AcknowledgementBatches) > 0 {
				a := share.Ack{Ref: ref}
				for _, b := range p.AcknowledgementBatches {
					a.Batches = append(a.Batches, share.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes})
				}
				start.Acks = append(start.Acks, a)
			}
		}
	}
	for _, f := range req.ForgottenTopicsData {
		for _, p := range f.Partitions {
			start.Forget = append(start.Forget, share.PartitionRef{TopicID: f.TopicID, Topic: names[f.TopicID], Partition: p})
		}
	}
	plan := s.shares.coord.StartFetch(ctx, start)
	if plan.ErrorCode != 0 {
		resp.ErrorCode = plan.ErrorCode
		return resp
	}
	resp.AcquisitionLockTimeoutMillis = plan.LockMs

	out := map[share.PartitionRef]*kmsg.ShareFetchResponseTopicPartition{}
	part := func(ref share.PartitionRef) *kmsg.ShareFetchResponseTopicPartition {
		if rp := out[ref]; rp != nil {
			return rp
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition = ref.Partition
		rp.Records = []byte{}
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if p := s.leaderPartition(ref.Topic, ref.Partition); p != nil {
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = s.cfg.NodeID, p.LeaderEpoch.Load()
		} else if t, ok := s.meta.Image().Topic(ref.Topic); ok && int(ref.Partition) < len(t.Partitions) && ref.Partition >= 0 {
			// Another node leads it: say which, so the consumer goes
			// there (its share partition is served by its leader).
			ip := t.Partitions[ref.Partition]
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = ip.Leader, ip.LeaderEpoch
		}
		out[ref] = &rp
		return &rp
	}
	for ref, code := range plan.AckErrors {
		rp := part(ref)
		rp.AcknowledgeErrorCode = code
		if code == kerr.TopicAuthorizationFailed.Code {
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1 // nothing of a topic it may not read
		}
	}
	full := req.ShareSessionEpoch == 0
	for _, rd := range plan.Reads {
		if rd.ErrorCode != 0 || full {
			rp := part(rd.Ref)
			rp.ErrorCode = rd.ErrorCode
			if rd.ErrorCode == kerr.TopicAuthorizationFailed.Code {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			}
		}
	}

	// Renew-only requests (KIP-1222) and the closing request acquire
	// nothing.
	if req.ShareSessionEpoch != -1 && !start.Renew {
		maxRecords := int(req.MaxRecords)
		if maxRecords <= 0 {
			maxRecords = 500 // the consumer's max.poll.records default
		}
		exact := req.Version >= 2 && req.ShareAcquireMode == 1
		deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
		reads := plan.Reads
		// wake is signalled when a share partition read changes (records
		// released or acknowledged) while the fetch waits.
		wake := make(chan struct{}, 1)
		watched := false
		for {
			got, retry := s.shareAcquire(ctx, *req.GroupID, *req.MemberID, reads, plan.ReadCommitted, int(req.MaxBytes), maxRecords, exact, wake, part)
			wait := time.Until(deadline)
			if got || wait <= 0 || ctx.Err() != nil {
				break
			}
			if !retry {
				watched = true
				s.shareWait(ctx, reads, wait, wake)
			}
			reads = s.shares.coord.PlanReads(ctx, *req.GroupID, reads)
		}
		if watched {
			refs := make([]share.PartitionRef, len(plan.Reads))
			for i, rd := range plan.Reads {
				refs[i] = rd.Ref
			}
			// Not the connection's context: a closed connection's
			// registrations must go too.
			s.shares.coord.Unwatch(context.Background(), *req.GroupID, refs, wake)
		}
	}
	byTopic := map[[16]byte]int{}
	for ref, rp := range out {
		i, ok := byTopic[ref.TopicID]
		if !ok {
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = ref.TopicID
			resp.Topics = append(resp.Topics, t)
			i = len(resp.Topics) - 1
			byTopic[ref.TopicID] = i
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, *rp)
	}
	return resp
}

// shareAcquire reads each partition from its read offset, hands what it
// read to the coordinator to acquire, and puts the acquired records in
// their partitions' answers; it reports whether any record was acquired,
// and when none was whether the fetch should plan again at once (retry)
// rather than wait on wake, which the coordinator then signals at the
// partitions' next change.
func (s *Server) shareAcquire(ctx context.Context, group, member string, reads []share.PartitionRead, readCommitted bool,
	maxBytes, maxRecords int, exact bool, wake chan struct{}, part func(share.PartitionRef) *kmsg.ShareFetchResponseTopicPartition) (got, retry bool) {
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	var batches []share.PartitionBatches
	data := map[share.PartitionRef][]byte{}
	budget := maxBytes
	for _, rd := range reads {
		if rd.ErrorCode != 0 {
			continue
		}
		p := s.leaderPartition(rd.Ref.Topic, rd.Ref.Partition)
		if p == nil {
			part(rd.Ref).ErrorCode = kerr.NotLeaderForPartition.Code
			continue
		}
		pb := share.PartitionBatches{Ref: rd.Ref, From: rd.Offset}
		if budget > 0 {
			bs, raw, code := shareRead(p, rd.Offset, budget, readCommitted)
			if code != 0 {
				part(rd.Ref).ErrorCode = code
				continue
			}
			budget -= len(raw)
			data[rd.Ref] = raw
			pb.Batches = bs
		}
		batches = append(batches, pb)
	}
	if len(batches) == 0 {
		return false, false
	}
	acq := s.shares.coord.Acquire(ctx, group, member, batches, maxRecords, exact, wake)
	for ref, ranges := range acq.Acquired {
		rp := part(ref)
		rp.Records = batchesCovering(data[ref], ranges)
		for _, a := range ranges {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = a.First, a.Last, a.Deliveries
			rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
		}
	}
	return len(acq.Acquired) > 0, acq.Retry
}

// shareRead reads a partition from offset (or its log start, if that is
// later) up to its high watermark, or its last stable offset under
// read_committed, and describes the batches read. Control batches, and
// under read_committed the batches of aborted transactions, are marked to
// be skipped: no consumer sees them.
func shareRead(p *partition.Partition, offset int64, maxBytes int, readCommitted bool) ([]share.Batch, []byte, int16) {
	limit := p.HighWatermark()
	if readCommitted {
		lso, err := p.LastStableOffset()
		if err != nil {
			return nil, nil, errCode(err)
		}
		limit = lso
	}
	offset = max(offset, p.Log.LogStartOffset())
	if offset >= limit {
		return nil, nil, 0
	}
	rr, err := p.Log.Read(offset, int32(min(maxBytes, 1<<30)), limit, true)
	if err != nil {
		return nil, nil, errCode(err)
	}
	var aborted []partition.AbortedTxn
	if readCommitted && len(rr.Data) > 0 {
		if aborted, err = p.AbortedIn(offset, lastOffsetOf(rr.Data)+1); err != nil {
			return nil, nil, errCode(err)
		}
	}
	var out []share.Batch
	rest := rr.Data
	for len(rest) > 0 {
		_, next, h, err := protocol.NextBatch(rest)
		if err != nil {
			break
		}
		rest = next
		skip := h.IsControl()
		if !skip && h.IsTransactional() {
			for _, a := range aborted {
				if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
					skip = true
					break
				}
			}
		}
		out = append(out, share.Batch{First: h.BaseOffset, Last: h.LastOffset(), Skip: skip})
	}
	return out, rr.Data, 0
}

// batchesCovering returns the batches of data that hold an acquired
// offset: the consumer gets whole batches and keeps the acquired records.
func batchesCovering(data []byte, ranges []share.Acquired) []byte {
	out := []byte{}
	rest := data
	for len(rest) > 0 {
		batch, next, h, err := protocol.NextBatch(rest)
		if err != nil {
			break
		}
		rest = next
		for _, a := range ranges {
			if a.First <= h.LastOffset() && h.BaseOffset <= a.Last {
				out = append(out, batch...)
				break
			}
		}
	}
	return out
}

// shareWait waits, for at most d, for new records on the partitions read
// or for a change of their share partitions (wake).
func (s *Server) shareWait(ctx context.Context, reads []share.PartitionRead, d time.Duration, wake chan struct{}) {
	data := make(chan struct{}, 1)
	for _, rd := range reads {
		if p := s.parts.get(rd.Ref.Topic, rd.Ref.Partition); p != nil {
			p.AddWaiter(data)
			defer p.RemoveWaiter(data)
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-data:
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
	}
}

// topicNamesByID maps the image's topic ids to names.
func (s *Server) topicNamesByID() map[[16]byte]string {
	img := s.meta.Image()
	out := map[[16]byte]string{}
	for _, name := range img.TopicNames() {
		t, _ := img.Topic(name)
		out[t.ID] = name
	}
	return out
}
