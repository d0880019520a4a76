package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// The pipeline of CreateTopics, as Redpanda's two-phase handlers and
// Kafka's QuorumController do it: the controller goroutine validates a
// creation against the image plus the creations still in flight, submits
// its entry and goes on to the next request; the raft node's Ready loop
// settles the creation when the entry has applied (raftnode.SubmitFunc),
// which wakes the request's goroutine and nothing else: the controller
// goroutine forgets settled creations when it next needs the overlay. Entries submitted while the raft
// node writes the previous ones share its next fsync, so concurrent
// clients are no longer limited to one metadata-log fsync per request.
//
// The answer never claims an uncommitted topic: a creation's results
// stay in its pendingCreate until its entry has applied, and become the
// proposal's error (NOT_CONTROLLER when leadership moved) if it does not.
// A creation validated against topics in flight that then fail is at
// worst refused (TOPIC_ALREADY_EXISTS for a name that ends up free), never
// committed wrongly: the records apply against the committed image
// (raftnode rejects an entry that does not apply).

// createOverlay holds the names and IDs of the topics whose creation is
// submitted but not settled, which a new creation must treat as taken.
type createOverlay struct {
	names map[string]int
	norm  map[string]string // unified (collision) name to the name
	ids   map[[16]byte]bool
}

// add marks a topic taken.
func (o *createOverlay) add(name string, id [16]byte) {
	if o.names == nil {
		o.names, o.norm, o.ids = map[string]int{}, map[string]string{}, map[[16]byte]bool{}
	}
	o.names[name]++
	if image.HasCollisionChars(name) {
		o.norm[image.UnifyCollisionChars(name)] = name
	}
	o.ids[id] = true
}

// remove releases the topics of pc.
func (o *createOverlay) remove(pc *pendingCreate) {
	for i, name := range pc.names {
		if o.names[name]--; o.names[name] <= 0 {
			delete(o.names, name)
		}
		if image.HasCollisionChars(name) {
			if u := image.UnifyCollisionChars(name); o.norm[u] == name {
				delete(o.norm, u)
			}
		}
		delete(o.ids, pc.ids[i])
	}
}

// pendingCreate is one CreateTopics request whose entry was submitted.
type pendingCreate struct {
	names   []string   // topics it creates
	ids     [][16]byte // their IDs
	created []int      // their indexes in res
	// res is the request's results; the waiting goroutine overwrites the
	// created ones with the proposal's error if it fails, and closes done.
	res  []CreateTopicResult
	done chan struct{}
}

// wait returns pc's results once its entry has committed or failed, or a
// timeout if ctx ends first (the topics may still be created then), or
// NOT_CONTROLLER if the node stopped (stopped closed) without settling
// it.
func (pc *pendingCreate) wait(ctx context.Context, stopped <-chan struct{}) ([]CreateTopicResult, error) {
	select {
	case <-pc.done:
		return pc.res, nil
	case <-ctx.Done():
		return nil, timeoutError(ctx)
	case <-stopped:
		// The loop settles every entry it took before it stops.
		select {
		case <-pc.done:
			return pc.res, nil
		default:
			return nil, apiError(kerr.NotController, "the metadata node stopped")
		}
	}
}

// submitCreate submits the records of pc, to be settled on the raft
// node's Ready loop. It runs on the controller goroutine.
func (c *Controller) submitCreate(pc *pendingCreate, recs []image.Record) {
	err := c.node.SubmitFunc(c.ctx, func(_ *image.Image, err error) {
		// On the Ready loop: nothing here may block.
		if err != nil {
			c.failCreate(pc, c.proposeError(err))
		}
		close(pc.done)
	}, recs...)
	if err != nil {
		c.failCreate(pc, c.proposeError(err))
		c.inflight.remove(pc)
		close(pc.done)
		return
	}
	c.pending = append(c.pending, pc)
}

// failCreate gives every topic pc would have created the error err.
func (c *Controller) failCreate(pc *pendingCreate, err error) {
	for _, i := range pc.created {
		pc.res[i] = CreateTopicResult{Name: pc.res[i].Name, Err: err}
	}
}

// settle forgets the creations whose entries committed (their topics
// are in the image now, published before the entry settles) or failed
// (their names are free again). It runs on the controller goroutine.
func (c *Controller) settle() {
	kept := c.pending[:0]
	for _, pc := range c.pending {
		select {
		case <-pc.done:
			c.inflight.remove(pc)
		default:
			kept = append(kept, pc)
		}
	}
	clear(c.pending[len(kept):])
	c.pending = kept
}

// awaitInflight waits until no creation is in flight, so that what runs
// next sees every request before it in the image. It runs on the
// controller goroutine.
func (c *Controller) awaitInflight() {
	for len(c.pending) > 0 {
		select {
		case <-c.pending[0].done:
			c.settle()
		case <-c.node.Done():
			// No entry settles any more; their waiters see the node
			// stopped (pendingCreate.wait).
			for _, pc := range c.pending {
				c.inflight.remove(pc)
			}
			clear(c.pending)
			c.pending = c.pending[:0]
		case <-c.ctx.Done():
			return
		}
	}
}
