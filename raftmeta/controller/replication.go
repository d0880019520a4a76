package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// maxRecordsPerEntry bounds the partition changes committed as one log
// entry by elections and fencing, which may touch every partition.
const maxRecordsPerEntry = 5000

// electionKind is how a new partition leader may be chosen, after Kafka's
// PartitionChangeBuilder.Election.
type electionKind int

const (
	// electOnline keeps a valid current leader, else takes the first valid
	// replica: one in the ISR and acceptable.
	electOnline electionKind = iota
	// electPreferred moves leadership to the first replica when it is
	// valid, else behaves as electOnline.
	electPreferred
	// electUnclean is electOnline that, failing a valid replica, takes any
	// acceptable replica outside the ISR and makes it the whole ISR.
	electUnclean
)

// partitionChange works out the PartitionChangeRecord that moves one
// partition to a target ISR (and, for a reassignment, target replicas)
// with a leader elected as Kafka's PartitionChangeBuilder elects it,
// without eligible leader replicas, which Gregor does not have.
type partitionChange struct {
	topicID    [16]byte
	p          image.PartitionImage
	targetISR  []int32
	election   electionKind
	acceptable func(int32) bool

	// The replicas and reassignment sets to move to; nil keeps the
	// partition's own (setTargets fills them).
	targetReplicas []int32
	targetAdding   []int32
	targetRemoving []int32
}

func (b *partitionChange) setTargets() {
	if b.targetReplicas == nil {
		b.targetReplicas = b.p.Replicas
	}
	if b.targetAdding == nil {
		b.targetAdding = b.p.AddingReplicas
	}
	if b.targetRemoving == nil {
		b.targetRemoving = b.p.RemovingReplicas
	}
}

// completeReassignment finishes a reassignment once the target ISR allows
// it, as Kafka's PartitionReassignmentReplicas.maybeCompleteReassignment
// does: without the replicas being removed, the ISR must stay non-empty
// and hold every remaining replica (so every added one has caught up).
// The replicas then become the target and the removed ones leave the ISR.
func (b *partitionChange) completeReassignment() {
	if len(b.targetAdding) == 0 && len(b.targetRemoving) == 0 {
		return
	}
	removed := func(r int32) bool { return slices.Contains(b.targetRemoving, r) }
	isr := slices.DeleteFunc(slices.Clone(b.targetISR), removed)
	replicas := slices.DeleteFunc(slices.Clone(b.targetReplicas), removed)
	if len(isr) == 0 || len(replicas) == 0 {
		return
	}
	for _, r := range replicas {
		if !slices.Contains(isr, r) {
			return
		}
	}
	b.targetISR, b.targetReplicas = isr, replicas
	b.targetAdding, b.targetRemoving = []int32{}, []int32{}
}

// build returns the record, or nil when nothing would change.
func (b partitionChange) build() *image.PartitionChangeRecord {
	b.setTargets()
	b.completeReassignment()
	rec := &image.PartitionChangeRecord{TopicID: b.topicID, Partition: b.p.Partition, Leader: image.NoLeaderChange}
	leader, unclean := b.elect()
	if leader != b.p.Leader {
		rec.Leader = leader
		if unclean {
			// Data the ISR acknowledged may be lost: the new leader's log
			// is all there is.
			rec.ISR = []int32{leader}
		}
	} else if slices.ContainsFunc(b.p.Replicas, func(r int32) bool { return !slices.Contains(b.targetReplicas, r) }) {
		// Replicas are leaving: a new leader epoch fences them, as
		// Kafka's triggerLeaderEpochBumpForReplicaReassignmentIfNeeded.
		rec.Leader = leader
	}
	// An empty target ISR is not written: the last member stays as a
	// placeholder (with no leader) so that it leads again, without an
	// unclean election, when it comes back.
	if rec.ISR == nil && len(b.targetISR) > 0 && !slices.Equal(b.targetISR, b.p.ISR) {
		rec.ISR = slices.Clone(b.targetISR)
	}
	if !slices.Equal(b.targetReplicas, b.p.Replicas) {
		rec.Replicas = slices.Clone(b.targetReplicas)
	}
	if !slices.Equal(b.targetAdding, b.p.AddingReplicas) {
		rec.AddingReplicas = append([]int32{}, b.targetAdding...)
	}
	if !slices.Equal(b.targetRemoving, b.p.RemovingReplicas) {
		rec.RemovingReplicas = append([]int32{}, b.targetRemoving...)
	}
	if rec.Leader == image.NoLeaderChange && rec.ISR == nil && rec.Replicas == nil &&
		rec.AddingReplicas == nil && rec.RemovingReplicas == nil {
		return nil
	}
	return rec
}

func (b partitionChange) valid(r int32) bool {
	return slices.Contains(b.targetISR, r) && b.acceptable(r)
}

func (b partitionChange) elect() (leader int32, unclean bool) {
	replicas := b.targetReplicas
	if b.election == electPreferred && len(replicas) > 0 && b.valid(replicas[0]) {
		return replicas[0], false
	}
	if b.p.Leader != image.NoLeader && b.valid(b.p.Leader) {
		return b.p.Leader, false
	}
	for _, r := range replicas {
		if b.valid(r) {
			return r, false
		}
	}
	if b.election == electUnclean {
		for _, r := range replicas {
			if b.acceptable(r) {
				return r, true
			}
		}
	}
	return image.NoLeader, false
}

// activeBroker reports whether broker id is registered, unfenced and not in
// controlled shutdown: whether it may lead or join an ISR.
func (c *Controller) activeBroker(img *image.Image, id int32) bool {
	b, ok := img.Broker(id)
	return ok && !b.Fenced && !c.shuttingDown[id]
}

// uncleanEnabled resolves unclean.leader.election.enable for a topic as
// Kafka's ConfigurationControlManager.getTopicConfig: the topic's config,
// else this controller node's dynamic config, else the cluster-wide
// dynamic default, else the static one.
func (c *Controller) uncleanEnabled(img *image.Image, t *image.TopicImage) bool {
	if v, ok := t.Configs["unclean.leader.election.enable"]; ok {
		return strings.EqualFold(v, "true")
	}
	if v, ok := img.BrokerConfig(strconv.Itoa(int(c.node.NodeID())), "unclean.leader.election.enable"); ok {
		return strings.EqualFold(v, "true")
	}
	if v, ok := img.BrokerConfig("", "unclean.leader.election.enable"); ok {
		return strings.EqualFold(v, "true")
	}
	return c.cfg.UncleanLeaderElection
}

// removeFromISRs returns the changes that take broker id out of every ISR
// and give the partitions it led a new leader, as Kafka's
// generateLeaderAndIsrUpdates does when a broker is fenced, restarts or
// shuts down.
func (c *Controller) removeFromISRs(img *image.Image, id int32) []image.Record {
	var recs []image.Record
	acceptable := func(r int32) bool { return r != id && c.activeBroker(img, r) }
	for _, t := range img.Topics() {
		election := electOnline
		if c.uncleanEnabled(img, t) {
			election = electUnclean
		}
		for _, p := range t.Partitions {
			if !slices.Contains(p.ISR, id) && p.Leader != id {
				continue
			}
			b := partitionChange{topicID: t.ID, p: p, election: election, acceptable: c.onlineFor(img, t.ID, p.Partition, acceptable),
				targetISR: slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == id })}
			if rec := b.build(); rec != nil {
				recs = append(recs, rec)
			}
		}
	}
	return recs
}

// electLeaderless returns the changes that give a leader to partitions
// without one now that broker id is back (it counts as active even though
// the image still has it fenced).
func (c *Controller) electLeaderless(img *image.Image, id int32) []image.Record {
	var recs []image.Record
	acceptable := func(r int32) bool { return r == id || c.activeBroker(img, r) }
	for _, t := range img.Topics() {
		election := electOnline
		if c.uncleanEnabled(img, t) {
			election = electUnclean
		}
		for _, p := range t.Partitions {
			if p.Leader != image.NoLeader {
				continue
			}
			b := partitionChange{topicID: t.ID, p: p, election: election, acceptable: c.onlineFor(img, t.ID, p.Partition, acceptable), targetISR: p.ISR}
			if rec := b.build(); rec != nil {
				recs = append(recs, rec)
			}
		}
	}
	return recs
}

// hasLeaderships reports whether broker id leads any partition.
func hasLeaderships(img *image.Image, id int32) bool {
	for t := range img.AllTopics() {
		for _, p := range t.Partitions {
			if p.Leader == id {
				return true
			}
		}
	}
	return false
}

// proposeChunked commits recs in entries of at most maxRecordsPerEntry
// records; elections need no atomicity across partitions.
func (c *Controller) proposeChunked(recs []image.Record) error {
	for len(recs) > 0 {
		n := min(len(recs), maxRecordsPerEntry)
		if err := c.propose(recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// ISRMember is one replica of the ISR a leader asks for (Kafka's
// AlterPartition v3 NewIsrWithEpochs): its broker id and the epoch of the
// broker registration the leader saw it fetch under, or -1 when the leader
// does not know it. A known epoch that is no longer the registered one
// means the fetches that qualified the replica came from an earlier
// incarnation of the broker (before a restart, perhaps with its disk
// lost), so the controller refuses to add it.
type ISRMember struct {
	ID          int32
	BrokerEpoch int64
}

// isrIDs returns the broker ids of an ISR, in order.
func isrIDs(members []ISRMember) []int32 {
	if members == nil {
		return nil
	}
	ids := make([]int32, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	return ids
}

// AlterPartition applies an ISR change asked for by a partition's leader
// (Kafka's AlterPartition, key 56) and returns the partition as it then
// is. The leader names the leader and partition epochs it knows: a higher
// one than the controller's answers NOT_CONTROLLER (this controller is
// behind), a lower leader epoch FENCED_LEADER_EPOCH and a lower partition
// epoch INVALID_UPDATE_VERSION. The new ISR must be drawn from the
// replicas and hold the leader (INVALID_REQUEST), and every member must be
// registered, unfenced, not shutting down, at the broker epoch the leader
// names for it unless that is -1 (KIP-903), and not holding the partition
// on a log dir it reported offline (INELIGIBLE_REPLICA).
func (c *Controller) AlterPartition(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, newISR []ISRMember) (image.PartitionImage, error) {
	newISR = slices.Clone(newISR)
	var p image.PartitionImage
	var out error
	if err := c.do(ctx, func() { p, out = c.alterPartition(topicID, partition, leaderEpoch, partitionEpoch, newISR) }); err != nil {
		return image.PartitionImage{}, err
	}
	return p, out
}

func (c *Controller) alterPartition(topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, members []ISRMember) (image.PartitionImage, error) {
	newISR := isrIDs(members)
	if !c.node.IsLeader() {
		return image.PartitionImage{}, notController()
	}
	c.activate()
	img := c.node.Image()
	t, ok := img.TopicByID(topicID)
	if !ok {
		return image.PartitionImage{}, apiError(kerr.UnknownTopicID, "Unknown topic ID %s.", image.UUIDString(topicID))
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return image.PartitionImage{}, apiError(kerr.UnknownTopicOrPartition, "Unknown partition %s-%d.", t.Name, partition)
	}
	p := t.Partitions[partition]
	switch {
	case leaderEpoch > p.LeaderEpoch || partitionEpoch > p.PartitionEpoch:
		// The leader has seen a newer partition state than this controller
		// has applied: this node has likely lost its leadership.
		return image.PartitionImage{}, apiError(kerr.NotController, "The partition state in the request is newer than the controller's.")
	case leaderEpoch < p.LeaderEpoch:
		return image.PartitionImage{}, apiError(kerr.FencedLeaderEpoch, "The leader epoch %d of %s-%d is not the current %d.", leaderEpoch, t.Name, partition, p.LeaderEpoch)
	case partitionEpoch < p.PartitionEpoch:
		return image.PartitionImage{}, apiError(kerr.InvalidUpdateVersion, "The partition epoch %d of %s-%d is not the current %d.", partitionEpoch, t.Name, partition, p.PartitionEpoch)
	}
	if err := image.ValidatePartition(p.Replicas, newISR, p.Leader); err != nil || len(newISR) == 0 {
		return image.PartitionImage{}, apiError(kerr.InvalidRequest, "Invalid ISR %v for %s-%d with replicas %v.", newISR, t.Name, partition, p.Replicas)
	}
	if !slices.Contains(newISR, p.Leader) {
		return image.PartitionImage{}, apiError(kerr.InvalidRequest, "The ISR %v of %s-%d does not include the leader %d.", newISR, t.Name, partition, p.Leader)
	}
	var ineligible []string
	for _, m := range members {
		r := m.ID
		b, ok := img.Broker(r)
		switch {
		case !ok:
			ineligible = append(ineligible, strconv.Itoa(int(r))+" (not registered)")
		case c.shuttingDown[r]:
			ineligible = append(ineligible, strconv.Itoa(int(r))+" (shutting down)")
		case b.Fenced:
			ineligible = append(ineligible, strconv.Itoa(int(r))+" (fenced)")
		case m.BrokerEpoch != -1 && m.BrokerEpoch != b.Epoch:
			// As Kafka, every member is checked, not only the one joining,
			// and -1 skips the check (the leader does not know the epoch).
			ineligible = append(ineligible, fmt.Sprintf("%d (broker epoch %d, registered %d)", r, m.BrokerEpoch, b.Epoch))
		case c.replicaOffline(img, topicID, partition, r):
			ineligible = append(ineligible, strconv.Itoa(int(r))+" (log dir offline)")
		}
	}
	if len(ineligible) > 0 {
		return image.PartitionImage{}, apiError(kerr.IneligibleReplica, "The new ISR of %s-%d holds ineligible replicas: %s.", t.Name, partition, strings.Join(ineligible, ", "))
	}
	// The builder also completes a reassignment whose last added replica
	// this change brings into the ISR, which may move the leadership away
	// from the caller (Kafka answers NEW_LEADER_ELECTED then; Gregor's
	// caller sees the new leader in the partition it gets back).
	election := electOnline
	if c.uncleanEnabled(img, t) {
		election = electUnclean
	}
	b := partitionChange{topicID: topicID, p: p, targetISR: newISR, election: election,
		acceptable: c.onlineFor(img, topicID, partition, func(r int32) bool { return c.activeBroker(img, r) })}
	rec := b.build()
	if rec == nil {
		return clonePartition(p), nil
	}
	next, err := c.proposeImage([]image.Record{rec})
	if err != nil {
		return image.PartitionImage{}, err
	}
	nt, ok := next.TopicByID(topicID)
	if !ok || int(partition) >= len(nt.Partitions) {
		return image.PartitionImage{}, apiError(kerr.UnknownTopicOrPartition, "The topic was deleted while its ISR changed.")
	}
	np := nt.Partitions[partition]
	if p.Reassigning() && !np.Reassigning() {
		c.log.Info("completed partition reassignment", "topic", t.Name, "partition", partition,
			"replicas", np.Replicas, "isr", np.ISR, "leader", np.Leader)
	} else {
		c.log.Debug("changed ISR", "topic", t.Name, "partition", partition, "isr", np.ISR)
	}
	return clonePartition(np), nil
}

func clonePartition(p image.PartitionImage) image.PartitionImage {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
	return p
}

// ElectionType is Kafka's ElectLeaders election type.
type ElectionType int8

// Kafka's election types.
const (
	ElectPreferred ElectionType = 0
	ElectUnclean   ElectionType = 1
)

// TopicPartitions names partitions of one topic.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// ElectLeadersTopicResult is one topic of an ElectLeaders answer.
type ElectLeadersTopicResult struct {
	Topic      string
	Partitions []ElectLeadersPartitionResult
}

// ElectLeadersPartitionResult is one partition of an ElectLeaders answer.
type ElectLeadersPartitionResult struct {
	Partition int32
	Err       error
}

// ElectLeaders runs leader elections as Kafka's ElectLeaders (key 43)
// does. A preferred election moves leadership to the first replica if it
// is in the ISR and active (ELECTION_NOT_NEEDED when it already leads,
// PREFERRED_LEADER_NOT_AVAILABLE when it cannot); an unclean election
// gives a leaderless partition a leader, from outside the ISR if need be
// (ELECTION_NOT_NEEDED when it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE
// when no replica is active). A nil topics elects for every partition and,
// as Kafka, leaves out the partitions that needed no election. The error
// is for the whole request.
func (c *Controller) ElectLeaders(ctx context.Context, typ ElectionType, topics []TopicPartitions) ([]ElectLeadersTopicResult, error) {
	var in []TopicPartitions
	if topics != nil {
		in = make([]TopicPartitions, len(topics))
		for i, t := range topics {
			in[i] = TopicPartitions{Topic: t.Topic, Partitions: slices.Clone(t.Partitions)}
		}
	}
	var res []ElectLeadersTopicResult
	var out error
	if err := c.do(ctx, func() { res, out = c.electLeaders(typ, in) }); err != nil {
		return nil, err
	}
	return res, out
}

func (c *Controller) electLeaders(typ ElectionType, topics []TopicPartitions) ([]ElectLeadersTopicResult, error) {
	if !c.node.IsLeader() {
		return nil, notController()
	}
	if typ != ElectPreferred && typ != ElectUnclean {
		return nil, apiError(kerr.InvalidRequest, "Unknown election type %d", typ)
	}
	c.activate()
	img := c.node.Image()
	all := topics == nil
	if all {
		for _, t := range img.Topics() {
			tp := TopicPartitions{Topic: t.Name}
			for _, p := range t.Partitions {
				tp.Partitions = append(tp.Partitions, p.Partition)
			}
			topics = append(topics, tp)
		}
	}
	var recs []image.Record
	res := make([]ElectLeadersTopicResult, 0, len(topics))
	for _, tp := range topics {
		tr := ElectLeadersTopicResult{Topic: tp.Topic, Partitions: []ElectLeadersPartitionResult{}}
		for _, part := range tp.Partitions {
			rec, err := c.electOne(img, typ, tp.Topic, part)
			if all && err != nil && errorIs(err, kerr.ElectionNotNeeded) {
				continue
			}
			if rec != nil {
				recs = append(recs, rec)
			}
			tr.Partitions = append(tr.Partitions, ElectLeadersPartitionResult{Partition: part, Err: err})
		}
		res = append(res, tr)
	}
	if err := c.proposeChunked(recs); err != nil {
		return nil, err
	}
	return res, nil
}

func errorIs(err error, code *kerr.Error) bool { return ErrorCode(err) == code.Code }

// electOne is Kafka's ReplicationControlManager.electLeader.
func (c *Controller) electOne(img *image.Image, typ ElectionType, topic string, partition int32) (*image.PartitionChangeRecord, error) {
	t, ok := img.Topic(topic)
	if !ok {
		return nil, apiError(kerr.UnknownTopicOrPartition, "No such topic as %s", topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, apiError(kerr.UnknownTopicOrPartition, "No such partition as %s-%d", topic, partition)
	}
	p := t.Partitions[partition]
	if typ == ElectPreferred && len(p.Replicas) > 0 && p.Leader == p.Replicas[0] ||
		typ == ElectUnclean && p.Leader != image.NoLeader {
		return nil, &Error{Code: kerr.ElectionNotNeeded}
	}
	b := partitionChange{topicID: t.ID, p: p, targetISR: p.ISR, election: electPreferred,
		acceptable: c.onlineFor(img, t.ID, partition, func(r int32) bool { return c.activeBroker(img, r) })}
	if typ == ElectUnclean {
		b.election = electUnclean
	}
	rec := b.build()
	if rec == nil {
		if typ == ElectPreferred {
			return nil, &Error{Code: kerr.PreferredLeaderNotAvailable}
		}
		return nil, &Error{Code: kerr.EligibleLeadersNotAvailable}
	}
	return rec, nil
}

// rebalance moves leadership back to preferred replicas for every broker
// whose share of preferred partitions led elsewhere exceeds
// leader.imbalance.per.broker.percentage, as Kafka's auto leader
// rebalancing does. A partition moves only if its preferred replica is in
// the ISR and active.
func (c *Controller) rebalance() {
	img := c.node.Image()
	type count struct{ preferred, elsewhere int }
	counts := map[int32]*count{}
	for t := range img.AllTopics() {
		for _, p := range t.Partitions {
			if len(p.Replicas) == 0 {
				continue
			}
			pr := p.Replicas[0]
			if counts[pr] == nil {
				counts[pr] = &count{}
			}
			counts[pr].preferred++
			if p.Leader != pr {
				counts[pr].elsewhere++
			}
		}
	}
	pct := int(c.cfg.LeaderImbalancePerBrokerPercentage)
	acceptable := func(r int32) bool { return c.activeBroker(img, r) }
	var recs []image.Record
	for _, t := range img.Topics() {
		for _, p := range t.Partitions {
			if len(p.Replicas) == 0 || p.Leader == p.Replicas[0] {
				continue
			}
			n := counts[p.Replicas[0]]
			if n.elsewhere*100 <= pct*n.preferred {
				continue
			}
			b := partitionChange{topicID: t.ID, p: p, targetISR: p.ISR, election: electPreferred, acceptable: c.onlineFor(img, t.ID, p.Partition, acceptable)}
			if rec := b.build(); rec != nil && rec.Leader == p.Replicas[0] {
				recs = append(recs, rec)
			}
		}
	}
	if len(recs) == 0 {
		return
	}
	if err := c.proposeChunked(recs); err != nil {
		c.log.Warn("preferred leader rebalance failed", "err", err)
		return
	}
	c.log.Info("moved partition leaders back to their preferred replicas", "partitions", len(recs))
}

// electUncleanLeaders gives a leader, from outside the ISR if it must, to
// each leaderless partition of a topic with unclean election enabled.
func (c *Controller) electUncleanLeaders() {
	img := c.node.Image()
	acceptable := func(r int32) bool { return c.activeBroker(img, r) }
	var recs []image.Record
	for _, t := range img.Topics() {
		if !c.uncleanEnabled(img, t) {
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader != image.NoLeader {
				continue
			}
			b := partitionChange{topicID: t.ID, p: p, targetISR: p.ISR, election: electUnclean, acceptable: c.onlineFor(img, t.ID, p.Partition, acceptable)}
			if rec := b.build(); rec != nil {
				recs = append(recs, rec)
			}
		}
	}
	if len(recs) == 0 {
		return
	}
	if err := c.proposeChunked(recs); err != nil {
		c.log.Warn("unclean leader election failed", "err", err)
		return
	}
	c.log.Warn("elected leaders outside the ISR (unclean.leader.election.enable)", "partitions", len(recs))
}
