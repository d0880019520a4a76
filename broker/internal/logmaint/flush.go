package logmaint

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// FlushScheduler is Kafka's log flusher: every
// log.flush.scheduler.interval.ms it flushes each hosted log whose last
// flush is older than its topic's flush.ms, so flush.ms holds for a
// partition that stops receiving records (appends check it only as they
// come). With Kafka's default interval, Long.MAX_VALUE, it never runs, as
// in Kafka.
func (m *Maintainer) FlushScheduler() {
	ms := m.d.Cfg.LogFlushSchedulerIntervalMs
	if ms <= 0 || ms >= math.MaxInt64/int64(time.Millisecond) {
		return
	}
	t := time.NewTicker(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.d.Ctx.Done():
			return
		case <-t.C:
			m.flushStaleLogs()
		}
	}
}

// flushStaleLogs flushes the hosted logs past their flush.ms; a disk
// error takes the log's dir offline, as one met by an append does.
func (m *Maintainer) flushStaleLogs() {
	for p := range m.d.Partitions() {
		if p.Log == nil {
			continue
		}
		if _, err := p.Log.FlushIfStale(); err != nil {
			m.d.StorageFailed(p, err)
		}
	}
}

// FlushLoop applies the time-based flush policy and checkpoints the
// recovery points, as Kafka's log manager does in the background.
func (m *Maintainer) FlushLoop() {
	interval := time.Duration(m.d.Cfg.LogFlushOffsetCheckpointIntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-m.d.Ctx.Done():
			return
		case <-t.C:
			if err := m.d.Logs.Checkpoint(); err != nil {
				m.d.Logger.Error("checkpoint log dirs", "err", err)
			}
		}
	}
}

// EpochCheckpointLoop writes, every second, the leader-epoch-checkpoints
// whose writes the first appends of new partitions deferred
// (partition.WriteDeferredEpochs): off the produce path, where a request
// to 1,000 new partitions would otherwise create and fsync 1,000 files
// before it is answered.
func (m *Maintainer) EpochCheckpointLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.d.Ctx.Done():
			return
		case <-t.C:
			if err := m.WriteDeferredEpochs(); err != nil {
				m.d.Logger.Error("write leader epoch checkpoints", "err", err)
			}
		}
	}
}

// maxEpochWriters bounds the leader-epoch-checkpoints WriteDeferredEpochs
// writes at once.
const maxEpochWriters = 16

// WriteDeferredEpochs writes every deferred leader-epoch-checkpoint now;
// a write that fails takes the partition's log dir offline, as the same
// failure on the append path did. It runs every second and at clean
// shutdown, after the last append.
//
// The partitions' files are written side by side: each write holds its
// partition's lock for two fsyncs (the file's and its directory's), and a
// producer whose requests name a new topic's 16 partitions waited for
// each of them in turn, 32 fsyncs, about a second into its run (the
// runtime trace of an end-to-end benchmark on a loaded disk showed a
// third of the broker's scheduling delay there); side by side it waits
// for about one write.
func (m *Maintainer) WriteDeferredEpochs() error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	slots := make(chan struct{}, maxEpochWriters)
	for p := range m.d.Partitions() {
		if !p.EpochsUnwritten() {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := p.WriteDeferredEpochs(); err != nil {
				m.d.StorageFailed(p, err)
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s-%d: %w", p.Topic, p.Index, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
