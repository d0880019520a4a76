package raftmeta

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func strp(s string) *string { return &s }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isrOf is an ISR whose members' broker epochs are unknown (-1), which the
// controller does not check.
func isrOf(ids ...int32) []controller.ISRMember {
	out := make([]controller.ISRMember, 0, len(ids))
	for _, id := range ids {
		out = append(out, controller.ISRMember{ID: id, BrokerEpoch: -1})
	}
	return out
}

// reassign asks for one partition's reassignment and returns its result.
func reassign(t *testing.T, c controller.API, topic string, p int32, replicas []int32, allowRF bool) error {
	t.Helper()
	res, err := c.AlterPartitionReassignments(ctxT(t), []controller.ReassignTopic{{Topic: topic, Partitions: []controller.ReassignPartition{{Partition: p, Replicas: replicas}}}}, allowRF)
	if err != nil {
		t.Fatalf("AlterPartitionReassignments: %v", err)
	}
	if len(res) != 1 || res[0].Topic != topic || len(res[0].Partitions) != 1 || res[0].Partitions[0].Partition != p {
		t.Fatalf("answer %+v", res)
	}
	return res[0].Partitions[0].Err
}

func listAll(t *testing.T, c controller.API) []controller.OngoingTopicReassignments {
	t.Helper()
	res, err := c.ListPartitionReassignments(ctxT(t), nil)
	if err != nil {
		t.Fatalf("ListPartitionReassignments: %v", err)
	}
	return res
}

// wantPartition checks the fields of a partition that a reassignment moves.
func wantPartition(t *testing.T, what string, got image.PartitionImage, replicas, isr, adding, removing []int32, leader, leaderEpoch, partitionEpoch int32) {
	t.Helper()
	if !slices.Equal(got.Replicas, replicas) || !slices.Equal(got.ISR, isr) ||
		!slices.Equal(got.AddingReplicas, adding) || !slices.Equal(got.RemovingReplicas, removing) ||
		got.Leader != leader || got.LeaderEpoch != leaderEpoch || got.PartitionEpoch != partitionEpoch {
		t.Fatalf("%s: partition %+v, want replicas %v isr %v adding %v removing %v leader %d epochs %d/%d",
			what, got, replicas, isr, adding, removing, leader, leaderEpoch, partitionEpoch)
	}
}

func part(t *testing.T, n *Node, topic string, p int32) image.PartitionImage {
	t.Helper()
	tp, ok := n.Image().Topic(topic)
	if !ok || int(p) >= len(tp.Partitions) {
		t.Fatalf("no partition %s-%d", topic, p)
	}
	return tp.Partitions[p]
}
