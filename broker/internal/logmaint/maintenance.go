// Package logmaint is the broker's background log maintenance, as Kafka's
// log manager runs it: checkpoints and the time-based flush policy,
// retention and the deletion of old segment files, the log cleaner, and
// the producer state's expiry and its snapshots at shutdown.
package logmaint

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// Maintainer runs the maintenance of one broker's logs.
type Maintainer struct {
	d Deps
}

// Deps are what the maintenance needs of the server.
type Deps struct {
	Cfg    *config.Broker
	FS     vfs.FS
	Logs   *storage.Manager
	Ctx    context.Context // ends when the server closes
	Go     func(func())    // starts a goroutine the server waits for when it closes
	Logger *slog.Logger
	Now    func() time.Time
	// Partitions walks the hosted partitions, and Partition is one of
	// them, or nil. A walk, not a slice: the loops below run every
	// second, and a slice of 10,000 partitions each time was about 1 MB/s
	// of garbage on an idle broker.
	Partitions func() iter.Seq[*partition.Partition]
	Partition  func(topic string, index int32) *partition.Partition
	// StorageFailed takes a partition's log dir offline after a disk
	// error.
	StorageFailed func(p *partition.Partition, err error)
}

// New is a Maintainer of the logs d describes.
func New(d Deps) *Maintainer { return &Maintainer{d: d} }

// RetentionLoop deletes old segments every log.retention.check.interval.ms
// and removes the files of deleted segments once file.delete.delay.ms has
// passed, as Kafka's log manager does in the background; it also expires
// idle producers every producer.id.expiration.check.interval.ms.
func (m *Maintainer) RetentionLoop() {
	check := time.Duration(m.d.Cfg.LogRetentionCheckIntervalMs) * time.Millisecond
	if check <= 0 {
		check = 5 * time.Minute
	}
	retention := time.NewTicker(check)
	defer retention.Stop()
	// Deletions are due at most file.delete.delay.ms after they are
	// scheduled; a second's granularity is Kafka's too.
	files := time.NewTicker(time.Second)
	defer files.Stop()
	expiryCheck := time.Duration(m.d.Cfg.ProducerIDExpirationCheckIntervalMs) * time.Millisecond
	if expiryCheck <= 0 {
		expiryCheck = 10 * time.Minute
	}
	expiry := time.NewTicker(expiryCheck)
	defer expiry.Stop()
	for {
		select {
		case <-m.d.Ctx.Done():
			return
		case <-retention.C:
			n, err := m.d.Logs.DeleteOldSegments(m.d.Now())
			if err != nil {
				m.d.Logger.Error("retention", "err", err)
			}
			if n > 0 {
				m.d.Logger.Info("retention deleted segments", "segments", n)
				if err := m.d.Logs.Checkpoint(); err != nil {
					m.d.Logger.Error("checkpoint after retention", "err", err)
				}
			}
		case <-files.C:
			if _, err := m.d.Logs.RunFileDeletions(m.d.Now()); err != nil {
				m.d.Logger.Error("delete segment files", "err", err)
			}
		case <-expiry.C:
			if n := m.expireProducers(m.d.Now()); n > 0 {
				m.d.Logger.Debug("expired idle producers", "producers", n)
			}
		}
	}
}

// StartCleaner runs the log cleaner (compaction of cleanup.policy=compact
// topics, __consumer_offsets among them) until the server closes.
func (m *Maintainer) StartCleaner() {
	cfg := storage.DefaultCleanerConfig()
	threads := max(int64(m.d.Cfg.LogCleanerThreads), 1)
	cfg.DedupeBufferSize = m.d.Cfg.LogCleanerDedupeBufferSize / threads
	cfg.IOBufferSize = int(m.d.Cfg.LogCleanerIOBufferSize)
	cfg.DedupeBufferLoadFactor = m.d.Cfg.LogCleanerIOBufferLoadFactor
	cfg.MaxIOBytesPerSecond = m.d.Cfg.LogCleanerIOMaxBytesPerSecond
	cfg.BackoffMs = m.d.Cfg.LogCleanerBackoffMs
	cfg.ProducerIDExpirationMs = int64(m.d.Cfg.ProducerIDExpirationMs)
	cfg.ActiveProducers = m.activeProducers
	c := storage.NewCleaner(m.d.Logs, cfg)
	m.d.Go(func() { c.Run(m.d.Ctx) })
}

// activeProducers tells the cleaner, for a partition whose producer state
// is loaded, each producer's last batch, which it keeps so that the
// producer's sequence survives compaction.
func (m *Maintainer) activeProducers(tp storage.TopicPartition) map[int64]storage.LastRecord {
	p := m.d.Partition(tp.Topic, tp.Partition)
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

// WriteProducerSnapshots writes, for every partition whose producer state
// is loaded, a snapshot at its log end, so that the next start replays
// nothing. It runs at clean shutdown, after the last append.
func (m *Maintainer) WriteProducerSnapshots() error {
	var errs []error
	for p := range m.d.Partitions() {
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
		if err := vfs.WriteFileAtomic(m.d.FS, name, data); err != nil {
			errs = append(errs, fmt.Errorf("write producer snapshot %s: %w", name, err))
			continue
		}
		if err := p.PruneProducerSnapshots(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// expireProducers forgets the producers idle for producer.id.expiration.ms
// in every partition whose producer state is loaded, as Kafka's
// PeriodicProducerExpirationCheck (RetentionLoop runs it every
// producer.id.expiration.check.interval.ms); a producer with a
// transaction open stays. It returns how many went.
func (m *Maintainer) expireProducers(now time.Time) int {
	n := 0
	for p := range m.d.Partitions() {
		p.Mu.Lock()
		if p.Producers != nil {
			n += p.Producers.ExpireProducers(now.UnixMilli(), int64(m.d.Cfg.ProducerIDExpirationMs))
		}
		p.Mu.Unlock()
	}
	return n
}
