package interbroker

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/txn"
)

func msTP(topic string, p int32) txn.TopicPartition {
	return txn.TopicPartition{Topic: topic, Partition: p}
}

// TestRouteMarkers: partitions go to their leaders, one route per marker
// and leader, in order; a deleted partition or one without a live leader
// is answered at once and sent nowhere.
func TestRouteMarkers(t *testing.T) {
	leaders := map[txn.TopicPartition]int32{
		msTP("a", 0): 1, msTP("a", 1): 2, msTP("a", 2): 3,
		msTP("b", 0): 2, msTP("b", 1): 1,
	}
	leaderOf := func(topic string, p int32) (int32, error) {
		switch {
		case topic == "gone":
			return 0, fmt.Errorf("marker: %w", txn.ErrPartitionDeleted)
		case topic == "orphan":
			return 0, fmt.Errorf("marker: %w", kerr.LeaderNotAvailable)
		}
		return leaders[msTP(topic, p)], nil
	}
	markers := []txn.Marker{
		{ProducerID: 7, Partitions: []txn.TopicPartition{msTP("a", 1), msTP("a", 0), msTP("gone", 0), msTP("b", 0), msTP("a", 2)}},
		{ProducerID: 8, Partitions: []txn.TopicPartition{msTP("b", 1), msTP("orphan", 3), msTP("a", 1)}},
	}
	out := [][]error{make([]error, 5), make([]error, 3)}
	order, routes := routeMarkers(markers, leaderOf, out)
	if want := []int32{2, 1, 3}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	want := map[int32][]markerRoute{
		2: {{marker: 0, parts: []int{0, 3}}, {marker: 1, parts: []int{2}}},
		1: {{marker: 0, parts: []int{1}}, {marker: 1, parts: []int{0}}},
		3: {{marker: 0, parts: []int{4}}},
	}
	if len(routes) != len(want) {
		t.Fatalf("routes %v, want %v", routes, want)
	}
	for node, w := range want {
		got := routes[node]
		if len(got) != len(w) {
			t.Fatalf("node %d: routes %v, want %v", node, got, w)
		}
		for k := range w {
			if got[k].marker != w[k].marker || !slices.Equal(got[k].parts, w[k].parts) {
				t.Fatalf("node %d: routes %v, want %v", node, got, w)
			}
		}
	}
	if !errors.Is(out[0][2], txn.ErrPartitionDeleted) || !errors.Is(out[1][1], kerr.LeaderNotAvailable) {
		t.Fatalf("unrouted errors: %v, %v", out[0][2], out[1][1])
	}
	for _, e := range []error{out[0][0], out[0][1], out[0][3], out[0][4], out[1][0], out[1][2]} {
		if e != nil {
			t.Fatalf("routed partition has an error already: %v", e)
		}
	}

	// The request to node 2: one marker per route, partitions grouped by
	// topic in order.
	req := markersRequest(markers, routes[2])
	if len(req.Markers) != 2 || req.Markers[0].ProducerID != 7 || req.Markers[1].ProducerID != 8 {
		t.Fatalf("request markers: %+v", req.Markers)
	}
	m0 := req.Markers[0]
	if len(m0.Topics) != 2 || m0.Topics[0].Topic != "a" || !slices.Equal(m0.Topics[0].Partitions, []int32{1}) ||
		m0.Topics[1].Topic != "b" || !slices.Equal(m0.Topics[1].Partitions, []int32{0}) {
		t.Fatalf("first marker's topics: %+v", m0.Topics)
	}
}

// TestApplyMarkersResponse: a leader's answer maps back to each partition
// of each marker; what the coordinator must retry stays retriable, a
// partition the leader and this node agree is gone is deleted, and a
// transport failure never reads as a partition's answer.
func TestApplyMarkersResponse(t *testing.T) {
	markers := []txn.Marker{
		{ProducerID: 7, ProducerEpoch: 2, CoordinatorEpoch: 4, Commit: true, TransactionVersion: 2,
			Partitions: []txn.TopicPartition{msTP("a", 0), msTP("a", 1), msTP("old", 0), msTP("new", 0), msTP("a", 2)}},
		{ProducerID: 9, Partitions: []txn.TopicPartition{msTP("a", 3)}},
		{ProducerID: 7, Partitions: []txn.TopicPartition{msTP("b", 0)}}, // the same producer id again
	}
	rs := []markerRoute{{marker: 0, parts: []int{0, 1, 2, 3, 4}}, {marker: 1, parts: []int{0}}, {marker: 2, parts: []int{0}}}
	req := markersRequest(markers, rs)
	if m := req.Markers[0]; !m.Committed || m.ProducerEpoch != 2 || m.CoordinatorEpoch != 4 || m.TransactionVersion != 2 {
		t.Fatalf("request marker fields: %+v", m)
	}
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	answer := func(pid int64, topic string, codes map[int32]int16) {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = pid
		rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
		rt.Topic = topic
		for p, c := range codes {
			rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
			rp.Partition, rp.ErrorCode = p, c
			rt.Partitions = append(rt.Partitions, rp)
		}
		rm.Topics = append(rm.Topics, rt)
		resp.Markers = append(resp.Markers, rm)
	}
	// Marker 0: a-0 written, a-1 led elsewhere now, a-2 left out.
	answer(7, "a", map[int32]int16{0: 0, 1: kerr.NotLeaderForPartition.Code})
	resp.Markers[0].Topics = append(resp.Markers[0].Topics,
		kmsg.WriteTxnMarkersResponseMarkerTopic{Topic: "old", Partitions: []kmsg.WriteTxnMarkersResponseMarkerTopicPartition{{Partition: 0, ErrorCode: kerr.UnknownTopicOrPartition.Code}}},
		kmsg.WriteTxnMarkersResponseMarkerTopic{Topic: "new", Partitions: []kmsg.WriteTxnMarkersResponseMarkerTopicPartition{{Partition: 0, ErrorCode: kerr.UnknownTopicOrPartition.Code}}})
	answer(9, "a", map[int32]int16{3: kerr.InvalidProducerEpoch.Code})
	answer(7, "b", map[int32]int16{0: 0})
	deleted := func(topic string, _ int32) bool { return topic == "old" }

	out := [][]error{make([]error, 5), make([]error, 1), make([]error, 1)}
	applyMarkersResponse(markers, rs, 2, resp, nil, deleted, out)
	if out[0][0] != nil || out[2][0] != nil {
		t.Fatalf("written partitions: %v, %v", out[0][0], out[2][0])
	}
	if !errors.Is(out[0][1], kerr.NotLeaderForPartition) {
		t.Fatalf("moved leader: %v", out[0][1])
	}
	if !errors.Is(out[0][2], txn.ErrPartitionDeleted) {
		t.Fatalf("deleted partition: %v", out[0][2])
	}
	// A partition this node still has (the leader lags the metadata) is
	// retried, not dropped.
	if !errors.Is(out[0][3], kerr.UnknownTopicOrPartition) || errors.Is(out[0][3], txn.ErrPartitionDeleted) {
		t.Fatalf("partition unknown to the leader only: %v", out[0][3])
	}
	if !errors.Is(out[0][4], errNoMarkerAnswer) {
		t.Fatalf("partition missing from the answer: %v", out[0][4])
	}
	if !errors.Is(out[1][0], kerr.InvalidProducerEpoch) {
		t.Fatalf("fenced producer: %v", out[1][0])
	}

	// Markers answered out of order: no partition takes another
	// marker's answer.
	swapped := kmsg.NewPtrWriteTxnMarkersResponse()
	swapped.Markers = []kmsg.WriteTxnMarkersResponseMarker{resp.Markers[1], resp.Markers[0], resp.Markers[2]}
	out = [][]error{make([]error, 5), make([]error, 1), make([]error, 1)}
	applyMarkersResponse(markers, rs, 2, swapped, nil, deleted, out)
	for j := range 5 {
		if !errors.Is(out[0][j], errNoMarkerAnswer) {
			t.Fatalf("partition %d of a marker answered out of place: %v", j, out[0][j])
		}
	}
	if !errors.Is(out[1][0], errNoMarkerAnswer) || out[2][0] != nil {
		t.Fatalf("out of place: %v, %v", out[1][0], out[2][0])
	}

	// A transport failure, even one carrying a Kafka error, is retried
	// for every partition.
	out = [][]error{make([]error, 5), make([]error, 1), make([]error, 1)}
	applyMarkersResponse(markers, rs, 2, nil, fmt.Errorf("send: %w", kerr.UnsupportedVersion), deleted, out)
	for i := range out {
		for j, e := range out[i] {
			var ke *kerr.Error
			if e == nil || errors.As(e, &ke) || errors.Is(e, txn.ErrPartitionDeleted) {
				t.Fatalf("marker %d partition %d after a transport failure: %v", i, j, e)
			}
		}
	}
}
