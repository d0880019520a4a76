package broker

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta"
	"github.com/gregorbroker/gregor/storage"
)

// watchMetadata reconciles the hosted partitions with each image the
// metadata log applies, as a KRaft broker does with its metadata delta.
func (s *Server) watchMetadata() {
	changes := s.meta.Changes()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-changes:
			if err := s.reconcile(s.meta.Image()); err != nil {
				s.log.Error("apply metadata", "err", err)
			}
		}
	}
}

// reconcile opens a log for every partition of the image that lists this
// node as a replica, and deletes the logs of topics that are gone. Handlers
// that change metadata call it too, after their change applies, so that
// their answer reflects it; it is idempotent.
func (s *Server) reconcile(img *raftmeta.Image) error {
	s.reconcileMu.Lock()
	defer s.reconcileMu.Unlock()

	old := s.parts.all()
	var errs []error

	// First remove what is gone: topics deleted (or deleted and created
	// again under the same name, which reuses the directory names), and
	// stray logs left by a crash between a deletion and its logs' removal.
	for tp := range s.logs.Logs() {
		t, ok := img.Topic(tp.Topic)
		keep := ok && int(tp.Partition) < len(t.Partitions) &&
			slices.Contains(t.Partitions[tp.Partition].Replicas, s.cfg.NodeID)
		if keep {
			if prev := old[tp.Topic]; prev != nil && prev.id != t.ID {
				keep = false
			}
		}
		if keep {
			continue
		}
		if err := s.logs.DeleteLog(tp.Topic, tp.Partition); err != nil {
			errs = append(errs, fmt.Errorf("delete log %s-%d: %w", tp.Topic, tp.Partition, err))
			continue
		}
		s.log.Info("deleted log", "topic", tp.Topic, "partition", tp.Partition)
	}

	next := make(map[string]*topicPartitions, len(old))
	for _, name := range img.TopicNames() {
		t, _ := img.Topic(name)
		prev := old[name]
		if prev != nil && prev.id != t.ID {
			prev = nil
		}
		tcfg := s.cfg.TopicConfig(t.Configs)
		tp := &topicPartitions{name: name, id: t.ID, parts: make([]*partition, len(t.Partitions))}
		for i, pi := range t.Partitions {
			if !slices.Contains(pi.Replicas, s.cfg.NodeID) {
				continue
			}
			if prev != nil && i < len(prev.parts) && prev.parts[i] != nil {
				p := prev.parts[i]
				c := tcfg
				p.cfg.Store(&c)
				p.log.SetConfig(logConfig(tcfg))
				s.applyAssignment(p, pi)
				tp.parts[i] = p
				continue
			}
			l, err := s.logs.GetOrCreateLog(name, int32(i), t.ID, logConfig(tcfg))
			if err != nil {
				errs = append(errs, fmt.Errorf("open log %s-%d: %w", name, i, err))
				continue
			}
			p := newPartition(s.cfg.NodeID, name, int32(i), t.ID, l, tcfg, pi.LeaderEpoch)
			s.applyAssignment(p, pi)
			tp.parts[i] = p
		}
		next[name] = tp
	}
	s.parts.byName.Store(&next)
	s.fetchers.reconcile(next)
	if s.groups != nil {
		s.groups.reconcile(img)
	}
	if s.txns != nil {
		s.txns.loader.reconcile(img)
	}
	return errors.Join(errs...)
}

func logConfig(t config.Topic) storage.LogConfig {
	return storage.LogConfig{
		SegmentBytes:           t.SegmentBytes,
		SegmentMs:              t.SegmentMs,
		SegmentJitterMs:        t.SegmentJitterMs,
		IndexIntervalBytes:     t.IndexIntervalBytes,
		SegmentIndexBytes:      t.SegmentIndexBytes,
		FlushMessages:          t.FlushMessages,
		FlushMs:                t.FlushMs,
		Delete:                 t.Delete(),
		Compact:                t.Compact(),
		RetentionMs:            t.RetentionMs,
		RetentionBytes:         t.RetentionBytes,
		FileDeleteDelayMs:      t.FileDeleteDelayMs,
		DeleteRetentionMs:      t.DeleteRetentionMs,
		MinCompactionLagMs:     t.MinCompactionLagMs,
		MaxCompactionLagMs:     t.MaxCompactionLagMs,
		MinCleanableDirtyRatio: t.MinCleanableDirtyRatio,
	}
}
