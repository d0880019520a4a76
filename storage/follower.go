package storage

import (
	"errors"
	"fmt"
	"math"

	"github.com/gregorbroker/gregor/protocol"
)

// Errors of AppendAsFollower. Both mean the follower's log and the
// leader's disagree; the broker answers them at the fetch level (Kafka
// marks the partition failed, or, for AppendOffsetError on an empty log,
// truncates fully to the batch's base offset and appends again).
var (
	// ErrUnexpectedAppendOffset is wrapped by AppendOffsetError: the first
	// batch starts below the log end offset (Kafka's
	// UnexpectedAppendOffsetException).
	ErrUnexpectedAppendOffset = errors.New("first batch starts below the log end offset")
	// ErrOffsetsOutOfOrder says that a batch of a follower append does not
	// start after the previous one ends (Kafka's OffsetsOutOfOrderException).
	ErrOffsetsOutOfOrder = errors.New("batch offsets out of order")
)

// AppendOffsetError is returned by AppendAsFollower when the first batch's
// base offset is below the log end offset. It carries what Kafka's
// Partition.appendRecordsToFollowerOrFutureReplica needs to recover: if
// LogEndOffset == LogStartOffset and FirstOffset < LogEndOffset <=
// LastOffset (the leader's log start offset fell inside a batch), the
// follower calls TruncateFullyAndStartAt(FirstOffset) and appends again.
type AppendOffsetError struct {
	Partition      TopicPartition
	FirstOffset    int64 // base offset of the first batch
	LastOffset     int64 // last offset of the last whole batch
	LogStartOffset int64
	LogEndOffset   int64
}

// Error describes the mismatch.
func (e *AppendOffsetError) Error() string {
	return fmt.Sprintf("append as follower %s: first offset %d (last %d) is below the log end offset %d (log start %d)",
		e.Partition, e.FirstOffset, e.LastOffset, e.LogEndOffset, e.LogStartOffset)
}

// Unwrap returns ErrUnexpectedAppendOffset.
func (e *AppendOffsetError) Unwrap() error { return ErrUnexpectedAppendOffset }

// AppendAsFollower appends batches fetched from the leader, as Kafka's
// UnifiedLog.appendAsFollower: they keep the base offsets and partition
// leader epochs the leader gave them. The first batch must start at or
// after the log end offset (else *AppendOffsetError) and each batch after
// the previous one's last offset (else ErrOffsetsOutOfOrder). A gap is
// accepted, as Kafka does: a compacted leader's batches skip the offsets
// the cleaner removed, and a fetch that lands in such a gap gets the
// next batch.
//
// Every batch's CRC is checked; a corrupt batch (protocol.ErrCorrupt,
// protocol.ErrMagic, ErrBatchTooLarge) fails the whole append and nothing
// is written. Bytes after the last whole batch (a batch cut by the
// leader's fetch size, which Kafka's fetch may return) are ignored, as
// Kafka's follower ignores them; input with no whole batch is an error
// wrapping protocol.ErrTruncated. The result describes what was appended:
// FirstOffset is the first batch's base offset, LastOffset the last
// batch's last offset, and the log end offset becomes LastOffset+1.
//
// Rolling, indexing, flushing and the sticky error are as for Append,
// with the broker's clock (ManagerConfig.Now); a segment rolled here
// starts at the first batch's base offset. The caller holds the
// partition's lock, as for Append.
func (l *Log) AppendAsFollower(batches []byte) (AppendResult, error) {
	now := l.nowMs()
	res, flush, err := l.appendAsFollower(batches, now)
	if err != nil {
		return AppendResult{}, err
	}
	if flush {
		if err := l.Flush(); err != nil {
			return res, err
		}
		l.lastFlushMs.Store(now)
	}
	return res, nil
}

func (l *Log) appendAsFollower(batches []byte, now int64) (res AppendResult, flush bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritableLocked("append as follower"); err != nil {
		return res, false, err
	}
	cfg := l.cfg.Load()
	infos, n, err := l.parseFollowerBatchesLocked(batches, cfg)
	if err != nil {
		return res, false, err
	}
	res = AppendResult{
		FirstOffset:          infos[0].baseOffset,
		LastOffset:           infos[len(infos)-1].lastOffset,
		MaxTimestamp:         noTimestamp,
		OffsetOfMaxTimestamp: -1,
	}
	for _, b := range infos {
		if b.maxTimestamp > res.MaxTimestamp {
			res.MaxTimestamp, res.OffsetOfMaxTimestamp = b.maxTimestamp, b.lastOffset
		}
	}
	flush, err = l.writeLocked(batches[:n], infos, res, res.FirstOffset, now, cfg)
	if err != nil {
		return AppendResult{}, false, err
	}
	return res, flush, nil
}

// parseFollowerBatchesLocked checks the leader's batches: whole magic-2
// batches with valid CRCs, sizes that fit a segment, offsets that start at
// or after the log end offset and rise from batch to batch, all within
// the 2^31 offsets one segment can index. It returns their headers and how
// many bytes of whole batches there are.
func (l *Log) parseFollowerBatchesLocked(batches []byte, cfg *LogConfig) ([]batchInfo, int, error) {
	leo := l.leo.Load()
	infos := l.infos[:0]
	pos := 0
	next := leo
	for pos < len(batches) {
		h, err := protocol.ParseBatchHeader(batches[pos:])
		if errors.Is(err, protocol.ErrTruncated) && pos > 0 {
			break // a batch cut short by the leader's fetch size
		}
		if err != nil {
			return nil, 0, fmt.Errorf("append as follower %s: batch at byte %d: %w", l.tp, pos, err)
		}
		size := h.Size()
		if err := protocol.VerifyCRC(batches[pos : pos+size]); err != nil {
			return nil, 0, fmt.Errorf("append as follower %s: batch at offset %d: %w", l.tp, h.BaseOffset, err)
		}
		if h.BaseOffset < 0 || h.LastOffsetDelta < 0 || h.BaseOffset > math.MaxInt64-1-int64(h.LastOffsetDelta) {
			return nil, 0, fmt.Errorf("append as follower %s: %w: base offset %d, last offset delta %d",
				l.tp, protocol.ErrCorrupt, h.BaseOffset, h.LastOffsetDelta)
		}
		if int64(size) > cfg.SegmentBytes {
			return nil, 0, fmt.Errorf("append as follower %s: %w: %d bytes, segment.bytes %d", l.tp, ErrBatchTooLarge, size, cfg.SegmentBytes)
		}
		if h.BaseOffset < next {
			if len(infos) == 0 {
				return nil, 0, l.appendOffsetError(batches, h)
			}
			return nil, 0, fmt.Errorf("append as follower %s: %w: batch %d..%d after offset %d",
				l.tp, ErrOffsetsOutOfOrder, h.BaseOffset, h.LastOffset(), next-1)
		}
		infos = append(infos, infoOf(&h, int64(pos)))
		next = h.LastOffset() + 1
		pos += size
	}
	if len(infos) == 0 {
		return nil, 0, fmt.Errorf("append as follower %s: %w: no whole batch", l.tp, protocol.ErrTruncated)
	}
	l.infos = infos
	if span := infos[len(infos)-1].lastOffset - infos[0].baseOffset; span > math.MaxInt32 {
		// A leader's fetch answer comes from one segment, whose offsets
		// span less than this.
		return nil, 0, fmt.Errorf("append as follower %s: %w: offsets %d..%d do not fit one segment",
			l.tp, ErrOffsetsOutOfOrder, infos[0].baseOffset, infos[len(infos)-1].lastOffset)
	}
	return infos, pos, nil
}

// appendOffsetError describes a first batch that starts below the log end
// offset, with the last offset of the last whole batch of the append.
func (l *Log) appendOffsetError(batches []byte, first protocol.BatchHeader) error {
	last := first.LastOffset()
	for pos := 0; pos < len(batches); {
		h, err := protocol.ParseBatchHeader(batches[pos:])
		if err != nil {
			break
		}
		last = max(last, h.LastOffset())
		pos += h.Size()
	}
	return &AppendOffsetError{
		Partition:      l.tp,
		FirstOffset:    first.BaseOffset,
		LastOffset:     last,
		LogStartOffset: l.lso.Load(),
		LogEndOffset:   l.leo.Load(),
	}
}
