package broker

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// retentionLoop deletes old segments every log.retention.check.interval.ms
// and removes the files of deleted segments once file.delete.delay.ms has
// passed, as Kafka's log manager does in the background; it also expires
// idle producers every producer.id.expiration.check.interval.ms.
func (s *Server) retentionLoop() {
	check := time.Duration(s.cfg.LogRetentionCheckIntervalMs) * time.Millisecond
	if check <= 0 {
		check = 5 * time.Minute
	}
	retention := time.NewTicker(check)
	defer retention.Stop()
	// Deletions are due at most file.delete.delay.ms after they are
	// scheduled; a second's granularity is Kafka's too.
	files := time.NewTicker(time.Second)
	defer files.Stop()
	expiryCheck := time.Duration(s.cfg.ProducerIDExpirationCheckIntervalMs) * time.Millisecond
	if expiryCheck <= 0 {
		expiryCheck = 10 * time.Minute
	}
	expiry := time.NewTicker(expiryCheck)
	defer expiry.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-retention.C:
			n, err := s.logs.DeleteOldSegments(s.now())
			if err != nil {
				s.log.Error("retention", "err", err)
			}
			if n > 0 {
				s.log.Info("retention deleted segments", "segments", n)
				if err := s.logs.Checkpoint(); err != nil {
					s.log.Error("checkpoint after retention", "err", err)
				}
			}
		case <-files.C:
			if _, err := s.logs.RunFileDeletions(s.now()); err != nil {
				s.log.Error("delete segment files", "err", err)
			}
		case <-expiry.C:
			if n := s.expireProducers(s.now()); n > 0 {
				s.log.Debug("expired idle producers", "producers", n)
			}
		}
	}
}

// startCleaner runs the log cleaner (compaction of cleanup.policy=compact
// topics, __consumer_offsets among them) until the server closes.
func (s *Server) startCleaner() {
	cfg := storage.DefaultCleanerConfig()
	threads := max(int64(s.cfg.LogCleanerThreads), 1)
	cfg.DedupeBufferSize = s.cfg.LogCleanerDedupeBufferSize / threads
	cfg.IOBufferSize = int(s.cfg.LogCleanerIOBufferSize)
	cfg.DedupeBufferLoadFactor = s.cfg.LogCleanerIOBufferLoadFactor
	cfg.MaxIOBytesPerSecond = s.cfg.LogCleanerIOMaxBytesPerSecond
	cfg.BackoffMs = s.cfg.LogCleanerBackoffMs
	cfg.ProducerIDExpirationMs = int64(s.cfg.ProducerIDExpirationMs)
	cfg.ActiveProducers = s.activeProducers
	c := storage.NewCleaner(s.logs, cfg)
	s.goTracked(func() { c.Run(s.ctx) })
}

// activeProducers tells the cleaner, for a partition whose producer state
// is loaded, each producer's last batch, which it keeps so that the
// producer's sequence survives compaction.
func (s *Server) activeProducers(tp storage.TopicPartition) map[int64]storage.LastRecord {
	p := s.parts.get(tp.Topic, tp.Partition)
	if p == nil {
		return nil
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if p.Producers == nil {
		return nil
	}
	out := make(map[int64]storage.LastRecord)
	for _, pi := range p.Producers.Producers() {
		last := int64(-1)
		if bs := p.Producers.Batches(pi.ProducerID); len(bs) > 0 {
			last = bs[len(bs)-1].LastOffset
		}
		out[pi.ProducerID] = storage.LastRecord{LastDataOffset: last, ProducerEpoch: pi.Epoch}
	}
	return out
}

// writeProducerSnapshots writes, for every partition whose producer state
// is loaded, a snapshot at its log end, so that the next start replays
// nothing. It runs at clean shutdown, after the last append.
func (s *Server) writeProducerSnapshots() error {
	var errs []error
	for _, tp := range s.parts.all() {
		for _, p := range tp.parts {
			if p == nil {
				continue
			}
			p.Mu.Lock()
			st := p.Producers
			leo := p.Log.LogEndOffset()
			var data []byte
			if st != nil {
				data = st.EncodeSnapshot()
			}
			p.Mu.Unlock()
			if st == nil {
				continue
			}
			name := filepath.Join(p.Log.Dir(), producerstate.SnapshotFileName(leo))
			if err := vfs.WriteFileAtomic(s.fs, name, data); err != nil {
				errs = append(errs, fmt.Errorf("write producer snapshot %s: %w", name, err))
				continue
			}
			if err := p.PruneProducerSnapshots(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// expireProducers forgets the producers idle for producer.id.expiration.ms
// in every partition whose producer state is loaded, as Kafka's
// PeriodicProducerExpirationCheck (retentionLoop runs it every
// producer.id.expiration.check.interval.ms); a producer with a
// transaction open stays. It returns how many went.
func (s *Server) expireProducers(now time.Time) int {
	n := 0
	for _, tp := range s.parts.all() {
		for _, p := range tp.parts {
			if p == nil {
				continue
			}
			p.Mu.Lock()
			if p.Producers != nil {
				n += p.Producers.ExpireProducers(now.UnixMilli(), int64(s.cfg.ProducerIDExpirationMs))
			}
			p.Mu.Unlock()
		}
	}
	return n
}
