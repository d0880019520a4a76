package coordtest

import (
	"context"
	"iter"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gregorbroker/gregor/broker/coord"
)

// Gate holds calls until released.
type Gate struct {
	mu    sync.Mutex
	on    bool
	chans []chan struct{}
	held  atomic.Int32
}

// Wait blocks while the gate is on, until released or ctx ends.
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	if !g.on {
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	g.chans = append(g.chans, ch)
	g.held.Add(1)
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.Index(g.chans, ch); i >= 0 {
			g.chans = slices.Delete(g.chans, i, i+1)
			g.held.Add(-1)
		}
		g.mu.Unlock()
		return ctx.Err()
	}
}

// Set turns the gate on or off; turning it off releases every held call,
// which stops counting as held at once so Quiesce waits for it to finish.
func (g *Gate) Set(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.on = on
	if !on {
		for _, ch := range g.chans {
			close(ch)
			g.held.Add(-1)
		}
		g.chans = nil
	}
}

// Held counts the calls blocked in the gate.
func (g *Gate) Held() int { return int(g.held.Load()) }

// MemStore is a coordinator Store keeping every partition's records in
// memory. Its Gate holds appends while on; SetFail fails them.
type MemStore struct {
	Gate
	mu       sync.Mutex
	parts    map[int32][]coord.Record
	failWith error
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore { return &MemStore{parts: make(map[int32][]coord.Record)} }

// Append implements a coordinator's Store.
func (s *MemStore) Append(ctx context.Context, partition int32, recs []coord.Record) error {
	return s.Write(ctx, partition, slices.Clone(recs))
}

// Write appends recs as they are, after the gate and the injected
// failure, as Append does: for a coordinator's other kinds of writes
// (transactional batches, markers), which set the records' batch fields.
func (s *MemStore) Write(ctx context.Context, partition int32, recs []coord.Record) error {
	if err := s.Wait(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWith != nil {
		return s.failWith
	}
	s.parts[partition] = append(s.parts[partition], recs...)
	return nil
}

// Inject appends records past the gate and the injected failure, as a
// log could hold them (a record a coordinator would never write).
func (s *MemStore) Inject(partition int32, recs ...coord.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts[partition] = append(s.parts[partition], recs...)
}

// SetFail makes later appends fail with err; nil lets them succeed.
func (s *MemStore) SetFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = err
}

// Records returns a partition's records.
func (s *MemStore) Records(partition int32) []coord.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.parts[partition])
}

// SeqOf yields recs as a load reads them.
func SeqOf(recs []coord.Record) iter.Seq2[coord.Record, error] {
	return func(yield func(coord.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}
