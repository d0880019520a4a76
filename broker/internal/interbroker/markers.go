package interbroker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/image"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gregorbroker/gregor/broker/producerstate"
	"github.com/gregorbroker/gregor/broker/txn"
)

// The transaction coordinator's side of WriteTxnMarkers (key 27), as
// Kafka's TransactionMarkerChannelManager: the markers of one
// WriteMarkers call are sorted by the leader of each partition in this
// node's metadata image; partitions this node leads are written in
// process (the LocalMarkerWriter, the path the WriteTxnMarkers handler
// serves),
// and the others go to their leaders' inter-broker listeners, one
// request per leader, all leaders at once. What fails comes back to the
// coordinator (broker/txn/markers.go) as an error per partition, which
// retries it after a backoff with the leaders it then finds: a leader
// that moved answers NOT_LEADER_OR_FOLLOWER, and a partition no longer
// in the image is txn.ErrPartitionDeleted, dropped as Kafka drops a
// partition whose leader it cannot find.

// MarkerSender sends the transaction coordinator's markers to the
// partition leaders. It is the coordinator's txn.MarkerWriter.
type MarkerSender struct {
	self       int32               // this node's id
	image      func() *image.Image // this node's metadata image
	writeLocal LocalMarkerWriter
	clients    *Clients
	// ViaNetwork sends the markers of this node's partitions over its
	// inter-broker listener too; tests set it to exercise the path
	// between brokers on one node.
	ViaNetwork bool
}

// LocalMarkerWriter writes a marker to a partition this node leads (the
// path the WriteTxnMarkers handler serves).
type LocalMarkerWriter func(ctx context.Context, topic string, partition int32, m producerstate.Marker) error

// NewMarkerSender sends markers from node self: those of partitions it
// leads through writeLocal, the others to their leaders, found in image,
// on their listener named listener, with secure (the listener's TLS and
// SASL client options) added to its clients'.
func NewMarkerSender(self int32, listener string, image func() *image.Image, writeLocal LocalMarkerWriter, secure ...kgo.Opt) *MarkerSender {
	// v1 is the oldest version Kafka 4 serves; v2 carries the transaction
	// version, which the leader needs to check a version 2 marker's epoch,
	// and kgo sends the highest version both sides know.
	var minVersions kversion.Versions
	minVersions.SetMaxKeyVersion(int16(kmsg.WriteTxnMarkers), 1)
	return &MarkerSender{self: self, image: image, writeLocal: writeLocal, clients: NewClients(image, listener, append(secure,
		kgo.MinVersions(&minVersions),
		kgo.ClientID(fmt.Sprintf("gregor-txn-markers-%d", self)),
		// The leader answers once each marker is replicated, which may
		// take until a lagging follower leaves the ISR: the read
		// deadline must not cut that short of the request's own bound.
		kgo.RequestTimeoutOverhead(RequestTimeout+5*time.Second),
	)...)}
}

// Clients are the sender's connections to the other leaders.
func (ms *MarkerSender) Clients() *Clients { return ms.clients }

// markerRoute is the part of one marker that goes to one destination:
// the indexes, in Marker.Partitions, of its partitions there.
type markerRoute struct {
	marker int
	parts  []int
}

// markerLeader is where a partition's marker goes: the leader node, or
// the error the coordinator gets for it at once.
type markerLeader func(topic string, partition int32) (int32, error)

// routeMarkers sorts the partitions of markers by leader, in order of
// first appearance, and records the error of each partition that has no
// leader to go to in out.
func routeMarkers(markers []txn.Marker, leaderOf markerLeader, out [][]error) (order []int32, routes map[int32][]markerRoute) {
	routes = make(map[int32][]markerRoute)
	for i, m := range markers {
		last := make(map[int32]int) // node -> index of this marker's route in routes[node]
		for j, tp := range m.Partitions {
			node, err := leaderOf(tp.Topic, tp.Partition)
			if err != nil {
				out[i][j] = err
				continue
			}
			k, ok := last[node]
			if !ok {
				if _, seen := routes[node]; !seen {
					order = append(order, node)
				}
				k = len(routes[node])
				last[node] = k
				routes[node] = append(routes[node], markerRoute{marker: i})
			}
			routes[node][k].parts = append(routes[node][k].parts, j)
		}
	}
	return order, routes
}

// markerLeader is the leader of a partition in this node's image, as
// Kafka's metadataCache.getPartitionLeaderEndpoint: a partition not in the
// image was deleted (its marker is dropped), one without a live leader
// waits for the next attempt.
func (ms *MarkerSender) markerLeader(topic string, partition int32) (int32, error) {
	img := ms.image()
	t, ok := img.Topic(topic)
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return 0, fmt.Errorf("marker for %s-%d: %w", topic, partition, txn.ErrPartitionDeleted)
	}
	leader := t.Partitions[partition].Leader
	if leader < 0 {
		return 0, fmt.Errorf("marker for %s-%d: no leader: %w", topic, partition, kerr.LeaderNotAvailable)
	}
	if b, ok := img.Broker(leader); !ok || b.Fenced {
		return 0, fmt.Errorf("marker for %s-%d: leader %d is not alive: %w", topic, partition, leader, kerr.LeaderNotAvailable)
	}
	return leader, nil
}

// partitionDeleted reports whether a partition is gone from this node's
// image.
func (ms *MarkerSender) partitionDeleted(topic string, partition int32) bool {
	t, ok := ms.image().Topic(topic)
	return !ok || partition < 0 || int(partition) >= len(t.Partitions)
}

// WriteMarkers writes each marker to each of its partitions, on this
// node or at their leaders, and answers one error per partition.
func (ms *MarkerSender) WriteMarkers(ctx context.Context, markers []txn.Marker) [][]error {
	out := make([][]error, len(markers))
	for i, m := range markers {
		out[i] = make([]error, len(m.Partitions))
	}
	order, routes := routeMarkers(markers, ms.markerLeader, out)
	var wg sync.WaitGroup
	for _, node := range order {
		rs := routes[node]
		local := node == ms.self && !ms.ViaNetwork
		// Each destination fills its own partitions' slots of out.
		wg.Go(func() {
			if local {
				ms.writeLocalMarkers(ctx, markers, rs, out)
				return
			}
			ms.writeRemote(ctx, node, markers, rs, out)
		})
	}
	wg.Wait()
	return out
}

// writeLocalMarkers writes the markers of partitions this node leads.
func (ms *MarkerSender) writeLocalMarkers(ctx context.Context, markers []txn.Marker, rs []markerRoute, out [][]error) {
	for _, r := range rs {
		m := markers[r.marker]
		pm := producerstate.Marker{
			ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch,
			Commit: m.Commit, TransactionVersion: m.TransactionVersion,
		}
		for _, j := range r.parts {
			tp := m.Partitions[j]
			out[r.marker][j] = ms.writeLocal(ctx, tp.Topic, tp.Partition, pm)
		}
	}
}

// writeRemote sends the markers of partitions led by node in one
// WriteTxnMarkers request.
func (ms *MarkerSender) writeRemote(ctx context.Context, node int32, markers []txn.Marker, rs []markerRoute, out [][]error) {
	req := markersRequest(markers, rs)
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	b, err := ms.clients.Broker(node)
	var resp *kmsg.WriteTxnMarkersResponse
	if err == nil {
		resp, err = req.RequestWith(ctx, b)
	}
	if err != nil {
		err = fmt.Errorf("WriteTxnMarkers to broker %d: %w", node, err)
	}
	applyMarkersResponse(markers, rs, node, resp, err, ms.partitionDeleted, out)
}

// markersRequest is the WriteTxnMarkers request for the routed parts of
// markers, one request marker per route, in order.
func markersRequest(markers []txn.Marker, rs []markerRoute) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for _, r := range rs {
		m := markers[r.marker]
		rm := kmsg.NewWriteTxnMarkersRequestMarker()
		rm.ProducerID, rm.ProducerEpoch, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch
		rm.Committed = m.Commit
		rm.TransactionVersion = int8(m.TransactionVersion)
		byTopic := make(map[string]int)
		for _, j := range r.parts {
			tp := m.Partitions[j]
			k, ok := byTopic[tp.Topic]
			if !ok {
				k = len(rm.Topics)
				byTopic[tp.Topic] = k
				rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				rt.Topic = tp.Topic
				rm.Topics = append(rm.Topics, rt)
			}
			rm.Topics[k].Partitions = append(rm.Topics[k].Partitions, tp.Partition)
		}
		req.Markers = append(req.Markers, rm)
	}
	return req
}

// errNoMarkerAnswer is a partition the leader's response left out.
var errNoMarkerAnswer = errors.New("no answer for the partition in the WriteTxnMarkers response")

// applyMarkersResponse records the leader's answer for each routed
// partition in out. A failed request fails every partition with a
// retriable error. The response's markers answer the request's in order
// (Kafka's handler keeps the order, and one producer id may appear twice);
// a partition missing from its marker's answer is retried. A leader that
// does not know a partition this node's image no longer has either
// answers for a deleted partition, so its marker is dropped without
// another round.
func applyMarkersResponse(markers []txn.Marker, rs []markerRoute, node int32, resp *kmsg.WriteTxnMarkersResponse, reqErr error, deleted func(string, int32) bool, out [][]error) {
	for k, r := range rs {
		m := markers[r.marker]
		var codes map[txn.TopicPartition]int16
		if reqErr == nil && k < len(resp.Markers) && resp.Markers[k].ProducerID == m.ProducerID {
			codes = make(map[txn.TopicPartition]int16)
			for _, rt := range resp.Markers[k].Topics {
				for _, rp := range rt.Partitions {
					codes[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
				}
			}
		}
		for _, j := range r.parts {
			tp := m.Partitions[j]
			out[r.marker][j] = markerError(tp, node, codes, reqErr, deleted)
		}
	}
}

// markerError is the error of one partition's marker sent to node.
func markerError(tp txn.TopicPartition, node int32, codes map[txn.TopicPartition]int16, reqErr error, deleted func(string, int32) bool) error {
	if reqErr != nil {
		// A transport failure says nothing about the partition: keep
		// its cause readable but never let it classify as a partition's
		// answer (a kerr inside it could otherwise drop or stop the
		// marker), so the coordinator retries.
		return fmt.Errorf("marker for %s on broker %d: %s", tp, node, reqErr.Error())
	}
	code, ok := codes[tp]
	switch {
	case !ok:
		return fmt.Errorf("marker for %s on broker %d: %w", tp, node, errNoMarkerAnswer)
	case code == 0:
		return nil
	case code == kerr.UnknownTopicOrPartition.Code && deleted(tp.Topic, tp.Partition):
		return fmt.Errorf("marker for %s on broker %d: %w", tp, node, txn.ErrPartitionDeleted)
	}
	return fmt.Errorf("marker for %s on broker %d: %w", tp, node, kerr.ErrorForCode(code))
}
