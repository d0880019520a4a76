package controller

import (
	"cmp"
	"slices"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// Offline log dirs (KIP-858, JBOD in KRaft). A broker whose log dir fails
// keeps running and serving its other dirs; its heartbeats name the
// partitions it holds on offline dirs. The active controller takes the
// broker out of those partitions' ISRs, elects other leaders from the ISR
// (outside it only where unclean election is enabled), and while the
// broker keeps reporting them it neither elects it leader of those
// partitions nor lets a leader add it back to their ISRs.
//
// Kafka records a broker's online dirs in its registration and each
// replica's dir in the partition. Gregor has no per-partition directory
// ids, so the broker reports the affected partitions themselves and the
// controller keeps them as soft state, as it keeps broker sessions: it
// belongs to one registration (a broker that restarts registers again and
// re-reads its dirs, which clears it), and a controller that takes over
// learns it from the next heartbeats, which repeat the whole list (Kafka's
// controller likewise relearns broker state from heartbeats). Until then
// the partitions' ISRs already exclude the broker, as the previous
// controller wrote them; only a partition the broker was the last ISR
// member of could be given back to it in that window (by another broker's
// unfencing or an election), and the next heartbeat moves it off again.

// TopicIDPartition names one partition by topic ID.
type TopicIDPartition struct {
	TopicID   [16]byte
	Partition int32
}

// offlineReplicas is what one broker registration last reported.
type offlineReplicas struct {
	epoch int64 // the broker epoch of the registration that reported them
	parts map[TopicIDPartition]struct{}
}

// noteOffline replaces what broker b reported last with parts, keeping only
// partitions that exist and list b as a replica, and returns the kept ones
// in a stable order.
func (c *Controller) noteOffline(img *image.Image, b *image.BrokerImage, parts []TopicIDPartition) []TopicIDPartition {
	var kept []TopicIDPartition
	set := make(map[TopicIDPartition]struct{}, len(parts))
	for _, tp := range parts {
		if _, dup := set[tp]; dup {
			continue
		}
		t, ok := img.TopicByID(tp.TopicID)
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) ||
			!slices.Contains(t.Partitions[tp.Partition].Replicas, b.ID) {
			continue
		}
		set[tp] = struct{}{}
		kept = append(kept, tp)
	}
	prev := c.offline[b.ID]
	if len(set) == 0 {
		if prev != nil && prev.epoch == b.Epoch && len(prev.parts) > 0 {
			c.log.Info("broker reports no partition on an offline log dir any more", "broker", b.ID)
		}
		delete(c.offline, b.ID)
		return nil
	}
	added := 0
	for tp := range set {
		if prev == nil || prev.epoch != b.Epoch {
			added++
		} else if _, ok := prev.parts[tp]; !ok {
			added++
		}
	}
	if added > 0 {
		c.log.Warn("broker reports partitions on offline log dirs", "broker", b.ID, "epoch", b.Epoch,
			"partitions", len(set), "new", added)
	}
	if c.offline == nil {
		c.offline = map[int32]*offlineReplicas{}
	}
	c.offline[b.ID] = &offlineReplicas{epoch: b.Epoch, parts: set}
	slices.SortFunc(kept, func(x, y TopicIDPartition) int {
		if n := slices.Compare(x.TopicID[:], y.TopicID[:]); n != 0 {
			return n
		}
		return cmp.Compare(x.Partition, y.Partition)
	})
	return kept
}

// replicaOffline reports whether broker r's current registration (in img)
// has reported its replica of the partition on an offline log dir.
func (c *Controller) replicaOffline(img *image.Image, topicID [16]byte, partition, r int32) bool {
	o := c.offline[r]
	if o == nil {
		return false
	}
	if b, ok := img.Broker(r); !ok || b.Epoch != o.epoch {
		// An older registration's report: the broker restarted since.
		return false
	}
	_, off := o.parts[TopicIDPartition{TopicID: topicID, Partition: partition}]
	return off
}

// onlineFor narrows acceptable, a test of which brokers may lead or join
// an ISR, to those whose replica of the partition is not on an offline
// log dir. Every election and ISR change goes through it.
func (c *Controller) onlineFor(img *image.Image, topicID [16]byte, partition int32, acceptable func(int32) bool) func(int32) bool {
	if len(c.offline) == 0 {
		return acceptable
	}
	return func(r int32) bool {
		return acceptable(r) && !c.replicaOffline(img, topicID, partition, r)
	}
}

// removeOffline returns the changes that take broker id out of the ISRs
// of parts, which it reported on offline log dirs, and move their
// leadership to another ISR member, as Kafka's handleDirectoriesOffline.
// A partition whose ISR was the broker alone keeps it there, leaderless,
// as fencing does, unless unclean election is enabled for its topic.
// Nothing is returned for partitions already without the broker, so a
// heartbeat that repeats the same list changes nothing.
func (c *Controller) removeOffline(img *image.Image, id int32, parts []TopicIDPartition) []image.Record {
	var recs []image.Record
	for _, tp := range parts {
		t, ok := img.TopicByID(tp.TopicID)
		if !ok || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		p := t.Partitions[tp.Partition]
		if !slices.Contains(p.ISR, id) && p.Leader != id {
			continue
		}
		election := electOnline
		if c.uncleanEnabled(img, t) {
			election = electUnclean
		}
		acceptable := c.onlineFor(img, t.ID, p.Partition, func(r int32) bool { return r != id && c.activeBroker(img, r) })
		b := partitionChange{topicID: t.ID, p: p, election: election, acceptable: acceptable,
			targetISR: slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == id })}
		if rec := b.build(); rec != nil {
			recs = append(recs, rec)
			c.log.Info("moving partition off a broker's offline log dir", "topic", t.Name, "partition", p.Partition,
				"broker", id, "leader", leaderAfter(p.Leader, rec.Leader), "isr", isrAfter(p.ISR, rec.ISR))
		}
	}
	return recs
}

func leaderAfter(prev, change int32) int32 {
	if change == image.NoLeaderChange {
		return prev
	}
	return change
}

func isrAfter(prev, change []int32) []int32 {
	if change == nil {
		return prev
	}
	return change
}
