package storage

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// DefaultSyncStallThreshold is how long an fsync of a log's files may take
// before it is reported as stalled (ManagerConfig.SyncStallThreshold).
const DefaultSyncStallThreshold = 10 * time.Second

// syncWatch is a watchdog over the fsyncs of the logs' segment files: a
// disk that stops answering would otherwise leave a partition waiting
// (its acks=all and flush.messages produces) with nothing in the log to
// say why. An fsync still running after the threshold is logged at error
// level, naming the partition, the file and how long it has waited, then
// again each time that wait doubles, and once more when it completes; it
// is counted in StalledSyncs and, while it lasts, SyncsStalledNow.
type syncWatch struct {
	threshold time.Duration
	logger    *slog.Logger
	stalls    atomic.Int64 // fsyncs that ran past the threshold, each counted once
	stalled   atomic.Int64 // of those, the ones still running
}

func newSyncWatch(threshold time.Duration, logger *slog.Logger) *syncWatch {
	if threshold <= 0 {
		threshold = DefaultSyncStallThreshold
	}
	return &syncWatch{threshold: threshold, logger: logger}
}

// watch starts watching one fsync of file of tp; the caller calls the
// returned function when the fsync returns.
func (w *syncWatch) watch(tp TopicPartition, file string) func() {
	start := time.Now()
	var (
		mu       sync.Mutex
		done     bool
		reported bool
		timer    *time.Timer
		next     = w.threshold
	)
	var fire func()
	fire = func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		if !reported {
			reported = true
			w.stalls.Add(1)
			w.stalled.Add(1)
		}
		w.logger.Error("fsync stalled: the partition's durable writes wait for the disk",
			"partition", tp.String(), "file", file, "waited", time.Since(start).Round(time.Millisecond), "threshold", w.threshold)
		next *= 2
		timer = time.AfterFunc(next-time.Since(start), fire)
	}
	mu.Lock()
	timer = time.AfterFunc(w.threshold, fire)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
		timer.Stop()
		if reported {
			w.stalled.Add(-1)
			w.logger.Warn("stalled fsync completed", "partition", tp.String(), "file", file, "took", time.Since(start).Round(time.Millisecond))
		}
	}
}

// syncWatched fsyncs files under the watchdog, side by side: a flush's
// files (a segment's .log and its indexes) are independent, and only
// when all are synced does the recovery point move, so the flush waits
// for the slowest fsync rather than their sum. With flush.messages=1
// that is most of a produce's time on the disk. The first failure, in
// the files' order, is returned.
func (l *Log) syncWatched(files []vfs.File) error {
	switch len(files) {
	case 0:
		return nil
	case 1:
		return l.syncOne(files[0])
	}
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i := 1; i < len(files); i++ {
		wg.Go(func() { errs[i] = l.syncOne(files[i]) })
	}
	errs[0] = l.syncOne(files[0])
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// syncOne fsyncs one file under the watchdog.
func (l *Log) syncOne(f vfs.File) error {
	var done func()
	if l.syncWatch != nil {
		done = l.syncWatch.watch(l.tp, f.Name())
	}
	err := f.Sync()
	if done != nil {
		done()
	}
	if err != nil {
		return syncErrFile(f.Name(), err)
	}
	return nil
}

// StalledSyncs is how many fsyncs of segment files have run past
// ManagerConfig.SyncStallThreshold since the Manager opened.
func (m *Manager) StalledSyncs() int64 { return m.syncWatch.stalls.Load() }

// SyncsStalledNow is how many fsyncs past the threshold are still
// running.
func (m *Manager) SyncsStalledNow() int64 { return m.syncWatch.stalled.Load() }
