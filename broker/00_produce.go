package broker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// Produce (key 0), versions 0-13; v0-v2 answer UNSUPPORTED_VERSION.
//
// Kafka 4 removed v0-v2 but still advertises them, answering
// UNSUPPORTED_VERSION, because librdkafka up to 2.11 disables gzip, snappy
// and lz4 when the advertised minimum is above 0. v13 names topics by id.
//
// The request is first checked as Kafka checks it (checkProduce): acks,
// a transactional id for transactional batches, one producer per request,
// the partition's existence, one magic-2 batch per partition, internal
// topics; a partition named twice is appended and answered once, for its
// last copy. Then the first phase runs in connection order: each
// partition's batch is validated (size against max.message.bytes,
// CRC-32C, magic 2, record counts, timestamps) and appended under the
// partition's lock; offsets are assigned by rewriting the batch's base
// offset and leader epoch, which lie outside the CRC, so the bytes on disk
// are the bytes the producer sent (except LogAppendTime, which rewrites the
// max timestamp and the CRC, as Kafka does). acks=0 writes no response;
// acks=1 answers after the local append; acks=all waits, in the second
// phase, until the high watermark covers every appended batch or the
// request's timeout passes.
//
// Batches carrying a producer id are checked against the partition's
// producer state (broker/internal/partition); transactional ones also keep the last
// stable offset below their transaction until its marker
// (broker/internal/partition). A transactional batch that would start a
// transaction on its partition is first checked with (or, from v12,
// added by) the transaction coordinator: KIP-890, txn_verify.go.
const apiKeyProduce = 0

func init() { register(apiKeyProduce, 0, 13, handleProduce) }

func handleProduce(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	chk := s.checkProduce(r, req)
	var ver *produceVerification
	if chk.whole == nil && validAcks(req.Acks) {
		// Kafka verifies before it checks acks (handleProduceAppend,
		// then appendRecords); a request refused for its acks skips
		// the verification here, so it adds no partition to a
		// transaction (Produce v12+) while appending nothing.
		ver = s.verifyProduce(r.conn.ctx, req)
	}
	now := s.now()
	var waits []hwWait
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	flushes := make([]produceFlush, 0, n) // one allocation, not one per growth
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		for j := range rt.Partitions {
			if chk.skip[i][j] {
				continue
			}
			sp, w, fl := s.producePartition(req, &chk, ver, i, j, now)
			if w != nil {
				w.topicIdx, w.idx = len(resp.Topics), len(st.Partitions)
				waits = append(waits, *w)
			}
			if fl.p != nil {
				fl.topicIdx, fl.idx = len(resp.Topics), len(st.Partitions)
				flushes = append(flushes, fl)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	waits = flushProduced(resp, flushes, waits)
	if req.Acks == 0 {
		return acksZeroResult(resp)
	}
	if pending := pendingWaits(waits); len(pending) > 0 {
		timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
		return result{wait: func() kmsg.Response {
			s.awaitHighWatermarks(resp, pending, timeout)
			return resp
		}}, nil
	}
	markDeposed(resp, waits)
	return respond(resp)
}

// producePartition answers partition j of topic i of a produce: with the
// request-level verdicts of checkProduce if there is one, else with its
// append (appendPartition). For acks=all it also returns what the answer
// waits for, without its place in the response.
func (s *Server) producePartition(req *kmsg.ProduceRequest, chk *produceChecked, ver *produceVerification, i, j int, now time.Time) (kmsg.ProduceResponseTopicPartition, *hwWait, produceFlush) {
	rp := &req.Topics[i].Partitions[j]
	sp := kmsg.NewProduceResponseTopicPartition()
	sp.Partition = rp.Partition
	sp.BaseOffset = -1
	sp.LogAppendTime = -1
	sp.LogStartOffset = -1
	switch {
	case req.Version < 3:
		sp.ErrorCode = kerr.UnsupportedVersion.Code
	case chk.whole != nil:
		sp.ErrorCode = chk.whole.Code
		sp.ErrorMessage = &chk.wholeMsg
	case chk.codes[i][j] != 0:
		sp.ErrorCode = chk.codes[i][j]
		if msg := chk.msgs[i][j]; msg != "" {
			sp.ErrorMessage = &msg
		}
	default:
		return s.appendPartition(req, ver, chk.names[i], rp, sp, now)
	}
	return sp, nil, produceFlush{}
}

// appendPartition appends a partition's batch that passed the request's
// checks, once the transaction coordinator verified it (txn_verify.go),
// and fills in its answer sp. The append is made durable after every
// partition of the request is appended (flushProduced, from what the
// returned produceFlush names; none when its p is nil).
func (s *Server) appendPartition(req *kmsg.ProduceRequest, ver *produceVerification, name string, rp *kmsg.ProduceRequestTopicPartition,
	sp kmsg.ProduceResponseTopicPartition, now time.Time) (kmsg.ProduceResponseTopicPartition, *hwWait, produceFlush) {
	if code, msg := ver.failure(name, rp.Partition); code != 0 {
		sp.ErrorCode = code
		if msg != "" {
			// A copy: taking msg's own address would move it to the
			// heap on every call, one allocation per partition.
			m := msg
			sp.ErrorMessage = &m
		}
		return sp, nil, produceFlush{}
	}
	p := s.leaderPartition(name, rp.Partition)
	if p == nil {
		sp.ErrorCode = s.partitionMissingCode(name, rp.Partition)
		return sp, nil, produceFlush{}
	}
	if req.Acks == -1 && p.InSyncReplicas() < int(p.Cfg.Load().MinInsyncReplicas) {
		sp.ErrorCode = kerr.NotEnoughReplicas.Code
		return sp, nil, produceFlush{}
	}
	demotions := p.Demotions.Load()
	res, err := s.appendProduced(p, rp.Records, now, ver.guard(name, rp.Partition))
	if err != nil {
		sp.ErrorCode = errCode(err)
		msg := err.Error()
		sp.ErrorMessage = &msg
		if sp.ErrorCode == kerr.UnknownServerError.Code || sp.ErrorCode == kerr.KafkaStorageError.Code {
			s.log.Error("produce", "topic", name, "partition", rp.Partition, "err", err)
		}
		return sp, nil, produceFlush{}
	}
	p.Metrics.Produced(res.lastOffset-res.firstOffset+1, len(rp.Records))
	sp.BaseOffset = res.firstOffset
	sp.LogAppendTime = res.logAppendTime
	sp.LogStartOffset = p.Log.LogStartOffset()
	fl := produceFlush{p: p, last: res.lastOffset} // by value: no allocation per partition
	if req.Acks != -1 {
		return sp, nil, fl
	}
	return sp, &hwWait{p: p, offset: res.lastOffset + 1, demotions: demotions}, fl
}

// acksZeroResult ends an acks=0 produce, which writes no response. With
// no answer to carry an error, Kafka closes the connection: the client
// notices, refreshes its metadata and reconnects.
func acksZeroResult(resp *kmsg.ProduceResponse) (result, error) {
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if sp.ErrorCode != 0 {
				return result{}, fmt.Errorf("acks=0 produce to %s-%d failed: %w", st.Topic, sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
			}
		}
	}
	return result{}, nil
}

// produceTopicName resolves a produce request's topic, by id from v13.
func (s *Server) produceTopicName(version int16, rt *kmsg.ProduceRequestTopic) (string, *kerr.Error) {
	if version < 13 {
		return rt.Topic, nil
	}
	t, ok := s.meta.Image().TopicByID(rt.TopicID)
	if !ok {
		return "", kerr.UnknownTopicID
	}
	return t.Name, nil
}

// adminClientID is the client id Kafka lets append to internal topics
// (AdminUtils.ADMIN_CLIENT_ID).
const adminClientID = "__admin_client"

// produceChecked is the outcome of the checks Kafka makes of a produce
// request before it appends anything. whole, when set, fails every
// partition; otherwise codes[i][j] (with msgs[i][j]) fails partition j of
// topic i, 0 letting it append. names[i] is topic i's name. skip[i][j]
// marks a partition the request names again later: Kafka keeps each
// partition's records in a map, so only the last copy is appended and
// answered.
type produceChecked struct {
	whole    *kerr.Error
	wholeMsg string
	names    []string
	codes    [][]int16
	msgs     [][]string
	skip     [][]bool
}

// checkProduce applies, in Kafka's order, the checks of
// KafkaApis.handleProduceRequest (transactional records need a
// transactional id; the partition must exist; ProduceRequest.validateRecords),
// ReplicaManager.handleProduceAppend (the transactional batches of one
// request belong to one producer), ReplicaManager.appendRecords (acks is
// -1, 0 or 1) and appendToLocalLog (internal topics only for the admin
// client). A partition that fails any of them appends nothing; the others
// go on (unless the failure is of the whole request).
func (s *Server) checkProduce(r *request, req *kmsg.ProduceRequest) produceChecked {
	n := len(req.Topics)
	chk := produceChecked{names: make([]string, n), codes: make([][]int16, n), msgs: make([][]string, n), skip: make([][]bool, n)}
	last := chk.lastCopies(s, req)
	img := s.meta.Image()
	producers := make(map[[2]int64]bool)
	anyTransactional := false
	ac := s.auth(r)
	for i := range req.Topics {
		rt := &req.Topics[i]
		chk.codes[i] = make([]int16, len(rt.Partitions))
		chk.msgs[i] = make([]string, len(rt.Partitions))
		name, topicErr := s.produceTopicName(req.Version, rt)
		chk.names[i] = name
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			txnal, pids := transactionalBatches(rp.Records)
			anyTransactional = anyTransactional || txnal
			if topicErr == nil && last[produceKey{name, rp.Partition}] != [2]int{i, j} {
				chk.skip[i][j] = true
				continue
			}
			code, msg := int16(0), ""
			switch {
			case topicErr != nil:
				code = topicErr.Code
			case !ac.topic(authz.OpWrite, name):
				code = kerr.TopicAuthorizationFailed.Code
			case !partitionExists(img, name, rp.Partition):
				code = kerr.UnknownTopicOrPartition.Code
			default:
				if err := validateProduceRecords(req.Version, rp.Records); err != nil {
					code, msg = errCode(err), err.Error()
					break
				}
				for _, pe := range pids {
					producers[pe] = true
				}
				switch {
				case !validAcks(req.Acks):
					code = kerr.InvalidRequiredAcks.Code
				case isInternalTopic(name) && (r.hdr.ClientID == nil || *r.hdr.ClientID != adminClientID):
					code = kerr.InvalidTopicException.Code
				}
			}
			chk.codes[i][j], chk.msgs[i][j] = code, msg
		}
	}
	switch {
	case anyTransactional && req.TransactionID == nil:
		// Kafka authorizes the transactional id of a request carrying
		// transactional records; a null one never passes.
		chk.whole, chk.wholeMsg = kerr.TransactionalIDAuthorizationFailed, "transactional records without a transactional id"
	case anyTransactional && !ac.txnID(authz.OpWrite, *req.TransactionID):
		chk.whole, chk.wholeMsg = kerr.TransactionalIDAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed.Description
	case len(producers) > 1:
		chk.whole, chk.wholeMsg = kerr.InvalidProducerIDMapping, "Transactional records contained more than one producer ID"
	}
	return chk
}

// produceKey names a partition of a produce request.
type produceKey struct {
	topic     string
	partition int32
}

// lastCopies sizes chk.skip and returns where each partition the request
// names (by a known topic) appears last.
func (chk *produceChecked) lastCopies(s *Server, req *kmsg.ProduceRequest) map[produceKey][2]int {
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	last := make(map[produceKey][2]int, n) // sized once: a request may name thousands
	for i := range req.Topics {
		rt := &req.Topics[i]
		chk.skip[i] = make([]bool, len(rt.Partitions))
		name, topicErr := s.produceTopicName(req.Version, rt)
		if topicErr != nil {
			continue
		}
		for j := range rt.Partitions {
			last[produceKey{name, rt.Partitions[j].Partition}] = [2]int{i, j}
		}
	}
	return last
}

// validAcks is ReplicaManager.isValidRequiredAcks.
func validAcks(acks int16) bool { return acks == -1 || acks == 0 || acks == 1 }

// partitionExists reports whether the cluster's metadata has the
// partition (Kafka's metadataCache.contains), whoever leads it.
func partitionExists(img *image.Image, topic string, partition int32) bool {
	t, ok := img.Topic(topic)
	return ok && partition >= 0 && int(partition) < len(t.Partitions)
}

// transactionalBatches walks the batch headers of one partition's records
// (as Kafka's RequestUtils.hasTransactionalRecords does every batch): it
// reports whether any is transactional, and the (producer id, epoch) of
// each transactional one that carries a producer id. The walk stops at
// the first header that does not parse; the append's validation answers
// for it.
func transactionalBatches(records []byte) (bool, [][2]int64) {
	txnal := false
	var pids [][2]int64
	for len(records) > 0 {
		h, err := protocol.ParseBatchHeader(records)
		if err != nil || h.Size() <= 0 || h.Size() > len(records) {
			break
		}
		if h.IsTransactional() {
			txnal = true
			if h.ProducerID >= 0 {
				pids = append(pids, [2]int64{h.ProducerID, int64(h.ProducerEpoch)})
			}
		}
		records = records[h.Size():]
	}
	return txnal, pids
}

// validateProduceRecords is ProduceRequest.validateRecords for v3+: a
// partition carries exactly one batch, of magic 2, and zstd only from v7.
// Whether the batch itself is sound is left to the append's validation.
func validateProduceRecords(version int16, records []byte) error {
	if len(records) == 0 {
		return kerrMsg(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d must have at least one record batch per partition", version))
	}
	h, err := protocol.ParseBatchHeader(records)
	switch {
	case errors.Is(err, protocol.ErrMagic) && (h.Magic == 0 || h.Magic == 1):
		return kerrMsg(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d are only allowed to contain record batches with magic version 2", version))
	case err != nil:
		// An unknown magic or a torn header: CORRUPT_MESSAGE from the
		// append's validation, as Kafka's batch iterator throws.
		return nil
	case version < 7 && h.Codec() == protocol.CodecZstd:
		return kerrMsg(kerr.UnsupportedCompressionType, fmt.Sprintf("Produce requests with version %d are not allowed to use ZStandard compression", version))
	case h.Size() < len(records):
		return kerrMsg(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d are only allowed to contain exactly one record batch per partition", version))
	}
	return nil
}

// partitionMissingCode is the error for a partition this node does not
// host: unknown to the cluster, or led elsewhere.
func (s *Server) partitionMissingCode(topic string, partition int32) int16 {
	t, ok := s.meta.Image().Topic(topic)
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition.Code
	}
	if p := s.parts.get(topic, partition); p != nil && s.dirOffline(p) {
		return kerr.KafkaStorageError.Code
	}
	if s.parts.createFailed(topic, partition) != nil {
		// Hosted here, but its log could not be created yet
		// (metadata_sync.go): a storage error, as for an offline dir.
		return kerr.KafkaStorageError.Code
	}
	return kerr.NotLeaderForPartition.Code
}

type appendResult struct {
	firstOffset, lastOffset int64
	logAppendTime           int64
}

// appendProduced validates one partition's records as Kafka's LogValidator
// does and appends them. guard is the partition's KIP-890 verification.
// The append is not yet durable: the caller calls p.Durable on its last
// offset (flushProduced) before answering.
func (s *Server) appendProduced(p *partition.Partition, records []byte, now time.Time, guard producerstate.Guard) (appendResult, error) {
	res := appendResult{firstOffset: -1, logAppendTime: -1}
	cfg := p.Cfg.Load()
	if len(records) > int(cfg.MaxMessageBytes)+protocol.BatchHeaderSize {
		return res, fmt.Errorf("%w: %d bytes over max.message.bytes %d", kerr.MessageTooLarge, len(records), cfg.MaxMessageBytes)
	}
	batch, rest, _, err := protocol.NextBatch(records)
	if err != nil {
		return res, batchError(err)
	}
	if len(rest) != 0 {
		return res, fmt.Errorf("%w: produce v3+ carries exactly one batch per partition", kerr.InvalidRecord)
	}
	if len(batch) > int(cfg.MaxMessageBytes) {
		return res, fmt.Errorf("%w: batch of %d bytes over max.message.bytes %d", kerr.MessageTooLarge, len(batch), cfg.MaxMessageBytes)
	}
	info, err := s.validateProduced(batch, int(s.cfg.SocketRequestMaxBytes)) // produce_precheck.go
	if err != nil {
		return res, batchError(err)
	}
	if info.NullKeys > 0 && cfg.Compact() {
		return res, fmt.Errorf("%w: compacted topic cannot accept a record without a key", kerr.InvalidRecord)
	}
	if info.Header.IsTransactional() && info.Header.ProducerID < 0 {
		return res, fmt.Errorf("%w: transactional batch without a producer id", kerr.InvalidRecord)
	}
	if batch, err = recompress(batch, &info.Header, cfg, int(s.cfg.SocketRequestMaxBytes), int(cfg.MaxMessageBytes)); err != nil {
		return res, batchError(err)
	}
	nowMs := now.UnixMilli()
	if cfg.TimestampType == "LogAppendTime" {
		protocol.SetLogAppendTime(batch, nowMs)
		res.logAppendTime = nowMs
	} else if err := checkTimestamps(&info, nowMs, cfg.TimestampBeforeMaxMs, cfg.TimestampAfterMaxMs); err != nil {
		return res, err
	}
	if info.Header.ProducerID < 0 {
		p.Mu.Lock()
		last, err := p.AppendLocked(batch, nowMs)
		p.Mu.Unlock()
		if err != nil {
			return res, err
		}
		res.firstOffset = last - int64(info.Header.LastOffsetDelta)
		res.lastOffset = last
		return res, nil
	}
	return s.appendIdempotent(p, batch, &info.Header, nowMs, guard, res)
}

// appendIdempotent checks an idempotent batch's sequence against the
// partition's producer state and appends it under one hold of the
// partition lock, so the check and the append see the same state. A
// duplicate of one of the producer's last five batches is answered with
// the original offsets and nothing is written. A transactional batch must
// pass its KIP-890 verification (guard).
func (s *Server) appendIdempotent(p *partition.Partition, batch []byte, h *protocol.BatchHeader, nowMs int64, guard producerstate.Guard, res appendResult) (appendResult, error) {
	bi := partition.BatchProducerInfo(h)
	p.Mu.Lock()
	defer p.Mu.Unlock()
	// Before the producer state: a follower's must not learn a batch
	// that appendLocked then refuses.
	if err := p.LeaderLocked(); err != nil {
		return res, err
	}
	var st *producerstate.State
	var err error
	if h.IsTransactional() {
		// A transaction moves the last stable offset: the whole log's
		// transactional state must be known.
		st, err = p.TxnStateLocked()
	} else {
		st, err = p.ProducerStateLocked()
	}
	if err != nil {
		return res, fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	dup, err := st.Check(bi)
	if err != nil {
		return res, err
	}
	if dup != nil {
		res.firstOffset, res.lastOffset = dup.FirstOffset, dup.LastOffset
		return res, nil
	}
	if err := st.CheckVerified(bi, guard, s.cfg.TransactionPartitionVerificationEnable); err != nil {
		return res, err
	}
	// The state learns the batch before the append publishes it, so the
	// last stable offset never passes an open transaction's first batch,
	// not even for a moment. One writer holds p.Mu: the batch lands at the
	// log end.
	first := p.Log.LogEndOffset()
	ts := h.MaxTimestamp
	if res.logAppendTime >= 0 {
		ts = res.logAppendTime
	}
	st.Update(bi, first, first+int64(h.LastOffsetDelta), ts)
	last, err := p.AppendLocked(batch, nowMs)
	if err != nil {
		return res, err
	}
	res.firstOffset, res.lastOffset = last-int64(h.LastOffsetDelta), last
	return res, nil
}

// topicCodecs maps a topic's compression.type to the codec the broker
// writes; "producer" (keep the producer's) is absent.
var topicCodecs = map[string]protocol.Codec{
	"uncompressed": protocol.CodecNone,
	"gzip":         protocol.CodecGzip,
	"snappy":       protocol.CodecSnappy,
	"lz4":          protocol.CodecLZ4,
	"zstd":         protocol.CodecZstd,
}

// recompress rewrites a batch in the topic's compression.type when that
// names a codec other than the producer's, as Kafka's LogValidator does;
// the producer id, sequence, timestamps and record offsets are kept. The
// records stream from decoder to encoder (protocol.RecompressBatchLevel),
// at the topic's level for the codec (KIP-390); a result over
// max.message.bytes is MESSAGE_TOO_LARGE, as in Kafka.
func recompress(batch []byte, h *protocol.BatchHeader, cfg *config.Topic, limit, maxSize int) ([]byte, error) {
	codec, ok := topicCodecs[cfg.CompressionType]
	if !ok || codec == h.Codec() {
		return batch, nil
	}
	return protocol.RecompressBatchLevel(batch, codec, compressionLevel(cfg, codec), limit, maxSize)
}

// checkTimestamps applies message.timestamp.before.max.ms and
// .after.max.ms to a CreateTime batch's smallest and largest record
// timestamps, so every record is within them.
func checkTimestamps(info *protocol.BatchInfo, nowMs, beforeMax, afterMax int64) error {
	for _, ts := range []int64{info.MinTimestamp, info.MaxTimestamp} {
		if ts < 0 {
			continue // NO_TIMESTAMP (-1) is allowed, as in Kafka
		}
		if nowMs-ts > beforeMax || ts-nowMs > afterMax {
			return fmt.Errorf("%w: timestamp %d out of range of broker time %d", kerr.InvalidTimestamp, ts, nowMs)
		}
	}
	return nil
}

// batchError maps a batch validation failure to Kafka's error code.
func batchError(err error) error {
	switch {
	case errors.Is(err, protocol.ErrUnsupportedCodec):
		return fmt.Errorf("%w: %v", kerr.UnsupportedCompressionType, err)
	case errors.Is(err, protocol.ErrInvalidRecord):
		return fmt.Errorf("%w: %v", kerr.InvalidRecord, err)
	case errors.Is(err, protocol.ErrMagic):
		return fmt.Errorf("%w: %v", kerr.UnsupportedForMessageFormat, err)
	case errors.Is(err, protocol.ErrBatchTooLarge):
		return fmt.Errorf("%w: %v", kerr.MessageTooLarge, err)
	}
	return fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
}

// produceFlush is one partition appended by a produce, to be made
// durable (partition.Durable) before the answer.
type produceFlush struct {
	p        *partition.Partition
	last     int64 // the batch's last offset
	topicIdx int   // where the partition's answer is in the response
	idx      int
	err      error
}

// flushProduced makes a produce's appends durable as the flush policy
// (flush.messages, flush.ms) asks, the partitions' fsyncs side by side
// rather than one after another, since each waits on the disk: with
// log.flush.interval.messages=1 a request for 16 partitions waits for
// one fsync's time, not 16. A partition whose flush failed answers its
// error and leaves waits; the waits left are returned.
func flushProduced(resp *kmsg.ProduceResponse, fls []produceFlush, waits []hwWait) []hwWait {
	var need []int
	for i := range fls {
		if fls[i].p.FlushTarget.Load() > fls[i].last {
			need = append(need, i)
		}
	}
	switch len(need) {
	case 0:
		return waits
	case 1:
		fls[need[0]].err = fls[need[0]].p.Durable(fls[need[0]].last)
	default:
		var wg sync.WaitGroup
		for _, i := range need[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fls[i].err = fls[i].p.Durable(fls[i].last)
			}()
		}
		fls[need[0]].err = fls[need[0]].p.Durable(fls[need[0]].last)
		wg.Wait()
	}
	for _, i := range need {
		fl := &fls[i]
		if fl.err == nil {
			continue
		}
		sp := &resp.Topics[fl.topicIdx].Partitions[fl.idx]
		sp.ErrorCode = errCode(fl.err)
		msg := fl.err.Error()
		sp.ErrorMessage = &msg
		sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
		waits = slices.DeleteFunc(waits, func(w hwWait) bool { return w.topicIdx == fl.topicIdx && w.idx == fl.idx })
	}
	return waits
}

// hwWait is one acks=all partition waiting for the high watermark.
type hwWait struct {
	p         *partition.Partition
	offset    int64 // the high watermark that covers the batch
	demotions int64 // p.demotions before the append
	topicIdx  int   // where the partition's answer is in the response
	idx       int
}

// deposed reports whether this node stopped leading the partition after
// the append.
func (w hwWait) deposed() bool { return w.p.Demotions.Load() != w.demotions }

// pendingWaits are the waits still open: neither covered by the high
// watermark nor deposed.
func pendingWaits(ws []hwWait) []hwWait {
	var out []hwWait
	for _, w := range ws {
		if w.p.HighWatermark() < w.offset && !w.deposed() {
			out = append(out, w)
		}
	}
	return out
}

// markDeposed answers NOT_LEADER_OR_FOLLOWER for each partition whose
// leader stepped down after the append, whatever its high watermark says
// (see partition.Partition.Demotions); called after the high watermarks were read,
// so a covered batch was covered while this node still led. The client
// retries; an idempotent batch that did survive is answered with its
// offsets by the new leader.
func markDeposed(resp *kmsg.ProduceResponse, ws []hwWait) {
	for _, w := range ws {
		if w.deposed() {
			sp := &resp.Topics[w.topicIdx].Partitions[w.idx]
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
		}
	}
}

// awaitHighWatermarks waits until every pending partition's high
// watermark covers its batch, or the timeout passes; partitions still short
// then answer REQUEST_TIMED_OUT, as Kafka's purgatory does.
func (s *Server) awaitHighWatermarks(resp *kmsg.ProduceResponse, ws []hwWait, timeout time.Duration) {
	wake := make(chan struct{}, 1)
	for _, w := range ws {
		w.p.AddWaiter(wake)
		defer w.p.RemoveWaiter(wake)
	}
	leaving := s.produceWaits.enter() // see shutdown_produce.go
	defer s.produceWaits.exit()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		if len(pendingWaits(ws)) == 0 {
			for _, w := range ws {
				if w.p.InSyncReplicas() < int(w.p.Cfg.Load().MinInsyncReplicas) {
					resp.Topics[w.topicIdx].Partitions[w.idx].ErrorCode = kerr.NotEnoughReplicasAfterAppend.Code
				}
			}
			markDeposed(resp, ws)
			return
		}
		select {
		case <-wake:
		case <-timer.C:
			for _, w := range pendingWaits(ws) {
				resp.Topics[w.topicIdx].Partitions[w.idx].ErrorCode = kerr.RequestTimedOut.Code
			}
			markDeposed(resp, ws)
			return
		case <-leaving:
			answerLeaving(resp, ws)
			return
		case <-s.ctx.Done():
			answerLeaving(resp, ws)
			return
		}
	}
}
