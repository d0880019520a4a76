package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/vfs"
)

// loadLog opens a partition directory. After an unclean shutdown it
// recovers every segment from the one holding the recovery point, and if
// one had to be truncated it deletes the segments after it: what followed
// a torn batch is not trustworthy. A segment whose index files are missing
// gets its entries rebuilt wherever it is (a segment whose indexes never
// had an entry has no files: createSegmentFiles). The recovery point afterwards is the
// log end offset, since recovery fsyncs what it keeps.
func (m *Manager) loadLog(parent string, tp TopicPartition, rpCkpt, lsoCkpt int64, clean bool) (*Log, error) {
	dir := filepath.Join(parent, tp.String())
	dirDirty, err := m.completeSwaps(dir)
	if err != nil {
		return nil, err
	}
	ents, err := m.fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	files := map[string]map[int64]bool{logSuffix: {}, indexSuffix: {}, timeIndexSuffix: {}, txnIndexSuffix: {}}
	var topicID [16]byte
	for _, e := range ents {
		name := e.Name()
		if name == partitionMetadataFile {
			topicID = m.readPartitionMetadata(dir)
			continue
		}
		ext := filepath.Ext(name)
		if set, ok := files[ext]; ok {
			if base, ok := parseSegmentBase(strings.TrimSuffix(name, ext)); ok {
				set[base] = true
			}
		}
	}
	// Index files without a .log are orphans of a deleted segment.
	for _, ext := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		for base := range files[ext] {
			if !files[logSuffix][base] {
				if err := m.fsys.Remove(segmentPath(dir, base, ext)); err != nil {
					return nil, err
				}
				dirDirty = true
			}
		}
	}

	now := m.nowMs()
	bases := make([]int64, 0, len(files[logSuffix]))
	for b := range files[logSuffix] {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var segs []*segment
	closeAll := func() {
		for _, s := range segs {
			s.close()
		}
	}
	l := m.newLog(parent, tp, nil, m.topicCfg(tp.Topic))
	cfg := l.cfg.Load()
	for _, b := range bases {
		s, err := openSegment(m.fsys, m.files, dir, b, now)
		if err != nil {
			closeAll()
			return nil, err
		}
		s.rollJitterMs = cfg.randomSegmentJitter()
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		s, err := createSegment(m.fsys, m.files, dir, max(lsoCkpt, 0), now)
		if err != nil {
			return nil, err
		}
		s.rollJitterMs = cfg.randomSegmentJitter()
		segs = append(segs, s)
		dirDirty = true
	}

	recoverFrom := len(segs)
	if !clean {
		recoverFrom = max(sort.Search(len(segs), func(i int) bool { return segs[i].base > rpCkpt })-1, 0)
	}
	activeRecovered := false
	var txns *txnRebuild // follows transactions through recovered segments
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		missing := !files[indexSuffix][s.base] || !files[timeIndexSuffix][s.base]
		if i < recoverFrom && !missing {
			continue
		}
		if i < recoverFrom {
			// Flushed data whose index is gone: rebuild the index only.
			if err := s.ensureLoaded(cfg, l.logger); err != nil {
				closeAll()
				return nil, err
			}
			continue
		}
		m.recoveredSegments.Add(1)
		if txns == nil {
			if txns, err = l.newTxnRebuild(segs, i); err != nil {
				closeAll()
				return nil, err
			}
		}
		cut, reason, err := s.recover(cfg, &m.recoveredBatches, &m.progress.doneBytes, txns)
		if err != nil {
			closeAll()
			return nil, err
		}
		dirDirty = true
		if cut == 0 {
			activeRecovered = i == len(segs)-1
			continue
		}
		activeRecovered = true
		l.logger.Warn("truncated torn or corrupt log tail", "segment", s.base, "bytes", cut, "reason", reason)
		for _, later := range segs[i+1:] {
			later.close()
			if err := later.remove(); err != nil {
				closeAll()
				return nil, err
			}
			l.logger.Warn("deleted segment after a truncated one", "segment", later.base)
		}
		segs = segs[:i+1]
		break
	}

	active := segs[len(segs)-1]
	if activeRecovered {
		// Recovered above: its next offset is known.
	} else if err := active.loadActive(cfg, l.logger); err != nil {
		if !errors.Is(err, errNeedsRecovery) {
			closeAll()
			return nil, err
		}
		l.logger.Warn("active segment did not end cleanly; recovering it", "segment", active.base, "reason", err)
		m.recoveredSegments.Add(1)
		if txns, err = l.newTxnRebuild(segs, len(segs)-1); err != nil {
			closeAll()
			return nil, err
		}
		if _, _, err := active.recover(cfg, &m.recoveredBatches, &m.progress.doneBytes, txns); err != nil {
			closeAll()
			return nil, err
		}
		dirDirty = true
	}
	leo := active.nextOffset
	if txns != nil {
		// Recovery followed the transactions to the log end.
		l.txnOpen = txns.open
		// Producer snapshots past a cut tail describe records that are
		// gone, as Kafka's truncateAndReload drops them.
		removed, err := l.removeProducerSnapshots(func(off int64) bool { return off > leo })
		if err != nil {
			closeAll()
			return nil, err
		}
		dirDirty = dirDirty || removed
	}
	if dirDirty {
		if err := m.fsys.SyncDir(dir); err != nil {
			closeAll()
			return nil, err
		}
	}

	// The files loading read are not kept open: an idle partition holds
	// no descriptor after a restart either, and each .log opens again on
	// use (logfile.go).
	for _, s := range segs {
		s.log.tryCloseIdle()
	}
	l.segs.Store(&segs)
	l.leo.Store(leo)
	l.lso.Store(min(max(lsoCkpt, segs[0].base), leo))
	l.rp.Store(leo)
	l.topicID = topicID
	if !clean && rpCkpt > leo {
		l.logger.Warn("log end offset below the checkpointed recovery point", "recovery_point", rpCkpt, "log_end_offset", leo)
	}
	return l, nil
}

// completeSwaps finishes or undoes an interrupted segment deletion or
// cleaning, as Kafka's LogLoader does before it loads segments:
//
//  1. .deleted files go (their segments were already out of the log), and
//     so do .cleaned files (a cleaning that had not reached its swap);
//     a .swap file at or above the lowest .cleaned base offset is part of
//     an unfinished swap too and goes.
//  2. A .log.swap file holds cleaned data for offsets from its base to its
//     last batch: every other file whose base offset lies in that range
//     belongs to a segment it replaces, and goes.
//  3. Every .swap file is renamed to its final name.
//
// A crash at any point of a cleaning thus leaves either the old segments
// or the cleaned one, never both nor neither. It reports whether it
// changed the directory.
func (m *Manager) completeSwaps(dir string) (bool, error) {
	ents, err := m.fsys.ReadDir(dir)
	if err != nil {
		return false, err
	}
	changed := false
	remove := func(name string) error {
		changed = true
		if err := m.fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var swaps []string
	minCleaned := int64(math.MaxInt64)
	for _, e := range ents {
		name := e.Name()
		switch {
		case e.IsDir():
		case strings.HasSuffix(name, deletedFileSuffix):
			if err := remove(name); err != nil {
				return changed, err
			}
		case strings.HasSuffix(name, cleanedFileSuffix):
			if base, ok := fileBaseOffset(name); ok {
				minCleaned = min(minCleaned, base)
			}
			if err := remove(name); err != nil {
				return changed, err
			}
		case strings.HasSuffix(name, swapFileSuffix):
			swaps = append(swaps, name)
		}
	}
	valid := swaps[:0]
	for _, name := range swaps {
		if base, ok := fileBaseOffset(name); !ok || base >= minCleaned {
			if err := remove(name); err != nil {
				return changed, err
			}
			continue
		}
		valid = append(valid, name)
	}
	if len(valid) == 0 {
		return changed, nil
	}
	changed = true
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, name := range valid {
		if filepath.Ext(strings.TrimSuffix(name, swapFileSuffix)) == logSuffix {
			base, _ := fileBaseOffset(name)
			next, err := m.readNextOffset(filepath.Join(dir, name), base)
			if err != nil {
				return changed, err
			}
			lo, hi = min(lo, base), max(hi, next)
			m.logger.Info("completing an interrupted swap of cleaned segments", "file", filepath.Join(dir, name), "from", base, "to", next)
		}
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, swapFileSuffix) {
			continue
		}
		if base, ok := fileBaseOffset(name); ok && base >= lo && base < hi {
			if err := remove(name); err != nil {
				return changed, err
			}
		}
	}
	for _, name := range valid {
		from := filepath.Join(dir, name)
		if err := m.fsys.Rename(from, strings.TrimSuffix(from, swapFileSuffix)); err != nil {
			return changed, err
		}
	}
	return changed, m.fsys.SyncDir(dir)
}

// fileBaseOffset reads the base offset a segment file's name starts with,
// as Kafka's offsetFromFile: the digits before the first dot.
func fileBaseOffset(name string) (int64, bool) {
	stem, _, ok := strings.Cut(name, ".")
	if !ok {
		return 0, false
	}
	return parseSegmentBase(stem)
}

// readNextOffset is the offset after the last whole batch of a .log file.
func (m *Manager) readNextOffset(name string, base int64) (int64, error) {
	f, err := m.fsys.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	next := base
	sc := newHeaderScanner(f, 0, st.Size())
	defer sc.release()
	for {
		b, err := sc.next()
		if err != nil {
			// io.EOF, or damage the segment's recovery deals with.
			return next, nil
		}
		next = b.lastOffset + 1
	}
}

// parseSegmentBase reads a segment file's 20-digit base offset.
func parseSegmentBase(stem string) (int64, bool) {
	if len(stem) != 20 {
		return 0, false
	}
	b, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || b < 0 {
		return 0, false
	}
	return b, true
}

// readPartitionMetadata returns the recorded topic id, or zero (with a
// warning) if the file is unreadable.
func (m *Manager) readPartitionMetadata(dir string) [16]byte {
	data, err := vfs.ReadFile(m.fsys, filepath.Join(dir, partitionMetadataFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.logger.Warn("unreadable partition.metadata", "dir", dir, "err", err)
		return [16]byte{}
	}
	if err != nil {
		return [16]byte{}
	}
	id, err := decodePartitionMetadata(data)
	if err != nil {
		m.logger.Warn("malformed partition.metadata", "dir", dir, "err", fmt.Sprint(err))
		return [16]byte{}
	}
	return id
}
