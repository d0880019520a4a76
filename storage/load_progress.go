package storage

import (
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLoadProgressInterval is how often OpenManager reports how far
// loading (and recovering) the logs has got, once it has taken that long.
const DefaultLoadProgressInterval = time.Second

// loadProgress reports, at INFO, how far OpenManager has got with loading
// the logs: after a crash recovery re-reads every batch written since the
// last checkpoint, which on a large broker takes minutes, and an operator
// wants to see it move rather than a silent process (Kafka logs the
// percentage of each log dir it has recovered). A load that finishes
// within one interval logs nothing.
type loadProgress struct {
	logger   *slog.Logger
	interval time.Duration
	start    time.Time

	totalBytes int64 // of the .log files found before loading
	totalParts int64
	partBytes  map[string]int64 // partition directory path -> bytes of its .log files

	// doneBytes counts the .log bytes of the partitions loaded so far plus
	// those recovery has re-read in the one being loaded; only the loading
	// goroutine writes it.
	doneBytes atomic.Int64
	doneParts atomic.Int64
	reported  atomic.Bool // a progress line was logged

	stop chan struct{}
	wg   sync.WaitGroup
}

// startLoadProgress measures the partition directories of m's log dirs and
// starts the reporter. The sizes are read from the directory listings; a
// directory that cannot be read is left out of the totals here and fails
// its load later with the cause.
func (m *Manager) startLoadProgress(interval time.Duration) *loadProgress {
	if interval <= 0 {
		interval = DefaultLoadProgressInterval
	}
	p := &loadProgress{logger: m.logger, interval: interval, start: time.Now(),
		partBytes: map[string]int64{}, stop: make(chan struct{})}
	for _, d := range m.dirs {
		ents, err := m.fsys.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			tp, ok := parseLogDirName(e.Name())
			if !ok || tp.Topic == metadataTopic || strings.HasSuffix(e.Name(), deleteDirSuffix) ||
				strings.HasSuffix(e.Name(), futureDirSuffix) || strings.HasSuffix(e.Name(), strayDirSuffix) {
				continue
			}
			dir := filepath.Join(d, e.Name())
			var size int64
			files, err := m.fsys.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, f := range files {
				if f.IsDir() || filepath.Ext(f.Name()) != logSuffix {
					continue
				}
				if info, err := f.Info(); err == nil {
					size += info.Size()
				}
			}
			p.partBytes[dir] = size
			p.totalBytes += size
			p.totalParts++
		}
	}
	p.wg.Add(1)
	go p.run()
	return p
}

// run logs a progress line every interval until finish.
func (p *loadProgress) run() {
	defer p.wg.Done()
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.reported.Store(true)
			elapsed := time.Since(p.start)
			done := p.doneBytes.Load()
			p.logger.Info("loading logs",
				"partitions_done", p.doneParts.Load(), "partitions_total", p.totalParts,
				"bytes_done", done, "bytes_remaining", max(p.totalBytes-done, 0),
				"mib_per_s", mibPerSec(done, elapsed), "elapsed", elapsed.Round(time.Millisecond).String())
		}
	}
}

// partitionLoaded counts a partition directory as loaded: its bytes are
// done, whatever recovery counted of them on the way.
func (p *loadProgress) partitionLoaded(dir string, before int64) {
	p.doneBytes.Store(before + p.partBytes[dir])
	p.doneParts.Add(1)
}

// finish stops the reporter and, if the load took longer than one
// interval, logs the summary.
func (p *loadProgress) finish(segments, batches int64) {
	close(p.stop)
	p.wg.Wait()
	elapsed := time.Since(p.start)
	if !p.reported.Load() && elapsed < p.interval {
		return
	}
	done := p.doneBytes.Load()
	p.logger.Info("loaded logs",
		"partitions", p.doneParts.Load(), "bytes", done,
		"segments_recovered", segments, "batches_recovered", batches,
		"mib_per_s", mibPerSec(done, elapsed), "elapsed", elapsed.Round(time.Millisecond).String())
}

// mibPerSec is the rate of bytes over elapsed in MiB/s, to one decimal.
func mibPerSec(bytes int64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	r := float64(bytes) / (1 << 20) / elapsed.Seconds()
	return float64(int64(r*10+0.5)) / 10
}
