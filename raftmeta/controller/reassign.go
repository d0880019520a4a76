package controller

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// Partition reassignment (KIP-455) as Kafka's KRaft controller does it
// (ReplicationControlManager.alterPartitionReassignments and
// PartitionReassignmentReplicas). A reassignment to target replicas T of a
// partition whose replicas are C commits one PartitionChangeRecord that
// sets
//
//	replicas = T followed by the members of C not in T
//	adding   = T - C, removing = C - T
//
// and leaves the ISR alone. The new replicas start fetching from the
// leader; each time the leader adds one to the ISR (AlterPartition) the
// partition change builder checks whether every replica that stays is in
// the ISR, and if so completes the reassignment in the same record:
// replicas = T, the removed replicas leave the ISR, the leader moves if it
// was removed, and the leader epoch is bumped to fence the removed
// replicas. A reassignment that only drops or reorders replicas completes
// at once. Cancelling (null replicas) reverts to C: the added replicas
// leave the replicas and the ISR.

// ReassignTopic is one topic of an AlterPartitionReassignments request.
type ReassignTopic struct {
	Topic      string
	Partitions []ReassignPartition
}

// ReassignPartition is one partition's target replicas; nil Replicas
// cancels the reassignment in progress.
type ReassignPartition struct {
	Partition int32
	Replicas  []int32
}

// ReassignTopicResult is one topic of an AlterPartitionReassignments
// answer, with its partitions in request order.
type ReassignTopicResult struct {
	Topic      string
	Partitions []ReassignPartitionResult
}

// ReassignPartitionResult is one partition's outcome: nil, or an *Error
// with Kafka's code.
type ReassignPartitionResult struct {
	Partition int32
	Err       error
}

// OngoingReassignment is a partition with a reassignment in progress, for
// ListPartitionReassignments.
type OngoingReassignment struct {
	Partition        int32
	Replicas         []int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// OngoingTopicReassignments lists one topic's partitions being reassigned.
type OngoingTopicReassignments struct {
	Topic      string
	Partitions []OngoingReassignment
}

// AlterPartitionReassignments starts or cancels reassignments, as Kafka's
// AlterPartitionReassignments (key 45). Each partition succeeds or fails on
// its own (UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT for an
// empty, duplicated or unregistered replica, NO_REASSIGNMENT_IN_PROGRESS
// for a cancel with nothing to cancel, INVALID_REPLICATION_FACTOR when
// allowRFChange is false and the replica count would change) and the
// successful ones commit together. The error is for the whole request.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, topics []ReassignTopic, allowRFChange bool) ([]ReassignTopicResult, error) {
	in := make([]ReassignTopic, len(topics))
	for i, t := range topics {
		in[i] = ReassignTopic{Topic: t.Topic, Partitions: make([]ReassignPartition, len(t.Partitions))}
		for j, p := range t.Partitions {
			in[i].Partitions[j] = ReassignPartition{Partition: p.Partition, Replicas: slices.Clone(p.Replicas)}
		}
	}
	var res []ReassignTopicResult
	var out error
	if err := c.do(ctx, func() { res, out = c.alterPartitionReassignments(in, allowRFChange) }); err != nil {
		return nil, err
	}
	return res, out
}

func (c *Controller) alterPartitionReassignments(topics []ReassignTopic, allowRFChange bool) ([]ReassignTopicResult, error) {
	if !c.node.IsLeader() {
		return nil, notController()
	}
	c.activate()
	res := make([]ReassignTopicResult, len(topics))
	total := 0
	for i, t := range topics {
		res[i] = ReassignTopicResult{Topic: t.Topic, Partitions: make([]ReassignPartitionResult, len(t.Partitions))}
		for j, p := range t.Partitions {
			res[i].Partitions[j].Partition = p.Partition
		}
		total += len(t.Partitions)
	}
	if total > maxPartitionsPerRequest {
		tooMany := apiError(kerr.PolicyViolation, "Excessively large number of partitions per request.")
		for i := range res {
			for j := range res[i].Partitions {
				res[i].Partitions[j].Err = tooMany
			}
		}
		return res, nil
	}
	// Each change is applied to a working image before the next is
	// planned, so that a partition named twice sees its first change and
	// every record is known to apply before the batch is proposed.
	work := c.node.Image()
	var recs []image.Record
	for i, t := range topics {
		for j, p := range t.Partitions {
			rec, err := c.planReassignment(work, t.Topic, p, allowRFChange)
			if err == nil && rec != nil {
				next, aerr := work.Apply(work.Offset(), rec)
				if aerr != nil {
					c.log.Error("planned reassignment does not apply", "topic", t.Topic, "partition", p.Partition, "err", aerr)
					err = apiError(kerr.UnknownServerError, "%v", aerr)
				} else {
					work = next
					recs = append(recs, rec)
				}
			}
			res[i].Partitions[j].Err = err
		}
	}
	if len(recs) == 0 {
		return res, nil
	}
	// The changes commit as one entry, so a failed commit fails the whole
	// request; NOT_CONTROLLER makes a forwarding client ask again, which
	// is harmless: a target already reached changes nothing.
	if err := c.propose(recs); err != nil {
		return nil, err
	}
	c.log.Info("altered partition reassignments", "partitions", len(recs))
	return res, nil
}

// planReassignment returns the record that starts, changes, completes or
// cancels one partition's reassignment, or nil when nothing changes.
func (c *Controller) planReassignment(img *image.Image, topic string, target ReassignPartition, allowRFChange bool) (*image.PartitionChangeRecord, error) {
	t, ok := img.Topic(topic)
	if !ok {
		return nil, apiError(kerr.UnknownTopicOrPartition, "Unable to find a topic named %s.", topic)
	}
	if target.Partition < 0 || int(target.Partition) >= len(t.Partitions) {
		return nil, apiError(kerr.UnknownTopicOrPartition, "Unable to find partition %s:%d.", topic, target.Partition)
	}
	p := t.Partitions[target.Partition]
	b := partitionChange{topicID: t.ID, p: p, targetISR: p.ISR, election: electOnline,
		acceptable: c.onlineFor(img, t.ID, target.Partition, func(r int32) bool { return c.activeBroker(img, r) })}
	if target.Replicas == nil {
		if !p.Reassigning() {
			return nil, apiError(kerr.NoReassignmentInProgress, "No partition reassignment is in progress.")
		}
		replicas, isr, unclean := revertReassignment(p)
		unc := c.uncleanEnabled(img, t)
		if unclean && !unc {
			return nil, apiError(kerr.InvalidReplicaAssignment, "Unable to revert partition assignment for %s:%d because it would require an unclean leader election.", topic, target.Partition)
		}
		if unc {
			b.election = electUnclean
		}
		b.targetISR, b.targetReplicas = isr, replicas
		b.targetAdding, b.targetRemoving = []int32{}, []int32{}
		return b.build(), nil
	}
	if err := validateManualAssignment(img, target.Replicas, -1); err != nil {
		return nil, err
	}
	if !allowRFChange {
		// The replication factor the partition is headed for: its
		// replicas without those being removed.
		cur := len(p.Replicas) - len(p.RemovingReplicas)
		if cur != len(target.Replicas) {
			return nil, apiError(kerr.InvalidReplicationFactor, "The replication factor is changed from %d to %d", cur, len(target.Replicas))
		}
	}
	replicas, adding, removing := reassignmentReplicas(p.Replicas, p.AddingReplicas, target.Replicas)
	b.targetReplicas, b.targetAdding, b.targetRemoving = replicas, adding, removing
	return b.build(), nil
}

// reassignmentReplicas is Kafka's PartitionReassignmentReplicas: moving
// from current to target, the replicas are the target followed by the
// current ones being removed (sorted, as Kafka's TreeSet orders them),
// and adding is the target's new replicas (sorted). A target replica that
// an earlier reassignment is still adding stays in adding (Kafka keeps the
// old adding set when the new one is empty, which can leave a replica
// both adding and removing; Gregor keeps only the ones still targeted).
func reassignmentReplicas(current, currentAdding, target []int32) (replicas, adding, removing []int32) {
	for _, r := range current {
		if !slices.Contains(target, r) {
			removing = append(removing, r)
		}
	}
	for _, r := range target {
		if !slices.Contains(current, r) || slices.Contains(currentAdding, r) {
			adding = append(adding, r)
		}
	}
	slices.Sort(removing)
	slices.Sort(adding)
	replicas = append(slices.Clone(target), removing...)
	if adding == nil {
		adding = []int32{}
	}
	if removing == nil {
		removing = []int32{}
	}
	return replicas, adding, removing
}

// revertReassignment is Kafka's PartitionReassignmentRevert: the replicas
// and ISR without the ones being added. When only added replicas are in
// the ISR, the first original replica becomes the ISR, which is an
// unclean election.
func revertReassignment(p image.PartitionImage) (replicas, isr []int32, unclean bool) {
	adding := func(r int32) bool { return slices.Contains(p.AddingReplicas, r) }
	replicas = slices.DeleteFunc(slices.Clone(p.Replicas), adding)
	isr = slices.DeleteFunc(slices.Clone(p.ISR), adding)
	if len(isr) == 0 && len(replicas) > 0 {
		return replicas, []int32{replicas[0]}, true
	}
	return replicas, isr, false
}

// ListPartitionReassignments lists the partitions with a reassignment in
// progress, as Kafka's ListPartitionReassignments (key 46): all of them
// for nil topics, else those of the named partitions, leaving out unknown
// topics and partitions and ones not being reassigned.
func (c *Controller) ListPartitionReassignments(ctx context.Context, topics []TopicPartitions) ([]OngoingTopicReassignments, error) {
	var in []TopicPartitions
	if topics != nil {
		in = make([]TopicPartitions, len(topics))
		for i, t := range topics {
			in[i] = TopicPartitions{Topic: t.Topic, Partitions: slices.Clone(t.Partitions)}
		}
	}
	var res []OngoingTopicReassignments
	var out error
	if err := c.do(ctx, func() {
		if !c.node.IsLeader() {
			out = notController()
			return
		}
		res = listReassignments(c.node.Image(), in)
	}); err != nil {
		return nil, err
	}
	return res, out
}

func listReassignments(img *image.Image, topics []TopicPartitions) []OngoingTopicReassignments {
	ongoing := func(p *image.PartitionImage) OngoingReassignment {
		return OngoingReassignment{
			Partition:        p.Partition,
			Replicas:         slices.Clone(p.Replicas),
			AddingReplicas:   append([]int32{}, p.AddingReplicas...),
			RemovingReplicas: append([]int32{}, p.RemovingReplicas...),
		}
	}
	res := []OngoingTopicReassignments{}
	if topics == nil {
		for _, t := range img.Topics() {
			ot := OngoingTopicReassignments{Topic: t.Name}
			for i := range t.Partitions {
				if p := &t.Partitions[i]; p.Reassigning() {
					ot.Partitions = append(ot.Partitions, ongoing(p))
				}
			}
			if len(ot.Partitions) > 0 {
				res = append(res, ot)
			}
		}
		return res
	}
	for _, tp := range topics {
		t, ok := img.Topic(tp.Topic)
		if !ok {
			continue
		}
		ot := OngoingTopicReassignments{Topic: t.Name}
		for _, part := range tp.Partitions {
			if part < 0 || int(part) >= len(t.Partitions) {
				continue
			}
			if p := &t.Partitions[part]; p.Reassigning() {
				ot.Partitions = append(ot.Partitions, ongoing(p))
			}
		}
		if len(ot.Partitions) > 0 {
			res = append(res, ot)
		}
	}
	return res
}
