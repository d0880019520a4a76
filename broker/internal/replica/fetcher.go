package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/internal/partition"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
)

// Manager keeps one fetcher per leader.
type Manager struct {
	d        Deps
	mu       sync.Mutex
	fetchers map[int32]*fetcher
	// following is the leader whose fetcher holds each followed
	// partition, so that a metadata change costs the partitions it
	// touched rather than a pass over every hosted one.
	following map[*partition.Partition]int32
	// closed is set by Close: an update after it starts no fetcher,
	// so nothing appends to a log once Close has returned.
	closed bool
}

// Deps are what the fetchers need of the server.
type Deps struct {
	Cfg    *config.Broker      // the node id, the inter-broker listener, replica.fetch.*
	Image  func() *image.Image // this node's metadata image
	Ctx    context.Context     // ends when the server closes
	Go     func(func())        // starts a goroutine the server waits for when it closes
	Logger *slog.Logger
	// BrokerEpoch is this broker's registration epoch, -1 before it has
	// registered.
	BrokerEpoch func() int64
	// Partition is a hosted partition, or nil.
	Partition func(topic string, index int32) *partition.Partition
	// DirOffline reports whether p's log dir went offline, and
	// StorageFailed takes it offline after a disk error.
	DirOffline    func(p *partition.Partition) bool
	StorageFailed func(p *partition.Partition, err error)
	// Checkpoint writes the log dirs' checkpoints, after a truncation.
	Checkpoint func() error
	// Secure are the client options of the inter-broker listener's
	// security protocol (TLS, SASL).
	Secure []kgo.Opt
	// Replicated counts the record bytes appended as a follower
	// (ReplicationBytesInPerSec); nil counts nothing.
	Replicated func(bytes int)
}

// NewManager is a Manager with no fetcher yet.
func NewManager(d Deps) *Manager {
	return &Manager{d: d, fetchers: make(map[int32]*fetcher), following: make(map[*partition.Partition]int32)}
}

// Update brings the fetchers up to a metadata change: each partition of
// changed that this node follows goes to the fetcher of its leader (its
// follow state kept while its leader epoch stays the same), and each
// partition of changed that it no longer follows, or of removed (no longer
// hosted), leaves its fetcher. A fetcher left with nothing to fetch stops.
// Partitions in neither list keep their fetcher.
func (m *Manager) Update(changed, removed []*partition.Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	touched := make(map[int32]*fetcher)
	leave := func(p *partition.Partition) {
		leader, ok := m.following[p]
		if !ok {
			return
		}
		delete(m.following, p)
		f := m.fetchers[leader]
		f.remove(p)
		touched[leader] = f
	}
	for _, p := range removed {
		leave(p)
	}
	for _, p := range changed {
		a := p.Assign.Load()
		follows := a != nil && a.Leader >= 0 && a.Leader != m.d.Cfg.NodeID
		if leader, ok := m.following[p]; ok && (!follows || leader != a.Leader) {
			leave(p)
		}
		if !follows {
			continue
		}
		f := m.fetchers[a.Leader]
		if f == nil {
			f = m.newFetcher(a.Leader)
			m.fetchers[a.Leader] = f
		}
		f.put(p, a.LeaderEpoch)
		m.following[p] = a.Leader
		touched[a.Leader] = f
	}
	for leader, f := range touched {
		if f.size() == 0 {
			f.stop()
			delete(m.fetchers, leader)
			continue
		}
		f.poke()
	}
}

// Close stops every fetcher and waits for each to finish what it was
// doing, so that none appends to a log after Close returns.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	var stopped []*fetcher
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

// FollowState is a followed partition's progress: whether it has
// truncated since it started following at this leader epoch.
type FollowState struct {
	Epoch     int32
	Truncated bool
}

// fetcher follows the partitions of one leader.
type fetcher struct {
	m      *Manager
	leader int32
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	mu    sync.Mutex
	parts map[*partition.Partition]*FollowState
}

func (m *Manager) newFetcher(leader int32) *fetcher {
	ctx, cancel := context.WithCancel(m.d.Ctx)
	f := &fetcher{m: m, leader: leader, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1), parts: make(map[*partition.Partition]*FollowState)}
	m.d.Go(func() {
		defer close(f.done)
		f.run()
	})
	return f
}

// put has the fetcher follow p, whose leader epoch is epoch: with the
// state it had if it follows p at that epoch already, else from the start
// (a new epoch needs a new truncation).
func (f *fetcher) put(p *partition.Partition, epoch int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.parts[p]; st == nil || st.Epoch != epoch {
		f.parts[p] = &FollowState{Epoch: epoch}
	}
}

// remove stops the fetcher from following p.
func (f *fetcher) remove(p *partition.Partition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.parts, p)
}

// size is how many partitions the fetcher follows.
func (f *fetcher) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.parts)
}

// poke wakes a fetcher waiting for partitions to follow.
func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fetcher) stop() {
	f.cancel()
}

// leaderAddr is the leader's address on the inter-broker listener.
func (f *fetcher) leaderAddr() (string, error) {
	b, ok := f.m.d.Image().Broker(f.leader)
	if !ok {
		return "", fmt.Errorf("leader %d is not registered", f.leader)
	}
	l, ok := b.Listener(f.m.d.Cfg.InterBrokerListenerName)
	if !ok {
		return "", fmt.Errorf("leader %d has no %s listener", f.leader, f.m.d.Cfg.InterBrokerListenerName)
	}
	return net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), nil
}

func (f *fetcher) run() {
	backoff := time.Duration(f.m.d.Cfg.ReplicaFetchBackoffMs) * time.Millisecond
	quick := 0 // quick retries in a row (retryAfter)
	var cl leaderClient
	defer func() {
		if cl != nil {
			cl.close()
		}
	}()
	for f.ctx.Err() == nil {
		if cl == nil {
			var err error
			if cl, err = f.newClient(); err != nil {
				f.m.d.Logger.Warn("replica fetcher", "leader", f.leader, "err", err)
				f.sleep(backoff)
				continue
			}
		}
		f.mu.Lock()
		parts := make(map[*partition.Partition]*FollowState, len(f.parts))
		for p, st := range f.parts {
			// A partition on an offline log dir is no longer followed
			// (broker/produce_helpers.go): the controller moves it off this
			// broker, and its errors would hold up the others.
			if !f.m.d.DirOffline(p) {
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
		if f.m.d.BrokerEpoch() == -1 {
			// Not registered yet (a restart replays the image before it
			// registers): fetches are made under this incarnation's epoch
			// only, so that the leader never counts them for another.
			f.sleep(max(backoff, 50*time.Millisecond))
			continue
		}
		if err := f.truncate(cl, parts); err != nil {
			if f.ctx.Err() == nil {
				f.m.d.Logger.Warn("replica truncation", "leader", f.leader, "err", err)
			}
			f.noteDiskFailures(parts)
			f.sleep(f.retryAfter(err, backoff, &quick))
			continue
		}
		if err := f.fetchOnce(cl, parts); err != nil {
			if f.ctx.Err() == nil {
				f.m.d.Logger.Warn("replica fetch", "leader", f.leader, "err", err)
			}
			f.noteDiskFailures(parts)
			f.sleep(f.retryAfter(err, backoff, &quick))
			continue
		}
		quick = 0
	}
}

// Quick retries of a leader that has not yet taken its leadership.
const (
	leaderBehindRetry      = 50 * time.Millisecond
	leaderBehindMaxRetries = 10
)

// retryAfter is how long the fetcher waits after err before asking the
// leader again: replica.fetch.backoff.ms, except when the leader answered
// NOT_LEADER_FOR_PARTITION or UNKNOWN_LEADER_EPOCH. Right after a
// failover that most often means the leader has not yet applied the
// metadata entry that made it leader, which this follower already has;
// it will within milliseconds, and until this follower fetches again an
// acks=all produce to the new leader waits for it. Such answers are
// asked again after 50 ms, up to ten times in a row (quick counts them),
// then after the backoff.
func (f *fetcher) retryAfter(err error, backoff time.Duration, quick *int) time.Duration {
	behind := errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.UnknownLeaderEpoch)
	if !behind || backoff <= leaderBehindRetry || *quick >= leaderBehindMaxRetries {
		return backoff
	}
	*quick++
	return leaderBehindRetry
}

// newClient is the fetcher's client of its leader: a connection of its
// own on a PLAINTEXT inter-broker listener (leaderConn), a franz-go client
// for TLS or SASL.
func (f *fetcher) newClient() (leaderClient, error) {
	clientID := fmt.Sprintf("gregor-replica-%d", f.m.d.Cfg.NodeID)
	if len(f.m.d.Secure) == 0 {
		return &leaderConn{addr: f.leaderAddr, clientID: clientID,
			timeout: time.Duration(f.m.d.Cfg.ReplicaSocketTimeoutMs) * time.Millisecond}, nil
	}
	addr, err := f.leaderAddr()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(clientID)}, f.m.d.Secure...)...)
	if err != nil {
		return nil, err
	}
	return kgoLeader{cl: cl, leader: f.leader}, nil
}

// noteDiskFailures takes offline the log dir of each followed partition
// whose log a failed write made unusable, as a leader's append does.
func (f *fetcher) noteDiskFailures(parts map[*partition.Partition]*FollowState) {
	for p := range parts {
		if err := p.Log.Err(); err != nil {
			f.m.d.StorageFailed(p, err)
		}
	}
}

func (f *fetcher) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-f.ctx.Done():
	}
}

// truncate cuts the log of every partition that has not truncated at its
// current leader epoch to where the leader says its last epoch ended.
func (f *fetcher) truncate(cl leaderClient, parts map[*partition.Partition]*FollowState) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = f.m.d.Cfg.NodeID
	var asked []*partition.Partition
	topics := make(map[string]int)
	for p, st := range parts {
		if st.Truncated {
			continue
		}
		p.Mu.Lock()
		entries, err := p.EpochsLocked()
		p.Mu.Unlock()
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			st.Truncated = true // an empty log has nothing to cut
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
		rp.CurrentLeaderEpoch = st.Epoch
		rp.LeaderEpoch = entries[len(entries)-1].Epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		asked = append(asked, p)
	}
	if len(asked) == 0 {
		return nil
	}
	kresp, err := cl.request(f.ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			p := f.m.d.Partition(rt.Topic, rp.Partition)
			st := parts[p]
			if p == nil || st == nil {
				continue
			}
			if rp.ErrorCode != 0 {
				return fmt.Errorf("offset for leader epoch %s-%d: %w", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			if err := f.m.TruncateFollower(p, rp.EndOffset); err != nil {
				return err
			}
			st.Truncated = true
		}
	}
	return nil
}

// TruncateFollower cuts a follower's log at offset (when below its end)
// and forgets what lay above: epochs, producer state.
func (m *Manager) TruncateFollower(p *partition.Partition, offset int64) error {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if offset < 0 || offset >= p.Log.LogEndOffset() {
		return nil
	}
	m.d.Logger.Info("truncating follower log", "topic", p.Topic, "partition", p.Index, "from", p.Log.LogEndOffset(), "to", offset)
	if err := p.Log.TruncateTo(offset); err != nil {
		return fmt.Errorf("truncate %s-%d: %w", p.Topic, p.Index, err)
	}
	p.TruncatedLocked()
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
	return m.d.Checkpoint()
}

// fetchOnce sends one replica fetch to the leader and appends what comes
// back.
func (f *fetcher) fetchOnce(cl leaderClient, parts map[*partition.Partition]*FollowState) error {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.m.d.Cfg.NodeID
	req.ReplicaState.ID = f.m.d.Cfg.NodeID
	// The leader counts this fetch for this incarnation only (KIP-903).
	req.ReplicaState.Epoch = f.m.d.BrokerEpoch()
	req.MaxWaitMillis = f.m.d.Cfg.ReplicaFetchWaitMaxMs
	req.MinBytes = f.m.d.Cfg.ReplicaFetchMinBytes
	req.MaxBytes = f.m.d.Cfg.ReplicaFetchResponseMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	topics := make(map[string]int)
	names := make(map[[16]byte]string)
	byKey := make(map[string]*partition.Partition)
	for p, st := range parts {
		if !st.Truncated {
			continue
		}
		i, ok := topics[p.Topic]
		if !ok {
			i = len(req.Topics)
			topics[p.Topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.Topic, p.TopicID
			req.Topics = append(req.Topics, rt)
			names[p.TopicID] = p.Topic
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.Index
		rp.FetchOffset = p.Log.LogEndOffset()
		rp.LogStartOffset = p.Log.LogStartOffset()
		rp.CurrentLeaderEpoch = st.Epoch
		rp.PartitionMaxBytes = f.m.d.Cfg.ReplicaFetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		byKey[p.Topic+"/"+strconv.Itoa(int(p.Index))] = p
	}
	if len(byKey) == 0 {
		return nil
	}
	kresp, err := cl.request(f.ctx, req)
	if err != nil {
		return err
	}
	// The record batches may be in the client's read buffer, which the
	// next request reuses: they are appended before this returns.
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	var errs []error
	for _, rt := range resp.Topics {
		name := rt.Topic
		if req.Version >= 13 {
			// Named by the ids this fetch asked for: the partitions'
			// own, which need no look-up in the image.
			name = names[rt.TopicID]
		}
		for _, rp := range rt.Partitions {
			p := byKey[name+"/"+strconv.Itoa(int(rp.Partition))]
			if p == nil {
				continue
			}
			if err := f.m.ApplyFetched(p, parts[p], &rp); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ApplyFetched appends a fetched partition's batches as a follower and
// takes the leader's high watermark and log start offset.
func (m *Manager) ApplyFetched(p *partition.Partition, st *FollowState, rp *kmsg.FetchResponseTopicPartition) error {
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
			p.TruncatedLocked()
			p.Epochs, p.Producers = []partition.EpochEntry{}, nil
			return p.WriteEpochsLocked()
		}
		st.Truncated = false // ahead of the leader: truncate again
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
				p.TruncatedLocked()
				_, err = p.Log.AppendAsFollower(rp.RecordBatches)
			}
			if err != nil {
				return fmt.Errorf("append %s-%d as follower: %w", p.Topic, p.Index, err)
			}
		}
		if m.d.Replicated != nil {
			m.d.Replicated(len(rp.RecordBatches))
		}
		if err := noteFetchedEpochsLocked(p, rp.RecordBatches); err != nil {
			return err
		}
		if err := p.FollowerAppendedLocked(rp.RecordBatches); err != nil {
			return err
		}
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
func noteFetchedEpochsLocked(p *partition.Partition, data []byte) error {
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

// FetchOnce sends one replica fetch for parts to leader over cl and
// appends what comes back, outside the fetchers' loop (for tests).
func (m *Manager) FetchOnce(ctx context.Context, leader int32, cl *kgo.Client, parts map[*partition.Partition]*FollowState) error {
	f := &fetcher{m: m, leader: leader, ctx: ctx}
	return f.fetchOnce(kgoLeader{cl: cl, leader: leader}, parts)
}

// FetchRoundsAt sends rounds replica fetches for parts, one after another
// over one connection of the fetchers' own (leaderConn) to the leader at
// addr, appending what each brings back (for tests).
func (m *Manager) FetchRoundsAt(ctx context.Context, leader int32, addr string, parts map[*partition.Partition]*FollowState, rounds int) error {
	f := &fetcher{m: m, leader: leader, ctx: ctx}
	c := &leaderConn{addr: func() (string, error) { return addr, nil }, clientID: "gregor-replica-test",
		timeout: time.Duration(m.d.Cfg.ReplicaSocketTimeoutMs) * time.Millisecond}
	defer c.close()
	for range rounds {
		if err := f.fetchOnce(c, parts); err != nil {
			return err
		}
	}
	return nil
}
