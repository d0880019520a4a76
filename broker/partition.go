package broker

import (
	"sync"
	"sync/atomic"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/storage"
)

// partition is one partition this node hosts. Appends take mu; readers
// use the log end offset and high watermark published as atomics and never
// wait for a writer.
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	log     *storage.Log

	mu        sync.Mutex           // serializes appends; see LOCKS.md
	producers *producerstate.State // guarded by mu; nil until first needed
	epochs    []epochEntry         // guarded by mu; nil until first needed
	// aborted are the partition's aborted transactions, by offset, and
	// txnLoaded says they and producers were rebuilt from the whole log;
	// both guarded by mu. lso is the last stable offset; txnReady says it
	// can be read without the lock.
	aborted   []abortedTxn
	txnLoaded bool
	lso       atomic.Int64
	txnReady  atomic.Bool

	// appendedEpoch is the leader epoch the epoch cache was last checked
	// for, so appends check it once per epoch. Guarded by mu.
	appendedEpoch int32
	hw            atomic.Int64
	leaderEpoch   atomic.Int32
	cfg           atomic.Pointer[config.Topic]

	waitMu  sync.Mutex
	waiters map[chan struct{}]struct{}
}

func newPartition(topic string, index int32, id [16]byte, log *storage.Log, cfg config.Topic, epoch int32) *partition {
	p := &partition{topic: topic, index: index, topicID: id, log: log, waiters: make(map[chan struct{}]struct{})}
	p.cfg.Store(&cfg)
	p.leaderEpoch.Store(epoch)
	p.appendedEpoch = -1
	// A single replica is its whole ISR: everything in the log is
	// committed. Replication will lower this to the ISR's smallest LEO.
	p.hw.Store(log.LogEndOffset())
	p.lso.Store(p.hw.Load())
	log.SetHighWatermark(p.hw.Load())
	return p
}

// highWatermark is the offset below which records are committed and
// visible to consumers.
func (p *partition) highWatermark() int64 { return p.hw.Load() }

// advanceHighWatermarkLocked moves the high watermark after an append and
// wakes fetches waiting for data.
func (p *partition) advanceHighWatermarkLocked() {
	hw := p.log.LogEndOffset()
	p.hw.Store(hw)
	// Retention and the cleaner never go past the high watermark.
	p.log.SetHighWatermark(hw)
	p.updateLastStableOffsetLocked()
	p.wakeWaiters()
}

// addWaiter registers ch to be signalled (without blocking) when new data
// becomes visible.
func (p *partition) addWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	p.waiters[ch] = struct{}{}
	p.waitMu.Unlock()
}

func (p *partition) removeWaiter(ch chan struct{}) {
	p.waitMu.Lock()
	delete(p.waiters, ch)
	p.waitMu.Unlock()
}

func (p *partition) wakeWaiters() {
	p.waitMu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.waitMu.Unlock()
}

// topicPartitions is one topic's hosted partitions, by index. A nil entry
// is a partition this node does not host.
type topicPartitions struct {
	name  string
	id    [16]byte
	parts []*partition
}

// partitionTable maps topics to their hosted partitions. Readers load the
// current immutable map; reconcile replaces it whole.
type partitionTable struct {
	byName atomic.Pointer[map[string]*topicPartitions]
}

func (t *partitionTable) topic(name string) *topicPartitions {
	m := t.byName.Load()
	if m == nil {
		return nil
	}
	return (*m)[name]
}

func (t *partitionTable) get(topic string, index int32) *partition {
	tp := t.topic(topic)
	if tp == nil || index < 0 || int(index) >= len(tp.parts) {
		return nil
	}
	return tp.parts[index]
}

func (t *partitionTable) all() map[string]*topicPartitions {
	m := t.byName.Load()
	if m == nil {
		return nil
	}
	return *m
}
