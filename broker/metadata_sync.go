package broker

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/storage"
)

// watchMetadata reconciles the hosted partitions with each image the
// metadata log applies, as a KRaft broker does with its metadata delta.
//
// A partition whose log could not be created (the process out of file
// descriptors, the disk out of space) is tried again with a backoff that
// doubles from createRetryMin to createRetryMax, for as long as it fails;
// it serves once its log exists.
func (s *Server) watchMetadata() {
	changes := s.meta.Changes()
	var retry <-chan time.Time
	backoff := createRetryMin
	if s.parts.anyCreateFailed() {
		// The start-up reconcile could not create some logs.
		retry = time.After(backoff)
	}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-changes:
		case <-retry:
		}
		err := s.reconcile(s.meta.Image())
		var cf *createLogsError
		if !errors.As(err, &cf) {
			if err != nil {
				s.log.Error("apply metadata", "err", err)
			}
			retry, backoff = nil, createRetryMin
			continue
		}
		s.log.Warn("apply metadata: retrying the partitions whose logs could not be created", "partitions", cf.count, "in", backoff, "err", err)
		retry = time.After(backoff)
		backoff = min(2*backoff, createRetryMax)
	}
}

// The backoff between tries to create the logs that failed.
const (
	createRetryMin = 200 * time.Millisecond
	createRetryMax = 5 * time.Second
)

// createLogsError reports the partitions reconcile could not create a log
// for: how many, and the first failure.
type createLogsError struct {
	count int
	first error
}

func (e *createLogsError) Error() string {
	return fmt.Sprintf("%d partition logs could not be created (retried in the background); first: %v", e.count, e.first)
}

func (e *createLogsError) Unwrap() error { return e.first }

// reconcile opens a log for every partition of the image that lists this
// node as a replica, and deletes the logs of topics that are gone. Handlers
// that change metadata call it too, after their change applies, so that
// their answer reflects it; it is idempotent.
func (s *Server) reconcile(img *image.Image) error {
	s.reconcileMu.Lock()
	defer s.reconcileMu.Unlock()
	// Callers read the image before they take the lock, so two of them
	// (the metadata watcher and a handler that created a topic) may come
	// in the opposite order: the older image would delete the logs of a
	// topic it does not have yet, under partitions that keep serving.
	// The newest image is always the one to apply.
	if cur := s.meta.Image(); cur.Offset() > img.Offset() {
		img = cur
	}

	old := s.parts.load()
	var errs []error
	// Only the topics changed since the last complete reconcile need a
	// look: the others' tables are as that reconcile left them (each
	// table's img is its topic's image then). Walking every topic cost
	// each metadata change a sorted list of all names and a lookup per
	// topic, a third of the broker's CPU creating one-partition topics
	// next to 2,000 others.
	var names []string
	if s.reconciled != nil {
		names = slices.Collect(img.ChangedTopicNames(s.reconciled))
	} else {
		names = img.TopicNames()
		for name := range old.Keys() {
			if _, ok := img.Topic(name); !ok {
				names = append(names, name)
			}
		}
	}

	s.reconcileLooked = len(names)

	// First remove what is gone: topics deleted (or deleted and created
	// again under the same name, which reuses the directory names), and
	// stray logs left by a crash between a deletion and its logs' removal.
	// Only reconcile creates logs, so once a sweep has run, one is needed
	// again only when a topic it kept has changed or gone (a new topic has
	// no logs yet) or a deletion failed; each sweep copies the map of every
	// log, which most metadata changes (a topic created) need not pay.
	sweep := !s.swept
	for _, name := range names {
		if sweep {
			break
		}
		if prev := getTopic(old, name); prev != nil {
			if t, ok := img.Topic(name); !ok || t != prev.img {
				sweep = true
			}
		}
	}
	deleteFailed := false
	for tp := range s.sweepLogs(sweep) {
		t, ok := img.Topic(tp.Topic)
		keep := ok && int(tp.Partition) < len(t.Partitions) &&
			slices.Contains(t.Partitions[tp.Partition].Replicas, s.cfg.NodeID)
		if keep {
			if prev := getTopic(old, tp.Topic); prev != nil && prev.id != t.ID {
				keep = false
			}
		}
		if keep {
			continue
		}
		if err := s.logs.DeleteLog(tp.Topic, tp.Partition); err != nil {
			errs = append(errs, fmt.Errorf("delete log %s-%d: %w", tp.Topic, tp.Partition, err))
			deleteFailed = true
			continue
		}
		s.log.Info("deleted log", "topic", tp.Topic, "partition", tp.Partition)
	}

	var failed createLogsError
	next := newTableEdit(old)
	var nc newLogs
	for _, name := range names {
		t, ok := img.Topic(name)
		if !ok {
			next.w.Delete(name)
			continue
		}
		prev := getTopic(old, name)
		if tp := s.topicTable(t, prev, &nc); tp != prev {
			next.w.Set(name, tp)
		}
	}
	toCreate, specs := nc.parts, nc.specs
	if len(specs) > 0 {
		logs, errs := s.logs.CreateLogs(specs)
		for k, np := range toCreate {
			tp, i := np.tp, np.i
			if err := errs[k]; err != nil {
				err = fmt.Errorf("open log %s-%d: %w", tp.name, i, err)
				if tp.failed == nil {
					tp.failed = make(map[int32]error)
				}
				tp.failed[int32(i)] = err
				if failed.count == 0 {
					failed.first = err
				}
				failed.count++
				continue
			}
			p := partition.New(s.partEnv, s.cfg.NodeID, tp.name, int32(i), tp.id, logs[k], np.tcfg, np.pi.LeaderEpoch)
			if len(specs[k].Files) > 0 && logs[k].MadeWith(partition.EpochCheckpointFile) {
				p.StartEpochsAt(np.pi.LeaderEpoch)
			}
			p.Metrics = s.ops.metrics.Topic(tp.name)
			s.applyAssignment(p, np.pi)
			tp.parts[i] = p
		}
	}
	if failed.count > 0 {
		errs = append(errs, &failed)
	}
	if sweep {
		s.swept = !deleteFailed
	}
	s.parts.store(next)
	s.reconciled = img
	if failed.count > 0 {
		// The failed topics' tables must be made again at the next try.
		s.reconciled = nil
	}
	for _, name := range names {
		if getTopic(next.view, name) == nil && getTopic(old, name) != nil {
			s.ops.metrics.DeleteTopic(name) // as Kafka drops a deleted topic's metrics
		}
	}
	s.fetchers.Update(changedPartitions(names, old, next.view))
	if s.groups != nil {
		s.groups.reconcile(img)
	}
	if s.txns != nil {
		s.txns.loader.Reconcile(img)
	}
	if s.shares != nil {
		s.shares.loader.Reconcile(img)
	}
	// Listener key and trust stores set by dynamic config, here or before
	// a restart.
	s.reloadListenerTLS(img.BrokerConfigs(strconv.Itoa(int(s.cfg.NodeID))), nil)
	return errors.Join(errs...)
}

// newLogs gathers the partitions that need a new log, which reconcile
// makes in one batch (storage.Manager.CreateLogs: several at a time, one
// fsync of the log dir for all) and then wraps in partitions.
type newLogs struct {
	parts []newPart
	specs []storage.LogSpec
}

// newPart is a hosted partition of a topic table whose log is to be made.
type newPart struct {
	tp   *topicPartitions
	i    int
	pi   image.PartitionImage
	tcfg *config.Topic // shared by the topic's partitions
}

// topicTable is the table of topic t's hosted partitions: prev (the
// table of the last reconcile, or nil) when t has not changed since,
// else a new one with the partitions prev had, brought up to t, and the
// new ones added to nc.
func (s *Server) topicTable(t *image.TopicImage, prev *topicPartitions, nc *newLogs) *topicPartitions {
	if prev != nil && prev.id != t.ID {
		prev = nil
	}
	// The image is copy-on-write per topic: the same *TopicImage
	// means the same partitions, assignments and overrides, and so
	// the same effective config (the broker's defaults, s.cfg, do
	// not change while it runs). With every log made, the topic is
	// as the last reconcile left it. Walking it again would cost
	// every metadata change (each CreateTopics, twice) a pass over
	// every hosted partition: 71% of the broker's CPU creating
	// one-partition topics next to 10,000 partitions, 4 topics/s;
	// resolving its config alone, 20% creating 300 topics.
	if prev != nil && prev.img == t && prev.failed == nil {
		return prev
	}
	tcfg := s.cfg.TopicConfig(t.Configs)
	tp := &topicPartitions{name: t.Name, id: t.ID, parts: make([]*partition.Partition, len(t.Partitions)), img: t}
	for i, pi := range t.Partitions {
		if !slices.Contains(pi.Replicas, s.cfg.NodeID) {
			continue
		}
		if prev != nil && i < len(prev.parts) && prev.parts[i] != nil {
			p := prev.parts[i]
			c := tcfg
			p.Cfg.Store(&c)
			p.Log.SetConfig(logConfig(tcfg))
			s.applyAssignment(p, pi)
			tp.parts[i] = p
			continue
		}
		nc.parts = append(nc.parts, newPart{tp: tp, i: i, pi: pi, tcfg: &tcfg})
		spec := storage.LogSpec{Topic: t.Name, Partition: int32(i), TopicID: t.ID, Config: logConfig(tcfg)}
		if pi.Leader == s.cfg.NodeID {
			spec.Files = partition.NewLeaderLogFiles(pi.LeaderEpoch)
		}
		nc.specs = append(nc.specs, spec)
	}
	return tp
}

// sweepLogs is the logs reconcile checks for deletion: every log when
// sweep is set, none otherwise.
func (s *Server) sweepLogs(sweep bool) map[storage.TopicPartition]*storage.Log {
	if !sweep {
		return nil
	}
	return s.logs.Logs()
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

// topicPartitions is one topic's hosted partitions, by index. A nil entry
// is a partition this node does not host.
type topicPartitions struct {
	name  string
	id    [16]byte
	parts []*partition.Partition
	// img is the topic's image this table was made from; reconcile
	// skips the topic while it stays the same.
	img *image.TopicImage
	// failed holds, for the partitions this node hosts whose log could
	// not be created (out of file descriptors or space), the error of the
	// last try; nil when there are none. The broker tries again with a
	// backoff (metadata_sync.go); meanwhile they answer
	// KAFKA_STORAGE_ERROR.
	failed map[int32]error
}

func (t *partitionTable) get(topic string, index int32) *partition.Partition {
	tp := t.topic(topic)
	if tp == nil || index < 0 || int(index) >= len(tp.parts) {
		return nil
	}
	return tp.parts[index]
}

// createFailed is the error that kept the hosted partition's log from
// being created, or nil.
func (t *partitionTable) createFailed(topic string, index int32) error {
	tp := t.topic(topic)
	if tp == nil {
		return nil
	}
	return tp.failed[index]
}

// anyCreateFailed reports whether some hosted partition has no log yet
// because its creation failed.
func (t *partitionTable) anyCreateFailed() bool {
	for _, tp := range t.all() {
		if len(tp.failed) > 0 {
			return true
		}
	}
	return false
}

// getTopic is the named topic's hosted partitions in table, or nil.
func getTopic(table tableView, name string) *topicPartitions {
	tp, _ := table.Get(name)
	return tp
}

// changedPartitions is what a change of the named topics did to the
// hosted partitions, from table old to table next: the partitions of those
// topics that next hosts (their assignments may have changed), and those
// old hosted that next does not. Only these can have changed leader, so
// the replica fetchers are handed these rather than every hosted
// partition: in a cluster each metadata change (a topic created, an ISR
// changed) would otherwise cost a pass over all of them.
func changedPartitions(names []string, old, next tableView) (changed, removed []*partition.Partition) {
	for _, name := range names {
		now := getTopic(next, name)
		if now != nil {
			for _, p := range now.parts {
				if p != nil {
					changed = append(changed, p)
				}
			}
		}
		before := getTopic(old, name)
		if before == nil {
			continue
		}
		for i, p := range before.parts {
			// A partition kept keeps its index (topicTable).
			if p != nil && (now == nil || i >= len(now.parts) || now.parts[i] != p) {
				removed = append(removed, p)
			}
		}
	}
	return changed, removed
}

// eachHostedPartition walks the partitions of a partition table, for a
// caller that keeps none of them (log maintenance, every second).
func eachHostedPartition(table tableView) iter.Seq[*partition.Partition] {
	return func(yield func(*partition.Partition) bool) {
		for tp := range table.Values() {
			for _, p := range tp.parts {
				if p != nil && !yield(p) {
					return
				}
			}
		}
	}
}

// hostedPartitions lists the partitions of a partition table.
func hostedPartitions(table tableView) []*partition.Partition {
	var out []*partition.Partition
	for tp := range table.Values() {
		for _, p := range tp.parts {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}
