package broker

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/fetch"
	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/security/authz"
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
// broker/internal/fetch. read_committed fetches stop at the last stable offset
// and list the aborted transactions in the range returned, so clients
// skip their records (broker/internal/partition). Records go from the segment files
// to the socket without a copy where the connection allows it
// (broker/internal/fetch).
func init() { register(1, 4, 18, handleFetch) }

// fetchPlan is one fetch's resolved partitions: the session's (for
// incremental fetches) or the request's.
type fetchPlan struct {
	ctx         context.Context // the connection's: a long poll ends with it
	replicaID   int32           // a follower's broker id, or -1 for a consumer
	brokerEpoch int64           // a follower's broker epoch (v15+), -1 when unknown
	req         *kmsg.FetchRequest
	maxBytes    int // the whole response's limit: min(MaxBytes, fetch.max.bytes)
	minBytes    int // min(MinBytes, maxBytes), as Kafka's KafkaApis
	// session is the incremental fetch's session, nil otherwise;
	// sessionEpoch is the epoch planning set, which must still be the
	// session's when the answer is built.
	session      *fetch.Session
	sessionEpoch int32
	incremental  bool
	// newSession asks finishFetch to open a session with the answer's
	// partitions (a full fetch with epoch 0).
	newSession bool
	// parts are what this fetch reads: for a session, copies taken under
	// its lock, so reading and waiting need no lock.
	parts    []*fetch.Part
	errs     []fetchPartError // partitions the request named that cannot be read
	zeroCopy bool             // read records as file slices for sendfile
	// quota is a consumer's fetch quota, nil when none can apply
	// (quota.go).
	quota *fetchQuota
	// deniedTopic reports the topics the principal may not fetch from
	// (READ for a consumer; a follower needs CLUSTER_ACTION); nil
	// without an authorizer.
	deniedTopic func(topic string) bool
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
	if req.Version >= 4 && req.IsolationLevel != 0 && req.IsolationLevel != 1 {
		// Kafka's IsolationLevel.forId throws, and KafkaApis answers
		// the whole request UNKNOWN_SERVER_ERROR.
		return respond(fetchErrorResponse(req, kerr.UnknownServerError.Code))
	}
	plan, code := s.planFetch(req)
	if code != 0 {
		resp.ErrorCode = code
		return respond(resp)
	}
	plan.ctx = r.conn.ctx
	if plan.replicaID >= 0 {
		r.conn.follower = true
	}
	if ac := s.auth(r); ac.enabled() {
		if plan.replicaID >= 0 {
			follower := ac.cluster(authz.OpClusterAction)
			plan.deniedTopic = func(string) bool { return !follower }
		} else {
			plan.deniedTopic = func(topic string) bool { return !ac.topic(authz.OpRead, topic) }
		}
	}
	plan.zeroCopy = !s.copyFetch && r.conn.raw != nil
	if plan.replicaID >= 0 || plan.zeroCopy {
		s.sizeFetchConn(r.conn, plan.maxBytes)
	}
	s.planFetchQuota(plan, r)
	out := s.readFetch(plan)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if out.satisfies(plan) || wait <= 0 || len(plan.errs) > 0 || hasErrors(out.parts) {
		return respond(s.finishFetch(plan, out))
	}
	out.release()
	out.recycle()
	// No lock is held across the wait: another fetch naming the session
	// meanwhile is answered at once (see broker/internal/fetch).
	return result{wait: func() kmsg.Response {
		out := s.longPoll(plan, wait)
		return s.finishFetch(plan, out)
	}}, nil
}

// sizeFetchConn raises, once per connection, the send buffer of a
// connection that fetches large responses to what one of them may hold
// (maxBytes, capped by the kernel's net.core.wmem_max): a follower's, and
// a consumer's whose records go out with sendfile. The buffer
// socket.send.buffer.bytes gives every accepted socket (100 KiB, as
// Kafka's) holds a tenth of a megabyte-long partition: the writer then
// sends each partition's records in ten and more sendfile calls, most
// ending with the socket full and a wait in the poller for the client to
// read, and each wake-up of either side waits for a core on a busy
// machine (for a follower, on the path an acks=all produce waits for).
// On a 16-partition consume that was about 0.13 s of the broker's 0.43
// s of CPU per GiB fetched (docs/performance.md, issue 17, session 10).
// A sendfile'd response queues references to page-cache pages, not
// copies, so the larger buffer costs a consumer's connection little
// memory; a consumer's TLS connection (which copies) keeps the
// configured buffer. With -1 the kernel sizes the buffer itself and it
// is left alone, and a socket.send.buffer.bytes the operator set is what
// every socket keeps: only the default gives way, so the setting means
// what it says.
func (s *Server) sizeFetchConn(c *conn, maxBytes int) {
	if _, set := s.cfg.Props["socket.send.buffer.bytes"]; set {
		return
	}
	if c.fetchSendBuffer || s.cfg.SocketSendBufferBytes == -1 || maxBytes <= int(s.cfg.SocketSendBufferBytes) {
		return
	}
	c.fetchSendBuffer = true
	tc, ok := c.nc.(*net.TCPConn)
	if !ok {
		return
	}
	if err := tc.SetWriteBuffer(maxBytes); err != nil {
		s.log.Debug("sizing a fetching connection's send buffer", "err", err)
	}
}

// planFetch resolves the request against its session, following KIP-227's
// epoch rules, and returns a top-level error code when the session is
// unusable.
func (s *Server) planFetch(req *kmsg.FetchRequest) (*fetchPlan, int16) {
	plan := &fetchPlan{req: req, replicaID: req.ReplicaID, brokerEpoch: -1}
	if req.Version >= 15 {
		plan.replicaID, plan.brokerEpoch = req.ReplicaState.ID, req.ReplicaState.Epoch
	}
	plan.maxBytes = int(req.MaxBytes)
	if plan.maxBytes <= 0 {
		plan.maxBytes = int(^uint32(0) >> 1)
	}
	plan.maxBytes = min(plan.maxBytes, int(s.cfg.FetchMaxBytes))
	plan.minBytes = min(int(req.MinBytes), plan.maxBytes)
	now := s.now()
	switch {
	case req.Version < 7:
		// Before v7 there are no sessions: every fetch is full.
	case req.SessionEpoch == fetch.FinalEpoch:
		// A full fetch that asks for no session closes the one it names.
		if req.SessionID != 0 {
			s.sessions.Remove(req.SessionID)
		}
	case req.SessionEpoch == 0:
		if req.SessionID != 0 {
			s.sessions.Remove(req.SessionID)
		}
		plan.newSession = true
	default:
		sess := s.sessions.Get(req.SessionID)
		if sess == nil {
			return nil, kerr.FetchSessionIDNotFound.Code
		}
		plan.session = sess
		plan.incremental = true
	}

	img := s.meta.Image()
	var reqParts []*fetch.Part
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
			reqParts = append(reqParts, &fetch.Part{
				Topic: name, TopicID: id, Partition: rp.Partition,
				FetchOffset: rp.FetchOffset, MaxBytes: rp.PartitionMaxBytes, LeaderEpoch: rp.CurrentLeaderEpoch,
			})
		}
	}
	if plan.replicaID < 0 {
		// A follower's fetch (Gregor's own replica fetcher) names each
		// partition once and may name thousands: it skips the check
		// rather than build a map of them every round.
		reqParts = dedupeFetchParts(reqParts)
	}
	if plan.session == nil {
		plan.parts = reqParts
		return plan, 0
	}
	return plan, s.planIncremental(plan, reqParts, now)
}

// planIncremental applies an incremental fetch to its session under the
// session's lock: the epoch must be the one the session expects, and is
// advanced at once, as Kafka's FetchManager.newContext does, so that a
// duplicate of this request is refused while this one is served. The
// plan gets copies of the session's partitions.
func (s *Server) planIncremental(plan *fetchPlan, reqParts []*fetch.Part, now time.Time) int16 {
	req, sess := plan.req, plan.session
	sess.Lock()
	defer sess.Unlock()
	if sess.Epoch != req.SessionEpoch {
		return kerr.InvalidFetchSessionEpoch.Code
	}
	for _, p := range reqParts {
		sess.Upsert(*p)
	}
	img := s.meta.Image()
	for _, ft := range req.ForgottenTopics {
		name := ft.Topic
		if req.Version >= 13 {
			if t, ok := img.TopicByID(ft.TopicID); ok {
				name = t.Name
			}
		}
		for _, p := range ft.Partitions {
			sess.Remove(name, p)
		}
	}
	if sess.Len() == 0 {
		// Nothing left to fetch: Kafka closes the session and answers
		// sessionless.
		s.sessions.Remove(sess.ID())
		plan.session, plan.incremental = nil, false
		plan.parts = reqParts
		return 0
	}
	s.sessions.Touch(sess, now, sess.Len())
	sess.Epoch = fetch.NextEpoch(sess.Epoch)
	plan.sessionEpoch = sess.Epoch
	plan.parts = append(plan.parts, sess.Copies()...)
	return 0
}

// readFetch reads every planned partition once: the answer's partitions in
// plan order, with file slices for records read for sendfile, and the
// bytes of records found. The caller releases the slices or passes them
// on to finishFetch.
func (s *Server) readFetch(plan *fetchPlan) fetchRead {
	b := fetchBudget{remaining: plan.maxBytes, minOne: true}
	read := fetchRead{parts: getFetchParts(len(plan.parts))}
	if plan.zeroCopy {
		read.slices = make([]*storage.FileSlice, len(plan.parts))
	}
	for i, fp := range plan.parts {
		rp, slice := s.readFetchPartition(plan, fp, &b)
		read.parts[i] = rp
		if slice != nil {
			read.slices[i] = slice
		}
	}
	read.bytes, read.full = b.total, b.capped
	return read
}

// fetchBudget is what the partitions of one fetch share as they are read
// in plan order.
type fetchBudget struct {
	remaining int // bytes the response may still hold
	// minOne: no records were read yet, so the next partition with some
	// returns at least one whole batch whatever the limits (KIP-74).
	minOne bool
	total  int  // bytes of records read
	capped bool // records were left behind for lack of room in the response
}

// readFetchPartition reads one planned partition within the fetch's
// budget b: its answer and, for a zero-copy read, the file slice of its
// records (nil otherwise), which the caller then owns.
func (s *Server) readFetchPartition(plan *fetchPlan, fp *fetch.Part, b *fetchBudget) (kmsg.FetchResponseTopicPartition, *storage.FileSlice) {
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.Partition = fp.Partition
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
	rp.PreferredReadReplica = -1
	// Kafka sends empty records, never null: librdkafka refuses a
	// null record set.
	rp.RecordBatches = []byte{}
	p, code := s.fetchablePartition(plan, fp)
	if code != 0 {
		rp.ErrorCode = code
		return rp, nil
	}
	follower := plan.replicaID >= 0
	readCommitted := plan.req.IsolationLevel == 1 && !follower
	maxOffset, code := s.fetchBounds(p, fp, &rp, follower, readCommitted)
	if code != 0 {
		rp.ErrorCode = code
		return rp, nil
	}
	slice := s.readFetchRecords(plan, p, fp, b, &rp, maxOffset, readCommitted)
	return rp, slice
}

// readFetchRecords reads a partition's records below maxOffset into rp
// (or, for a zero-copy read, returns their file slice), within the fetch's
// budget b, which it charges.
func (s *Server) readFetchRecords(plan *fetchPlan, p *partition.Partition, fp *fetch.Part, b *fetchBudget,
	rp *kmsg.FetchResponseTopicPartition, maxOffset int64, readCommitted bool) *storage.FileSlice {
	limit := min(int(fp.MaxBytes), b.remaining)
	// byBudget: the response's limit, not the partition's, bounds this
	// read; records it leaves behind mean the response is full.
	byBudget := b.remaining < int(fp.MaxBytes)
	if limit <= 0 && !b.minOne {
		b.capped = b.capped || fp.FetchOffset < maxOffset
		return nil
	}
	read := p.Log.Read
	if plan.zeroCopy {
		read = p.Log.ReadSlice
	}
	rr, err := read(fp.FetchOffset, int32(max(limit, 0)), maxOffset, b.minOne)
	if err != nil {
		rp.ErrorCode = s.fetchReadCode(p, fp, err)
		return nil
	}
	n, last := len(rr.Data), int64(-1)
	if rr.Slice != nil {
		n, last = int(rr.Slice.Len()), rr.Slice.LastOffset()
	} else if n > 0 {
		rp.RecordBatches = rr.Data
		last = lastOffsetOf(rr.Data)
	}
	if n > 0 && readCommitted {
		aborted, code := s.fetchAborted(p, fp, last)
		if code != 0 {
			// Records without their aborted transactions would show a
			// consumer aborted data: answer none.
			rp.ErrorCode = code
			rp.RecordBatches = []byte{}
			if rr.Slice != nil {
				rr.Slice.Release()
			}
			return nil
		}
		rp.AbortedTransactions = aborted
	}
	next := fp.FetchOffset
	if n > 0 {
		b.minOne = false
		b.remaining -= n
		b.total += n
		next = last + 1
	}
	b.capped = b.capped || byBudget && next < maxOffset
	return rr.Slice
}

// fetchablePartition is the partition a fetch may read, led by this node
// at the leader epoch the client knows, or the code that answers it
// instead. A follower's fetch offset is its log end: it moves the high
// watermark (followerFetched).
func (s *Server) fetchablePartition(plan *fetchPlan, fp *fetch.Part) (*partition.Partition, int16) {
	// KafkaApis: authorization before existence, so a denied principal
	// learns nothing of the partition.
	if plan.deniedTopic != nil && plan.deniedTopic(fp.Topic) {
		return nil, kerr.TopicAuthorizationFailed.Code
	}
	p := s.leaderPartition(fp.Topic, fp.Partition)
	if p == nil {
		return nil, s.partitionMissingCode(fp.Topic, fp.Partition)
	}
	if code := checkLeaderEpoch(fp.LeaderEpoch, p.LeaderEpoch.Load()); code != 0 {
		return nil, code
	}
	if plan.replicaID >= 0 {
		if err := s.followerFetched(p, plan.replicaID, plan.brokerEpoch, fp.FetchOffset); err != nil {
			return nil, errCode(err)
		}
	}
	return p, 0
}

// fetchBounds fills in the partition's offsets in rp and returns the
// offset a read stops before: the high watermark for a consumer, the last
// stable offset for read_committed, and the log end for a follower, which
// reads up to the leader's log end.
func (s *Server) fetchBounds(p *partition.Partition, fp *fetch.Part, rp *kmsg.FetchResponseTopicPartition, follower, readCommitted bool) (int64, int16) {
	hw := p.HighWatermark()
	rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, p.LSO.Load(), p.Log.LogStartOffset()
	maxOffset := hw
	if follower {
		maxOffset = p.Log.LogEndOffset()
	}
	if readCommitted {
		lso, err := p.LastStableOffset()
		if err != nil {
			s.log.Error("fetch: transactions", "topic", fp.Topic, "partition", fp.Partition, "err", err)
			return 0, kerr.KafkaStorageError.Code
		}
		rp.LastStableOffset, maxOffset = lso, lso
	}
	return maxOffset, 0
}

// fetchReadCode is the code of a partition whose read failed with err.
func (s *Server) fetchReadCode(p *partition.Partition, fp *fetch.Part, err error) int16 {
	switch {
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, storage.ErrClosed) || s.parts.get(fp.Topic, fp.Partition) != p:
		// The topic was deleted (or recreated) while this fetch read
		// it: not a disk failure.
		code := s.partitionMissingCode(fp.Topic, fp.Partition)
		if code == kerr.NotLeaderForPartition.Code {
			code = kerr.UnknownTopicOrPartition.Code
		}
		return code
	}
	s.log.Error("fetch read", "topic", fp.Topic, "partition", fp.Partition, "offset", fp.FetchOffset, "err", err)
	s.storageFailed(p, err)
	return kerr.KafkaStorageError.Code
}

// fetchAborted lists the aborted transactions of a read_committed read
// that returned records up to last, or the code that answers the
// partition when they cannot be found.
func (s *Server) fetchAborted(p *partition.Partition, fp *fetch.Part, last int64) ([]kmsg.FetchResponseTopicPartitionAbortedTransaction, int16) {
	aborted, err := p.AbortedIn(fp.FetchOffset, last+1)
	if err != nil {
		s.log.Error("fetch: aborted transactions", "topic", fp.Topic, "partition", fp.Partition, "offset", fp.FetchOffset, "err", err)
		if errors.Is(err, storage.ErrOffsetOutOfRange) {
			return nil, kerr.OffsetOutOfRange.Code
		}
		return nil, kerr.KafkaStorageError.Code
	}
	return abortedFor(aborted), 0
}

// fetchRead is one read of every planned partition: the answer per
// partition, in plan order, and for each one whose batches stay in a
// segment file, their slice (nil otherwise).
type fetchRead struct {
	parts  []kmsg.FetchResponseTopicPartition
	slices []*storage.FileSlice
	bytes  int  // of records found
	full   bool // records were left out for lack of room in the response
}

// fetchPartsPool keeps the arrays of partition answers that reads fill
// and finishFetch copies into the response: a consumer's long poll reads
// once or more per fetch, and at 16 partitions each array is a few KB,
// after the produce frames the largest allocation of an end-to-end run
// at 50,000 msg/s (docs/performance.md).
var fetchPartsPool = sync.Pool{New: func() any { return new([]kmsg.FetchResponseTopicPartition) }}

// getFetchParts returns an array of n partition answers, each to be
// overwritten.
func getFetchParts(n int) []kmsg.FetchResponseTopicPartition {
	p := fetchPartsPool.Get().(*[]kmsg.FetchResponseTopicPartition)
	if cap(*p) < n {
		return make([]kmsg.FetchResponseTopicPartition, n)
	}
	return (*p)[:n]
}

// recycle gives the read's array of answers back to fetchPartsPool, once
// nothing refers to it: finishFetch copied the answers into its
// response, or the read was released and dropped.
func (fr *fetchRead) recycle() {
	if fr.parts == nil {
		return
	}
	clear(fr.parts) // no record data held from the pool
	parts := fr.parts[:0]
	fr.parts = nil
	fetchPartsPool.Put(&parts)
}

// release unpins the files of a read that will not be sent.
func (fr *fetchRead) release() {
	for i, s := range fr.slices {
		if s != nil {
			s.Release()
			fr.slices[i] = nil
		}
	}
}

// satisfies reports whether a read ends the fetch's wait: MinBytes found,
// or as much as fetch.max.bytes lets one response hold, so a MinBytes above
// the cap does not wait out MaxWait with the data already there (Kafka's
// DelayedFetch counts the bytes available, not the bytes that fit).
func (fr *fetchRead) satisfies(plan *fetchPlan) bool {
	return fr.bytes >= plan.minBytes || fr.full
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
		if p := s.parts.get(fp.Topic, fp.Partition); p != nil {
			p.AddWaiter(wake)
			defer p.RemoveWaiter(wake)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// Read after registering, so an append between the first read and
		// the registration is not missed.
		out := s.readFetch(plan)
		if out.satisfies(plan) || hasErrors(out.parts) {
			return out
		}
		select {
		case <-wake:
			out.release()
			out.recycle()
		case <-timer.C:
			out.release()
			out.recycle()
			return s.readFetch(plan)
		case <-plan.ctx.Done():
			return out
		}
	}
}

// finishFetch builds the response from the partitions read: all of them
// for a full fetch, only those with news for an incremental one. A full
// fetch with epoch 0 opens its session here, with what the answer tells
// the client; an incremental one records that in its session, under the
// session's lock, unless another fetch has used the session since this
// one was planned, which makes the answer INVALID_FETCH_SESSION_EPOCH as
// in Kafka. Records in file slices make it a fetch.ZeroCopyResponse, which the
// connection's writer sends.
func (s *Server) finishFetch(plan *fetchPlan, read fetchRead) kmsg.Response {
	defer read.recycle() // every answer is copied into resp
	resp := plan.req.ResponseKind().(*kmsg.FetchResponse)
	// Slices left out of the answer are released after the session's
	// lock, which is never held while taking a storage lock.
	var drop []*storage.FileSlice
	defer func() {
		for _, sl := range drop {
			sl.Release()
		}
	}()
	if sess := plan.session; sess != nil {
		sess.Lock()
		defer sess.Unlock()
		resp.SessionID = sess.ID()
		if sess.Epoch != plan.sessionEpoch {
			s.log.Info("fetch session used by another fetch meanwhile", "session", sess.ID(),
				"expected_epoch", plan.sessionEpoch, "epoch", sess.Epoch)
			for _, sl := range read.slices {
				if sl != nil {
					drop = append(drop, sl)
				}
			}
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
			return resp
		}
	}
	if ms := s.fetchQuotaThrottle(plan, read); ms > 0 {
		// Over its quota, the consumer gets an empty answer that
		// changes nothing in its session (Kafka's getThrottledResponse):
		// a new session is not opened.
		for _, sl := range read.slices {
			if sl != nil {
				drop = append(drop, sl)
			}
		}
		resp.ThrottleMillis = int32(ms)
		return resp
	}
	var cur *kmsg.FetchResponseTopic
	var files []fetch.FileRecords
	add := func(topic string, id [16]byte, rp kmsg.FetchResponseTopicPartition, slice *storage.FileSlice) {
		if cur == nil || cur.Topic != topic || cur.TopicID != id {
			resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
			cur = &resp.Topics[len(resp.Topics)-1]
			cur.Topic, cur.TopicID = topic, id
		}
		if slice != nil {
			files = append(files, fetch.FileRecords{Topic: len(resp.Topics) - 1, Partition: len(cur.Partitions), Slice: slice})
		}
		cur.Partitions = append(cur.Partitions, rp)
	}
	var opened []fetch.Part
	for i, fp := range plan.parts {
		rp := read.parts[i]
		var slice *storage.FileSlice
		if read.slices != nil {
			slice = read.slices[i]
		}
		hasRecords := len(rp.RecordBatches) > 0 || slice != nil
		if plan.session != nil && !plan.session.RecordSent(fp, rp, hasRecords) {
			if slice != nil {
				drop = append(drop, slice)
			}
			continue
		}
		if plan.newSession {
			sent := *fp
			sent.SentHW, sent.SentLSO, sent.SentLogStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
			opened = append(opened, sent)
		}
		if hasRecords {
			n := len(rp.RecordBatches)
			if slice != nil {
				n = int(slice.Len())
			}
			s.countFetched(fp.Topic, fp.Partition, n, plan.replicaID >= 0)
		}
		add(fp.Topic, fp.TopicID, rp, slice)
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
	if plan.newSession {
		if sess := s.sessions.Create(s.now(), plan.replicaID >= 0, opened); sess != nil {
			resp.SessionID = sess.ID()
		}
	}
	if len(files) > 0 {
		return &fetch.ZeroCopyResponse{FetchResponse: resp, Records: files}
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

func abortedFor(txns []partition.AbortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(txns))
	for i, t := range txns {
		out[i] = kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		out[i].ProducerID, out[i].FirstOffset = t.ProducerID, t.FirstOffset
	}
	return out
}

// fetchErrorResponse answers every partition of a fetch with code, and the
// request too from v7, where the response has a top-level error.
func fetchErrorResponse(req *kmsg.FetchRequest, code int16) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.ErrorCode = code
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// dedupeFetchParts keeps one entry per partition, as the later one says,
// in the place of the first: Kafka's FetchRequest keeps them in a
// LinkedHashMap. Small fetches are scanned, large ones use a map.
func dedupeFetchParts(parts []*fetch.Part) []*fetch.Part {
	type key struct {
		topic     string
		partition int32
	}
	var seen map[key]int
	if len(parts) > 16 {
		seen = make(map[key]int, len(parts))
	}
	out := parts[:0]
	for _, p := range parts {
		k := key{p.Topic, p.Partition}
		j := -1
		if seen != nil {
			if i, ok := seen[k]; ok {
				j = i
			}
		} else {
			j = slices.IndexFunc(out, func(q *fetch.Part) bool { return q.Topic == k.topic && q.Partition == k.partition })
		}
		if j >= 0 {
			out[j] = p
			continue
		}
		if seen != nil {
			seen[k] = len(out)
		}
		out = append(out, p)
	}
	return out
}
