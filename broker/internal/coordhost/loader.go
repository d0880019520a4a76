package coordhost

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"sync"

	"github.com/gregorbroker/gregor/raftmeta/image"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
)

// Loader loads a coordinator's state from the partitions of its internal
// topic that this node leads, and unloads those it stops leading:
// coordinators move with the leadership of their partitions.
type Loader struct {
	cfg LoaderConfig

	mu     sync.Mutex
	loaded map[int32]int32 // partition → leader epoch loaded at (or loading)
}

// LoaderConfig is what a Loader needs of the server.
type LoaderConfig struct {
	Topic  string // the coordinator's internal topic
	Self   int32  // this node's id
	Ctx    context.Context
	Go     func(func()) // starts a goroutine the server waits for when it closes
	Logger *slog.Logger
	// Log is the log of the topic's partition this node hosts, or nil.
	Log func(partition int32) *storage.Log
	// Load replays a partition, read from log, into the coordinator;
	// Unload drops what it loaded of a partition.
	Load   func(ctx context.Context, partition, leaderEpoch int32, log *storage.Log) error
	Unload func(partition int32)
}

// NewLoader is a Loader with nothing loaded yet.
func NewLoader(cfg LoaderConfig) *Loader {
	return &Loader{cfg: cfg, loaded: make(map[int32]int32)}
}

// Reconcile loads the partitions this node leads in img, each in its own
// goroutine, and unloads those it no longer leads (or leads at another
// epoch).
func (l *Loader) Reconcile(img *image.Image) {
	leading := make(map[int32]int32)
	if t, ok := img.Topic(l.cfg.Topic); ok {
		for i, pi := range t.Partitions {
			if pi.Leader == l.cfg.Self {
				leading[int32(i)] = pi.LeaderEpoch
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, epoch := range l.loaded {
		if e, ok := leading[p]; !ok || e != epoch {
			l.cfg.Unload(p)
			delete(l.loaded, p)
		}
	}
	for p, epoch := range leading {
		if _, ok := l.loaded[p]; ok {
			continue
		}
		log := l.cfg.Log(p)
		if log == nil {
			continue
		}
		l.loaded[p] = epoch
		l.cfg.Go(func() {
			if err := l.cfg.Load(l.cfg.Ctx, p, epoch, log); err != nil && l.cfg.Ctx.Err() == nil {
				l.cfg.Logger.Error("load coordinator partition", "topic", l.cfg.Topic, "partition", p, "err", err)
				l.mu.Lock()
				delete(l.loaded, p)
				l.mu.Unlock()
			}
		})
	}
}

// ReadLog yields every record of a partition's log from its start to its
// log end offset at the time of the call, control records and the
// producer fields of transactional batches included.
func ReadLog(ctx context.Context, log *storage.Log) iter.Seq2[group.Record, error] {
	return func(yield func(group.Record, error) bool) {
		// Up to the log end, not the high watermark: a new leader's high
		// watermark lags the old leader's by up to a fetch round, and
		// records it holds past it were acknowledged there (commits the
		// old coordinator answered). The leader never truncates its own
		// log, so they stay, as Kafka's coordinator loader reads them.
		end := log.LogEndOffset()
		off := log.LogStartOffset()
		for off < end {
			if err := ctx.Err(); err != nil {
				yield(group.Record{}, err)
				return
			}
			rr, err := log.Read(off, 1<<20, end, true)
			if err != nil {
				yield(group.Record{}, err)
				return
			}
			if len(rr.Data) == 0 {
				return
			}
			data := rr.Data
			for len(data) > 0 {
				batch, rest, h, err := protocol.NextBatch(data)
				if err != nil {
					yield(group.Record{}, err)
					return
				}
				data = rest
				off = h.LastOffset() + 1
				stop := false
				err = protocol.DecodeBatch(batch, 64<<20, func(h *protocol.BatchHeader, r protocol.Record) error {
					if h.BaseOffset+int64(r.OffsetDelta) < log.LogStartOffset() {
						return nil
					}
					rec := group.Record{Key: r.Key, Value: r.Value, Transactional: h.IsTransactional(), Control: h.IsControl(),
						ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}
					if !yield(rec, nil) {
						stop = true
						return errStopIteration
					}
					return nil
				})
				if stop {
					return
				}
				if err != nil {
					yield(group.Record{}, err)
					return
				}
			}
		}
	}
}

var errStopIteration = errors.New("stop")
