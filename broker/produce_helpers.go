package broker

import (
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/storage"
)

// leaderPartition is the partition if this node hosts it and leads it:
// produce, consumer fetches, ListOffsets and the other client requests go
// to leaders only. A hosted partition led elsewhere is nil here, and
// partitionMissingCode answers NOT_LEADER_OR_FOLLOWER for it.
func (s *Server) leaderPartition(topic string, index int32) *partition.Partition {
	p := s.parts.get(topic, index)
	if p == nil || !p.IsLeader(s.cfg.NodeID) || s.dirOffline(p) {
		return nil
	}
	return p
}

// A log dir whose disk failed a write or an fsync goes offline, as in
// Kafka: every partition in it answers KAFKA_STORAGE_ERROR from then on
// (the log's error is sticky, and nothing more is written there), while
// partitions in the other log dirs keep serving. In a cluster the broker
// tells the controller (KIP-858): each heartbeat lists the partitions it
// holds on offline dirs, and the controller moves their leadership to
// other in-sync replicas and keeps this broker out of their ISRs. This
// broker stops following them too (the replica fetcher skips them). A
// dir stays offline until the broker restarts, as in Kafka.

// logDirHealth is the set of log dirs that went offline, and a signal to
// the heartbeat loop that one more did, so the controller hears of it at
// once, as Kafka's broker sends a heartbeat on a dir failure. The zero
// value is ready to use.
type logDirHealth struct {
	dirs sync.Map    // log dir → true once a disk error took it offline
	any  atomic.Bool // some dir is offline: heartbeats list partitions
	once sync.Once
	wake chan struct{} // made by changed; holds at most one signal
}

// changed is signalled each time a log dir goes offline.
func (h *logDirHealth) changed() chan struct{} {
	h.once.Do(func() { h.wake = make(chan struct{}, 1) })
	return h.wake
}

// storageFailed takes the log dir of p offline after a disk error. It
// takes no lock and does not block, so callers may hold p.Mu.
func (s *Server) storageFailed(p *partition.Partition, err error) {
	if errors.Is(err, storage.ErrClosed) || p.Log.Closed() {
		// A log closed because its partition was deleted or moved away
		// says nothing about the disk: its files (the log's, or the
		// leader-epoch checkpoint beside them) may already be gone.
		return
	}
	if storage.IsExhausted(err) && p.Log.Err() == nil {
		// A full disk, or a process out of file descriptors, fails the
		// one write and leaves the log usable (storage/nospace.go): the
		// dir stays online and serves again once space returns.
		s.noteNoSpace(p, err)
		return
	}
	dir := filepath.Dir(p.Log.Dir())
	if _, was := s.offlineDirs.dirs.LoadOrStore(dir, true); was {
		return
	}
	s.offlineDirs.any.Store(true)
	s.logs.SetDirOffline(dir)
	s.log.Error("log dir offline after a disk error: its partitions answer KAFKA_STORAGE_ERROR until restart",
		"dir", dir, "topic", p.Topic, "partition", p.Index, "err", err)
	select {
	case s.offlineDirs.changed() <- struct{}{}:
	default:
	}
}

func (s *Server) dirOffline(p *partition.Partition) bool {
	if !s.offlineDirs.any.Load() {
		return false
	}
	_, off := s.offlineDirs.dirs.Load(filepath.Dir(p.Log.Dir()))
	return off
}

// offlinePartitions lists the hosted partitions whose log dir is offline,
// for the heartbeat. It is nil while every dir is healthy.
func (s *Server) offlinePartitions() []controller.TopicIDPartition {
	if !s.offlineDirs.any.Load() {
		return nil
	}
	var out []controller.TopicIDPartition
	for _, tp := range s.parts.all() {
		for _, p := range tp.parts {
			if p != nil && s.dirOffline(p) {
				out = append(out, controller.TopicIDPartition{TopicID: p.TopicID, Partition: p.Index})
			}
		}
	}
	return out
}
