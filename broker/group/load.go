package group

import (
	"fmt"
	"iter"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord"
)

// loadedPartition is the state replayed from one __consumer_offsets
// partition.
type loadedPartition struct {
	classic   map[string]*classicGroup
	consumers map[string]*consumerGroup
	streams   map[string]*streamsGroup
	// txns holds the transactional offsets whose marker was not replayed.
	txns *txnOffsets
	// records counts the records replayed so far; it is the order of the
	// record being replayed.
	records int64
}

// replay rebuilds the groups of a partition from its records, in log order,
// as Kafka's GroupCoordinatorShard.replay: offset commits and tombstones,
// classic group metadata and tombstones, the consumer group records, and
// transactions: offset commits of transactional batches stay pending until
// their producer's COMMIT or ABORT marker. Record types Gregor does not
// know (share groups, the partition metadata of early streams groups) are
// skipped, as Kafka skips unknown types. A record that does not decode
// fails the load.
func replay(partition int32, records iter.Seq2[Record, error], nowMs int64, log *slog.Logger) (*loadedPartition, error) {
	lp := &loadedPartition{classic: make(map[string]*classicGroup), consumers: make(map[string]*consumerGroup), streams: make(map[string]*streamsGroup), txns: newTxnOffsets()}
	for r, err := range records {
		if err != nil {
			return nil, fmt.Errorf("read __consumer_offsets-%d record %d: %w", partition, lp.records, err)
		}
		if err := replayOne(lp, partition, r, nowMs, log); err != nil {
			return nil, fmt.Errorf("replay __consumer_offsets-%d record %d: %w", partition, lp.records, err)
		}
		lp.records++
	}
	return lp, nil
}

// replayMarker applies a control record: COMMIT and ABORT markers end
// their producer's transaction, as CoordinatorLoaderImpl hands them to
// replayEndTransactionMarker; other control types are skipped.
func replayMarker(lp *loadedPartition, partition int32, r Record, nowMs int64) error {
	var k kmsg.ControlRecordKey
	if err := k.ReadFrom(r.Key); err != nil {
		return fmt.Errorf("decode control record key of producer %d: %w", r.ProducerID, err)
	}
	switch k.Type {
	case kmsg.ControlRecordKeyTypeCommit, kmsg.ControlRecordKeyTypeAbort:
		lp.txns.applyMarker(lp.classic, lp.consumers, lp.streams, partition, r.ProducerID, k.Type == kmsg.ControlRecordKeyTypeCommit, nowMs)
	}
	return nil
}

func replayOne(lp *loadedPartition, partition int32, r Record, nowMs int64, log *slog.Logger) error {
	if r.Control {
		return replayMarker(lp, partition, r, nowMs)
	}
	groups := lp.classic
	version, ok := coord.KeyVersion(r.Key)
	if !ok {
		return fmt.Errorf("key of %d bytes has no version", len(r.Key))
	}
	switch version {
	case offsetCommitKeyV0, offsetCommitKeyVersion:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("decode offset commit key: %w", err)
		}
		t := tp{k.Topic, k.Partition}
		if r.Value == nil {
			// A tombstone also deletes the partition's offsets pending in
			// open transactions.
			lp.txns.remove(k.Group, t)
		} else if r.Transactional {
			o, err := decodeOffsetValue(r.Value)
			if err != nil {
				return fmt.Errorf("decode offset commit value of %s %s-%d: %w", k.Group, k.Topic, k.Partition, err)
			}
			o.order = lp.records
			// The group exists from the transactional commit on, as in
			// Kafka; the offset waits for its marker.
			groupOffsets(lp.classic, lp.consumers, lp.streams, partition, k.Group, nowMs)
			lp.txns.put(r.ProducerID, k.Group, t, o)
			return nil
		}
		var store *offsetStore
		if cg := lp.consumers[k.Group]; cg != nil {
			store = &cg.offsetStore
		} else if sg := lp.streams[k.Group]; sg != nil {
			store = &sg.offsetStore
		}
		if store != nil {
			if r.Value == nil {
				delete(store.offsets, t)
				return nil
			}
			o, err := decodeOffsetValue(r.Value)
			if err != nil {
				return fmt.Errorf("decode offset commit value of %s %s-%d: %w", k.Group, k.Topic, k.Partition, err)
			}
			o.order = lp.records
			store.offsets[t] = o
			return nil
		}
		if r.Value == nil {
			if g := groups[k.Group]; g != nil {
				delete(g.offsets, t)
			}
			return nil
		}
		o, err := decodeOffsetValue(r.Value)
		if err != nil {
			return fmt.Errorf("decode offset commit value of %s %s-%d: %w", k.Group, k.Topic, k.Partition, err)
		}
		o.order = lp.records
		g := groups[k.Group]
		if g == nil {
			// Offsets without group metadata belong to a simple group.
			g = newClassicGroup(k.Group, partition, nowMs)
			groups[k.Group] = g
		}
		g.offsets[t] = o
	case groupMetadataKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			return fmt.Errorf("decode group metadata key: %w", err)
		}
		old := groups[k.Group]
		if r.Value == nil {
			delete(groups, k.Group)
			if old != nil && len(old.offsets) > 0 {
				// The group's offsets outlive its metadata until their own
				// tombstones come.
				g := newClassicGroup(k.Group, partition, nowMs)
				g.offsets = old.offsets
				groups[k.Group] = g
			}
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			return fmt.Errorf("decode group metadata value of %s: %w", k.Group, err)
		}
		if lp.consumers[k.Group] != nil || lp.streams[k.Group] != nil {
			return fmt.Errorf("classic group metadata for %s, which is a consumer or streams group", k.Group)
		}
		g := groupFromRecord(k.Group, partition, &v)
		if old != nil {
			g.offsets = old.offsets
		}
		groups[k.Group] = g
	case cgMetadataKeyVersion, cgPartitionMetadataKeyVersion, cgMemberMetadataKeyVersion,
		cgTargetMetadataKeyVersion, cgTargetMemberKeyVersion, cgCurrentAssignmentKeyVersion, cgRegexKeyVersion:
		return replayConsumer(lp, partition, version, r, nowMs)
	case sgMetadataKeyVersion, sgMemberMetadataKeyVersion, sgTargetMetadataKeyVersion,
		sgTargetMemberKeyVersion, sgCurrentAssignmentKeyVersion, sgTopologyKeyVersion:
		return replayStreams(lp, partition, version, r)
	default:
		log.Debug("skip unknown __consumer_offsets record type", "partition", partition, "type", version)
	}
	return nil
}

// groupFromRecord builds a loaded group: Stable with its members, or Empty.
func groupFromRecord(id string, partition int32, v *kmsg.GroupMetadataValue) *classicGroup {
	g := newClassicGroup(id, partition, v.CurrentStateTimestamp)
	g.generation = v.Generation
	g.protocolType = v.ProtocolType
	g.protocolName = v.Protocol
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	name := ""
	if v.Protocol != nil {
		name = *v.Protocol
	}
	for _, mm := range v.Members {
		if g.members[mm.MemberID] != nil {
			continue
		}
		rebalance := mm.RebalanceTimeoutMillis
		if rebalance == -1 {
			rebalance = mm.SessionTimeoutMillis
		}
		mem := &member{
			id:                 mm.MemberID,
			instanceID:         mm.InstanceID,
			clientID:           mm.ClientID,
			clientHost:         mm.ClientHost,
			rebalanceTimeoutMs: rebalance,
			sessionTimeoutMs:   mm.SessionTimeoutMillis,
			protocolType:       v.ProtocolType,
			protocols:          []protocol{{name: name, metadata: mm.Subscription}},
			assignment:         mm.Assignment,
		}
		g.add(mem, nil, 0)
	}
	if g.leader != "" && g.members[g.leader] == nil {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	if len(g.members) > 0 {
		g.state = stateStable
	}
	g.protocolType = v.ProtocolType
	g.computeSubscribedTopics()
	return g
}

// decodeOffsetValue reads an OffsetCommitValue of any version.
func decodeOffsetValue(b []byte) (offsetValue, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(b); err != nil {
		return offsetValue{}, err
	}
	o := offsetValue{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitTimestamp: v.CommitTimestamp, expireTimestamp: -1}
	if v.Version >= 3 {
		o.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		o.expireTimestamp = v.ExpireTimestamp
	}
	return o, nil
}
