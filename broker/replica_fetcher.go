package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
)

// Replication, follower side. For each leader it follows partitions of,
// this node runs one fetcher goroutine that fetches from the leader with
// the Fetch API and its replica id, as Kafka's replica fetcher threads do.
// After becoming a follower a partition first truncates a divergent tail:
// it asks the leader, with OffsetForLeaderEpoch, where its own last leader
// epoch ended there, and cuts its log at that offset (KIP-101/279).

// fetcherManager keeps one fetcher per leader.
type fetcherManager struct {
	s        *Server
	mu       sync.Mutex
	fetchers map[int32]*replicaFetcher
}

func newFetcherManager(s *Server) *fetcherManager {
	return &fetcherManager{s: s, fetchers: make(map[int32]*replicaFetcher)}
}

// reconcile hands every partition this node follows to the fetcher of its
// leader, and stops fetchers left with nothing to fetch.
func (m *fetcherManager) reconcile(table map[string]*topicPartitions) {
	byLeader := make(map[int32][]*partition.Partition)
	for _, tp := range table {
		for _, p := range tp.parts {
			if p == nil {
				continue
			}
			if a := p.Assign.Load(); a != nil && a.Leader >= 0 && a.Leader != m.s.cfg.NodeID {
				byLeader[a.Leader] = append(byLeader[a.Leader], p)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for leader, f := range m.fetchers {
		if _, ok := byLeader[leader]; !ok {
			f.stop()
			delete(m.fetchers, leader)
		}
	}
	for leader, parts := range byLeader {
		f := m.fetchers[leader]
		if f == nil {
			f = newReplicaFetcher(m.s, leader)
			m.fetchers[leader] = f
		}
		f.set(parts)
	}
}

// close stops every fetcher and waits for each to finish what it was
// doing, so that none appends to a log after close returns.
func (m *fetcherManager) close() {
	m.mu.Lock()
	var stopped []*replicaFetcher
	for leader, f := range m.fetchers {
		f.stop()
		delete(m.fetchers, leader)
		stopped = append(stopped, f)
	}
	m.mu.Unlock()
	for _, f := range stopped {
		<-f.done
	}
}

// followState is a followed partition's progress: whether it has
// truncated since it started following at this leader epoch.
type followState struct {
	epoch     int32
	truncated bool
}

type replicaFetcher struct {
	s      *Server
	leader int32
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	mu    sync.Mutex
	parts map[*partition.Partition]*followState
}

func newReplicaFetcher(s *Server, leader int32) *replicaFetcher {
	ctx, cancel := context.WithCancel(s.ctx)
	f := &replicaFetcher{s: s, leader: leader, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1), parts: make(map[*partition.Partition]*followState)}
	s.goTracked(func() {
		defer close(f.done)
		f.run()
	})
	return f
}

func (f *replicaFetcher) set(parts []*partition.Partition) {
	f.mu.Lock()
	next := make(map[*partition.Partition]*followState, len(parts))
	for _, p := range parts {
		epoch := p.Assign.Load().LeaderEpoch
		if st := f.parts[p]; st != nil && st.epoch == epoch {
			next[p] = st
		} else {
			next[p] = &followState{epoch: epoch}
		}
	}
	f.parts = next
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *replicaFetcher) stop() {
	f.cancel()
}

// leaderAddr is the leader's address on the inter-broker listener.
func (f *replicaFetcher) leaderAddr() (string, error) {
	b, ok := f.s.meta.Image().Broker(f.leader)
	if !ok {
		return "", fmt.Errorf("leader %d is not registered", f.leader)
	}
	l, ok := b.Listener(f.s.cfg.InterBrokerListenerName)
	if !ok {
		return "", fmt.Errorf("leader %d has no %s listener", f.leader, f.s.cfg.InterBrokerListenerName)
	}
	return net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), nil
}

func (f *replicaFetcher) run() {
	backoff := time.Duration(f.s.cfg.ReplicaFetchBackoffMs) * time.Millisecond
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for f.ctx.Err() == nil {
		if cl == nil {
			addr, err := f.leaderAddr()
			if err == nil {
				cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(fmt.Sprintf("gregor-replica-%d", f.s.cfg.NodeID)))
			}
			if err != nil {
				f.s.log.Warn("replica fetcher", "leader", f.leader, "err", err)
				f.sleep(backoff)
				continue
			}
		}
		f.mu.Lock()
		parts := make(map[*partition.Partition]*followState, len(f.parts))
		for p, st := range f.parts {
			// A partition on an offline log dir is no longer followed
			// (produce_helpers.go): the controller moves it off this
			// broker, and its errors would hold up the others.
			if !f.s.dirOffline(p) {
				parts[p] = st
			}
		}
		f.mu.Unlock()
		if len(parts) == 0 {
			select {
			case <-f.wake:
			case <-f.ctx.Done():
			}
			continue
		}
		if f.s.ownBrokerEpoch() == -1 {
			// Not registered yet (a restart replays the image before it
			// registers): fetches are made under this incarnation's epoch
			// only, so that the leader never counts them for another.
			f.sleep(max(backoff, 50*time.Millisecond))
			continue
		}
		if err := f.truncate(cl, parts); err != nil {
			if f.ctx.Err() == nil {
				f.s.log.Warn("replica truncation", "leader", f.leader, "err", err)
			}
			f.noteDiskFailures(parts)
			f.sleep(backoff)
			continue
		}
		if err := f.fetchOnce(cl, parts); err != nil {
			if f.ctx.Err() == nil {
				f.s.log.Warn("replica fetch", "leader", f.leader, "err", err)
			}
			f.noteDiskFailures(parts)
			f.sleep(backoff)
		}
	}
}

// noteDiskFailures takes offline the log dir of each followed partition
// whose log a failed write made unusable, as a leader's append does.
func (f *replicaFetcher) noteDiskFailures(parts map[*partition.Partition]*followState) {
	for p := range parts {
		if err := p.Log.Err(); err != nil {
			f.s.storageFailed(p, err)
		}
	}
}

func (f *replicaFetcher) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-f.ctx.Done():
	}
}

// truncate cuts the log of every partition that has not truncated at its
// current leader epoch to where the leader says its last epoch ended.
func (f *replicaFetcher) truncate(cl *kgo.Client, parts map[*partition.Partition]*followState) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = f.s.cfg.NodeID
	var asked []*partition.Partition
	topics := make(map[string]int)
	for p, st := range parts {
		if st.truncated {
			continue
		}
		p.Mu.Lock()
		entries, err := p.EpochsLocked()
		p.Mu.Unlock()
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			st.truncated = true // an empty log has nothing to cut
			continue
		}
		i, ok := topics[p.Topic]
		if !ok {
			i = len(req.Topics)
			topics[p.Topic] = i
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = p.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = p.Index
		rp.CurrentLeaderEpoch = st.epoch
		rp.LeaderEpoch = entries[len(entries)-1].Epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		asked = append(asked, p)
	}
	if len(asked) == 0 {
		return nil
	}
	resp, err := req.RequestWith(f.ctx, cl.Broker(int(f.leader)))
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			p := f.s.parts.get(rt.Topic, rp.Partition)
			st := parts[p]
			if p == nil || st == nil {
				continue
			}
			if rp.ErrorCode != 0 {
				return fmt.Errorf("offset for leader epoch %s-%d: %w", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			if err := f.s.truncateFollower(p, rp.EndOffset); err != nil {
				return err
			}
			st.truncated = true
		}
	}
	return nil
}

// truncateFollower cuts a follower's log at offset (when below its end) and
// forgets what lay above: epochs, producer state.
func (s *Server) truncateFollower(p *partition.Partition, offset int64) error {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if offset < 0 || offset >= p.Log.LogEndOffset() {
		return nil
	}
	s.log.Info("truncating follower log", "topic", p.Topic, "partition", p.Index, "from", p.Log.LogEndOffset(), "to", offset)
	if err := p.Log.TruncateTo(offset); err != nil {
		return fmt.Errorf("truncate %s-%d: %w", p.Topic, p.Index, err)
	}
	leo := p.Log.LogEndOffset()
	if entries, err := p.EpochsLocked(); err == nil {
		for len(entries) > 0 && entries[len(entries)-1].StartOffset >= leo {
			entries = entries[:len(entries)-1]
		}
		p.Epochs = entries
		if err := p.WriteEpochsLocked(); err != nil {
			return err
		}
	}
	p.Producers = nil
	if p.HW.Load() > leo {
		p.HW.Store(leo)
	}
	return s.logs.Checkpoint()
}

// fetchOnce sends one replica fetch to the leader and appends what comes
// back.
func (f *replicaFetcher) fetchOnce(cl *kgo.Client, parts map[*partition.Partition]*followState) error {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.s.cfg.NodeID
	req.ReplicaState.ID = f.s.cfg.NodeID
	// The leader counts this fetch for this incarnation only (KIP-903).
	req.ReplicaState.Epoch = f.s.ownBrokerEpoch()
	req.MaxWaitMillis = f.s.cfg.ReplicaFetchWaitMaxMs
	req.MinBytes = f.s.cfg.ReplicaFetchMinBytes
	req.MaxBytes = f.s.cfg.ReplicaFetchResponseMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	topics := make(map[string]int)
	byKey := make(map[string]*partition.Partition)
	for p, st := range parts {
		if !st.truncated {
			continue
		}
		i, ok := topics[p.Topic]
		if !ok {
			i = len(req.Topics)
			topics[p.Topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.Topic, p.TopicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.Index
		rp.FetchOffset = p.Log.LogEndOffset()
		rp.LogStartOffset = p.Log.LogStartOffset()
		rp.CurrentLeaderEpoch = st.epoch
		rp.PartitionMaxBytes = f.s.cfg.ReplicaFetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		byKey[p.Topic+"/"+strconv.Itoa(int(p.Index))] = p
	}
	if len(byKey) == 0 {
		return nil
	}
	resp, err := req.RequestWith(f.ctx, cl.Broker(int(f.leader)))
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	var errs []error
	for _, rt := range resp.Topics {
		name := rt.Topic
		if req.Version >= 13 {
			if t, ok := f.s.meta.Image().TopicByID(rt.TopicID); ok {
				name = t.Name
			}
		}
		for _, rp := range rt.Partitions {
			p := byKey[name+"/"+strconv.Itoa(int(rp.Partition))]
			if p == nil {
				continue
			}
			if err := f.s.applyFetched(p, parts[p], &rp); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// applyFetched appends a fetched partition's batches as a follower and
// takes the leader's high watermark and log start offset.
func (s *Server) applyFetched(p *partition.Partition, st *followState, rp *kmsg.FetchResponseTopicPartition) error {
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		p.Mu.Lock()
		defer p.Mu.Unlock()
		if p.Log.LogEndOffset() < rp.LogStartOffset || rp.LogStartOffset < 0 {
			// Behind the leader's log start: start over there.
			start := rp.LogStartOffset
			if start < 0 {
				start = 0
			}
			if err := p.Log.TruncateFullyAndStartAt(start); err != nil {
				return err
			}
			p.Epochs, p.Producers = []partition.EpochEntry{}, nil
			return p.WriteEpochsLocked()
		}
		st.truncated = false // ahead of the leader: truncate again
		return nil
	default:
		return fmt.Errorf("fetch %s-%d from leader: %w", p.Topic, p.Index, kerr.ErrorForCode(rp.ErrorCode))
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if len(rp.RecordBatches) > 0 {
		if _, err := p.Log.AppendAsFollower(rp.RecordBatches); err != nil {
			var aoe *storage.AppendOffsetError
			if errors.As(err, &aoe) && aoe.LogEndOffset == aoe.LogStartOffset {
				if err := p.Log.TruncateFullyAndStartAt(aoe.FirstOffset); err != nil {
					return err
				}
				_, err = p.Log.AppendAsFollower(rp.RecordBatches)
			}
			if err != nil {
				return fmt.Errorf("append %s-%d as follower: %w", p.Topic, p.Index, err)
			}
		}
		if err := s.noteFetchedEpochsLocked(p, rp.RecordBatches); err != nil {
			return err
		}
		p.Producers = nil
	}
	if rp.LogStartOffset > p.Log.LogStartOffset() {
		if err := p.Log.IncrementLogStartOffset(min(rp.LogStartOffset, p.Log.LogEndOffset())); err != nil {
			return err
		}
	}
	hw := min(rp.HighWatermark, p.Log.LogEndOffset())
	if hw != p.HW.Load() && hw >= 0 {
		p.HW.Store(hw)
		p.Log.SetHighWatermark(hw)
	}
	return nil
}

// noteFetchedEpochsLocked adds to the epoch cache the epochs that begin in
// fetched batches.
func (s *Server) noteFetchedEpochsLocked(p *partition.Partition, data []byte) error {
	entries, err := p.EpochsLocked()
	if err != nil {
		return err
	}
	changed := false
	for len(data) > 0 {
		_, rest, h, err := protocol.NextBatch(data)
		if err != nil {
			break // a partial batch at the end, not appended
		}
		data = rest
		if n := len(entries); h.PartitionLeaderEpoch >= 0 && (n == 0 || h.PartitionLeaderEpoch > entries[n-1].Epoch) {
			entries = append(entries, partition.EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset})
			changed = true
		}
	}
	p.Epochs = entries
	if changed {
		return p.WriteEpochsLocked()
	}
	return nil
}
