package controller

import (
	"context"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// The pipeline of CreateTopics, as Redpanda's two-phase handlers and
// Kafka's QuorumController do it: the controller goroutine validates a
// creation against the image plus the creations still in flight, submits
// its entry and goes on to the next request; a goroutine per creation
// waits for the commit and answers. Entries submitted while the raft
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
	count int // creations in flight
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
// timeout if ctx ends first (the topics may still be created then).
func (pc *pendingCreate) wait(ctx context.Context) ([]CreateTopicResult, error) {
	select {
	case <-pc.done:
		return pc.res, nil
	case <-ctx.Done():
		return nil, timeoutError(ctx)
	}
}

// submitCreate submits the records of pc and starts the goroutine that
// waits for their commit. It runs on the controller goroutine.
func (c *Controller) submitCreate(pc *pendingCreate, recs []image.Record) {
	p, err := c.node.Submit(c.ctx, recs...)
	if err != nil {
		c.failCreate(pc, c.proposeError(err))
		c.inflight.remove(pc)
		close(pc.done)
		return
	}
	c.inflight.count++
	go func() {
		// Wait on the controller's context, not the caller's: the
		// overlay must learn the outcome whatever the caller does.
		if _, err := p.Wait(c.ctx); err != nil {
			c.failCreate(pc, c.proposeError(err))
		} else {
			c.log.Debug("created topics", "count", len(pc.created))
		}
		close(pc.done)
		select {
		case c.settled <- pc:
		case <-c.ctx.Done():
		}
	}()
}

// failCreate gives every topic pc would have created the error err.
func (c *Controller) failCreate(pc *pendingCreate, err error) {
	for _, i := range pc.created {
		pc.res[i] = CreateTopicResult{Name: pc.res[i].Name, Err: err}
	}
}

// settle forgets a creation whose entry committed (its topics are in the
// image now) or failed (its names are free again).
func (c *Controller) settle(pc *pendingCreate) {
	c.inflight.remove(pc)
	c.inflight.count--
}

// awaitInflight waits until no creation is in flight, so that what runs
// next sees every request before it in the image. It runs on the
// controller goroutine.
func (c *Controller) awaitInflight() {
	for c.inflight.count > 0 {
		select {
		case pc := <-c.settled:
			c.settle(pc)
		case <-c.ctx.Done():
			return
		}
	}
}
