package controller

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// defaultImbalanceCheckInterval is leader.imbalance.check.interval.seconds.
const defaultImbalanceCheckInterval = 300 * time.Second

// BrokerHeartbeat is a broker's heartbeat to the active controller
// (Kafka's BrokerHeartbeat, key 63).
type BrokerHeartbeat struct {
	BrokerID    int32
	BrokerEpoch int64
	// CurrentMetadataOffset is the offset of the broker's metadata image
	// (Image.Offset): the broker is caught up, and may be unfenced, once
	// it reaches its own registration.
	CurrentMetadataOffset int64
	// WantFence asks to be (or stay) fenced.
	WantFence bool
	// WantShutdown starts a controlled shutdown: the controller moves the
	// broker's leaderships away and answers ShouldShutdown once none is
	// left.
	WantShutdown bool
	// OfflinePartitions are the partitions this broker holds on log dirs
	// that have gone offline after a disk error (KIP-858's
	// OfflineLogDirs, by partition: see offline_dirs.go). Every heartbeat
	// carries the whole list; the controller moves their leadership and
	// ISR membership to other replicas.
	OfflinePartitions []TopicIDPartition
}

// BrokerHeartbeatResult is the controller's answer to a heartbeat.
type BrokerHeartbeatResult struct {
	IsCaughtUp     bool
	IsFenced       bool
	ShouldShutdown bool
}

// livenessOn reports whether brokers are expected to send heartbeats.
func (c *Controller) livenessOn() bool { return c.cfg.BrokerSessionTimeout > 0 }

// periodicInterval is how often the controller goroutine checks broker
// sessions and the rebalance schedule.
func (c *Controller) periodicInterval() time.Duration {
	d := 500 * time.Millisecond
	if c.livenessOn() {
		d = min(d, c.cfg.BrokerSessionTimeout/8)
		if c.cfg.BrokerDisconnectGrace > 0 {
			// A grace ends at most half a grace late.
			d = min(d, c.cfg.BrokerDisconnectGrace/2)
		}
	}
	if c.cfg.AutoLeaderRebalance {
		d = min(d, c.cfg.LeaderImbalanceCheckInterval)
	}
	return max(d, 5*time.Millisecond)
}

// activate resets the controller's soft state when its node has become the
// active controller in a new term: every broker gets a full session from
// now, as Kafka's BrokerHeartbeatManager gives on activation, and
// controlled shutdowns are learnt again from the next heartbeats. With a
// disconnect grace, every broker must also heartbeat within one heartbeat
// interval and the grace (activationGrace): a live broker does, by its
// own timer or at once when its connection to the old controller closed,
// and the one that does not is most likely the old controller's node,
// dead, whose partitions then move seconds earlier than a session. The
// offline log dirs brokers reported are kept: they belong to broker
// epochs, which a new term does not change, and the next heartbeats
// repeat them anyway.
func (c *Controller) activate() {
	term := c.node.ActiveTerm()
	if term == c.term {
		return
	}
	c.term = term
	now := c.cfg.Now()
	clear(c.lastContact)
	clear(c.shuttingDown)
	clear(c.graceEnds)
	c.activeSince, c.quorumChecked = now, false
	grace, short := c.activationGrace()
	for _, b := range c.node.Image().Brokers() {
		c.lastContact[b.ID] = now
		if short && !b.Fenced {
			c.graceEnds[b.ID] = now.Add(grace)
		}
	}
	c.nextBalance = now.Add(c.cfg.LeaderImbalanceCheckInterval)
}

// activationGrace is how long a newly active controller waits for a
// broker's first heartbeat before fencing it, and whether that is shorter
// than a session.
func (c *Controller) activationGrace() (time.Duration, bool) {
	if !c.livenessOn() || c.cfg.BrokerDisconnectGrace <= 0 || c.cfg.BrokerHeartbeatInterval <= 0 {
		return 0, false
	}
	g := c.cfg.BrokerHeartbeatInterval + c.cfg.BrokerDisconnectGrace
	return g, g < c.cfg.BrokerSessionTimeout
}

// PeerGone tells the controller that the last connection node id had
// open to this node closed (raftnode.Config.RPCPeerGone), or that its
// controller listener refused a connection (raftnode.Config.PeerDown):
// if this is the active controller and the node is an unfenced broker,
// it is fenced unless it heartbeats again within BrokerDisconnectGrace,
// or at once when its listener refuses connections. It does not
// block; the notice is dropped if the controller is far behind, leaving
// the session timeout to fence.
func (c *Controller) PeerGone(id uint64) {
	if id > math.MaxInt32 {
		return
	}
	select {
	case c.gone <- int32(id):
	default:
		c.log.Warn("dropped a closed-connection notice; the session timeout applies", "broker", id)
	}
}

// peerGone runs PeerGone's notice on the controller goroutine.
func (c *Controller) peerGone(id int32) {
	if !c.livenessOn() || c.cfg.BrokerDisconnectGrace <= 0 || !c.node.IsLeader() {
		return
	}
	c.activate()
	b, ok := c.node.Image().Broker(id)
	if !ok || b.Fenced {
		return
	}
	end := c.cfg.Now().Add(c.cfg.BrokerDisconnectGrace)
	if prev, ok := c.graceEnds[id]; ok && prev.Before(end) {
		end = prev
	}
	c.graceEnds[id] = end
	if c.node.PeerDown(uint64(id)) {
		// Its listener refuses connections too: the process is gone.
		now := c.cfg.Now()
		c.fenceRefusing(now)
		c.fenceStale(now)
		return
	}
	c.log.Info("broker's connection closed; fencing it unless it heartbeats within the grace", "broker", id, "grace", c.cfg.BrokerDisconnectGrace)
}

// periodic runs on the controller goroutine at periodicInterval.
func (c *Controller) periodic() {
	if !c.node.IsLeader() {
		return
	}
	c.activate()
	now := c.cfg.Now()
	if c.livenessOn() {
		c.fenceQuorumSilent(now)
		c.fenceRefusing(now)
		c.fenceStale(now)
	}
	if !now.Before(c.nextBalance) {
		c.nextBalance = now.Add(c.cfg.LeaderImbalanceCheckInterval)
		if c.cfg.AutoLeaderRebalance {
			c.rebalance()
		}
		c.electUncleanLeaders()
	}
}

// fenceQuorumSilent shortens, once per term, the activation grace of the
// brokers whose nodes are members of the metadata quorum but have not
// answered this leader's raft messages at all since it took over: raft
// heartbeats go every tick, so a live node answers within a few ticks,
// whether or not its broker has found the new controller yet. Such a
// node is down (most often the old controller, killed); it is fenced
// twice the disconnect grace after the activation instead of a heartbeat
// interval later. A broker that is no quorum member keeps its grace.
func (c *Controller) fenceQuorumSilent(now time.Time) {
	if c.quorumChecked || len(c.graceEnds) == 0 || c.cfg.BrokerDisconnectGrace <= 0 {
		return
	}
	if now.Sub(c.activeSince) < 2*c.cfg.BrokerDisconnectGrace {
		return
	}
	c.quorumChecked = true
	q := c.node.QuorumInfo()
	for _, r := range append(q.Voters, q.Observers...) {
		if r.LastFetchTimestamp >= 0 || r.ID == int32(c.node.NodeID()) {
			continue
		}
		if end, ok := c.graceEnds[r.ID]; ok && now.Before(end) {
			c.log.Info("broker's node has not answered the new leader; shortening its grace", "broker", r.ID)
			c.graceEnds[r.ID] = now
		}
	}
}

// fenceRefusing ends at once the grace of every broker whose node's
// controller listener refuses connections (raftnode.Node.PeerDown): its
// process is gone, not slow, so waiting out the grace would only delay
// its partitions' new leaders. Only a broker already under a grace (its
// connection closed, or a new controller waiting for its first
// heartbeat) is concerned; the others keep their sessions.
func (c *Controller) fenceRefusing(now time.Time) {
	for id, end := range c.graceEnds {
		if now.Before(end) && id >= 0 && c.node.PeerDown(uint64(id)) {
			c.log.Info("broker's node refuses connections; fencing it now", "broker", id)
			c.graceEnds[id] = now
		}
	}
}

// fenceStale fences every unfenced broker whose session has expired, one
// log entry per broker so that each fencing is visible before the next is
// worked out.
func (c *Controller) fenceStale(now time.Time) {
	for _, b := range c.node.Image().Brokers() {
		if b.Fenced {
			continue
		}
		last, ok := c.lastContact[b.ID]
		if !ok {
			c.lastContact[b.ID] = now
			continue
		}
		if c.heartbeatWaiting(b.ID, b.Epoch, last, now) {
			// Its heartbeat is queued behind this check and will
			// renew the session or end the grace.
			continue
		}
		end, short := c.graceEnds[b.ID]
		switch {
		case short && !now.Before(end):
			c.log.Info("fencing broker that did not heartbeat within its grace", "broker", b.ID, "epoch", b.Epoch, "silent_for", now.Sub(last))
		case now.Sub(last) > c.cfg.BrokerSessionTimeout:
			c.log.Info("fencing broker whose session timed out", "broker", b.ID, "epoch", b.Epoch, "silent_for", now.Sub(last))
		default:
			continue
		}
		delete(c.graceEnds, b.ID)
		if err := c.fence(b.ID); err != nil {
			c.log.Warn("fencing broker failed", "broker", b.ID, "err", err)
			return
		}
	}
}

// fence takes a broker out of every ISR, moves its leaderships away and
// marks it fenced, as Kafka's handleBrokerFenced.
func (c *Controller) fence(id int32) error {
	img := c.node.Image()
	b, ok := img.Broker(id)
	if !ok || b.Fenced {
		return nil
	}
	recs := c.removeFromISRs(img, id)
	recs = append(recs, &image.BrokerRegistrationChangeRecord{BrokerID: id, BrokerEpoch: b.Epoch, Fenced: true})
	return c.proposeChunked(recs)
}

// BrokerHeartbeat records that a broker is alive and moves it between
// fenced, unfenced and controlled shutdown as Kafka's
// BrokerHeartbeatManager does. It fails with BROKER_ID_NOT_REGISTERED for
// an unknown broker and STALE_BROKER_EPOCH for an old registration.
func (c *Controller) BrokerHeartbeat(ctx context.Context, hb BrokerHeartbeat) (BrokerHeartbeatResult, error) {
	c.noteArrival(hb.BrokerID, hb.BrokerEpoch)
	hb.OfflinePartitions = slices.Clone(hb.OfflinePartitions)
	var res BrokerHeartbeatResult
	var out error
	if err := c.do(ctx, func() { res, out = c.brokerHeartbeat(hb) }); err != nil {
		return BrokerHeartbeatResult{}, err
	}
	return res, out
}

func (c *Controller) brokerHeartbeat(hb BrokerHeartbeat) (BrokerHeartbeatResult, error) {
	if !c.node.IsLeader() {
		return BrokerHeartbeatResult{}, notController()
	}
	c.activate()
	img := c.node.Image()
	b, ok := img.Broker(hb.BrokerID)
	if !ok {
		return BrokerHeartbeatResult{}, apiError(kerr.BrokerIDNotRegistered, "No broker registration found for broker %d", hb.BrokerID)
	}
	if b.Epoch != hb.BrokerEpoch {
		return BrokerHeartbeatResult{}, apiError(kerr.StaleBrokerEpoch, "Expected broker epoch %d, but got broker epoch %d", b.Epoch, hb.BrokerEpoch)
	}
	c.lastContact[hb.BrokerID] = c.cfg.Now()
	delete(c.graceEnds, hb.BrokerID)
	// Partitions on offline log dirs move first, so that an unfencing
	// below elects no leader on them. Repeated lists change nothing.
	if offline := c.noteOffline(img, b, hb.OfflinePartitions); len(offline) > 0 {
		if err := c.proposeChunked(c.removeOffline(img, b.ID, offline)); err != nil {
			return BrokerHeartbeatResult{}, err
		}
		img = c.node.Image()
	}
	// The broker's epoch is at or below the index of its registration
	// entry, so reaching it means the broker has read its registration.
	caughtUp := hb.CurrentMetadataOffset >= b.Epoch
	res := BrokerHeartbeatResult{IsCaughtUp: caughtUp, IsFenced: b.Fenced}
	var err error
	switch {
	case b.Fenced && hb.WantShutdown:
		res.ShouldShutdown = true
	case b.Fenced && !hb.WantFence && caughtUp:
		recs := []image.Record{&image.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: false}}
		recs = append(recs, c.electLeaderless(img, b.ID)...)
		if err = c.proposeChunked(recs); err == nil {
			res.IsFenced = false
			c.log.Info("unfenced broker", "broker", b.ID, "epoch", b.Epoch)
		}
	case !b.Fenced && hb.WantShutdown:
		if !c.shuttingDown[b.ID] {
			c.log.Info("broker entered controlled shutdown", "broker", b.ID)
		}
		c.shuttingDown[b.ID] = true
		if err = c.proposeChunked(c.removeFromISRs(img, b.ID)); err != nil {
			break
		}
		if !hasLeaderships(c.node.Image(), b.ID) {
			if err = c.fence(b.ID); err == nil {
				res.IsFenced, res.ShouldShutdown = true, true
			}
		}
	case !b.Fenced && hb.WantFence:
		if err = c.fence(b.ID); err == nil {
			res.IsFenced = true
		}
	}
	return res, err
}

// heartbeatArrival is when a broker's latest heartbeat reached the
// controller, and with which broker epoch.
type heartbeatArrival struct {
	at    time.Time
	epoch int64
}

// noteArrival records a heartbeat's arrival before it waits for the
// controller goroutine.
func (c *Controller) noteArrival(id int32, epoch int64) {
	now := c.cfg.Now()
	c.arrivedMu.Lock()
	c.arrived[id] = heartbeatArrival{at: now, epoch: epoch}
	c.arrivedMu.Unlock()
}

// heartbeatWaiting reports whether a heartbeat of broker id at epoch
// arrived after last (its last contact the controller goroutine has
// seen): it is queued behind the goroutine and shows the broker alive.
// One from an older registration shows nothing, and one older than a
// session neither: its caller may have given up, leaving it never run,
// and a dead broker must still be fenced a session after it was last
// heard from.
func (c *Controller) heartbeatWaiting(id int32, epoch int64, last, now time.Time) bool {
	c.arrivedMu.Lock()
	a, ok := c.arrived[id]
	c.arrivedMu.Unlock()
	return ok && a.epoch == epoch && a.at.After(last) && now.Sub(a.at) <= c.cfg.BrokerSessionTimeout
}
