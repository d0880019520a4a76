package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// smHeartbeat sends one ShareGroupHeartbeat, retrying while the group's
// coordinator loads, as Kafka's consumers do.
func smHeartbeat(t *testing.T, cl *kgo.Client, group, member string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
	for try := 0; ; try++ {
		resp, err := req.RequestWith(testContext(t, 10*time.Second), cl)
		if err == nil && !smCoordinatorMoving(resp.ErrorCode) || try == 100 {
			if err != nil {
				t.Fatalf("heartbeat %s: %v", member, err)
			}
			return resp
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func smCoordinatorMoving(code int16) bool {
	switch kerr.ErrorForCode(code) {
	case kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable:
		return true
	}
	return false
}

// smDescribe describes one share group, retrying while it loads.
func smDescribe(t *testing.T, cl *kgo.Client, group string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	for try := 0; ; try++ {
		resp, err := req.RequestWith(testContext(t, 10*time.Second), cl)
		if err == nil && len(resp.Groups) == 1 && !smCoordinatorMoving(resp.Groups[0].ErrorCode) || try == 100 {
			if err != nil || len(resp.Groups) != 1 {
				t.Fatalf("describe %s: %v %+v", group, err, resp)
			}
			return resp.Groups[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestShareGroupMembershipSigkill: three members of a share group on a
// four-partition topic, one of which left; gregor is killed with SIGKILL
// and restarted on the same data. ShareGroupDescribe answers the same
// group epoch, assignment epoch, members, member epochs, client ids,
// subscriptions and assignments before and after; a member heartbeating
// at its epoch continues without being fenced or rejoining; a member
// silent since the kill is removed once its session timeout has passed
// from the restart, which moves the group epoch; the member that left
// stays gone.
func TestShareGroupMembershipSigkill(t *testing.T) {
	t.Parallel()
	dir, port := t.TempDir(), freePort(t)
	// A target on every membership change (group.share.assignment.interval.ms
	// 0), so that the members' epochs below reach the group's at once.
	args := []string{"--override", "group.share.session.timeout.ms=6000", "--override", "group.share.heartbeat.interval.ms=1000",
		"--override", "group.share.assignment.interval.ms=0"}
	p := startGregor(t, dir, port, args...)
	const topic, group = "sm-topic", "sm-group"
	createTopic(t, p.addr, topic, 4)

	cl := newClient(t, p.addr, kgo.ClientID("sm-client"))
	epochs := map[string]int32{}
	for _, m := range []string{"a", "b", "c"} {
		r := smHeartbeat(t, cl, group, m, 0, []string{topic})
		if r.ErrorCode != 0 {
			t.Fatalf("join %s: %v", m, kerr.ErrorForCode(r.ErrorCode))
		}
		epochs[m] = r.MemberEpoch
	}
	if r := smHeartbeat(t, cl, group, "c", -1, nil); r.ErrorCode != 0 {
		t.Fatalf("c leaves: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	delete(epochs, "c")
	// a and b take the assignment of the last epoch.
	for _, m := range []string{"a", "b"} {
		r := smHeartbeat(t, cl, group, m, epochs[m], nil)
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat %s: %v", m, kerr.ErrorForCode(r.ErrorCode))
		}
		epochs[m] = r.MemberEpoch
	}
	before := smDescribe(t, cl, group)
	if before.ErrorCode != 0 || len(before.Members) != 2 || before.GroupEpoch < 4 {
		t.Fatalf("before the kill: %+v", before)
	}
	for _, m := range before.Members {
		if m.MemberEpoch != before.GroupEpoch || len(m.Assignment.TopicPartitions) != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != 2 {
			t.Fatalf("before the kill, member %s: %+v", m.MemberID, m)
		}
	}
	cl.Close()

	p.kill()
	p = startGregor(t, dir, port, args...)
	restarted := time.Now()
	cl = newClient(t, p.addr, kgo.ClientID("sm-client-2"))
	after := smDescribe(t, cl, group)
	if after.ErrorCode != 0 || after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch ||
		after.GroupState != before.GroupState || len(after.Members) != len(before.Members) {
		t.Fatalf("after the restart: %+v\nbefore: %+v", after, before)
	}
	for i, m := range after.Members {
		b := before.Members[i]
		if m.MemberID != b.MemberID || m.MemberEpoch != b.MemberEpoch || m.ClientID != b.ClientID || m.ClientHost != b.ClientHost ||
			!slices.Equal(m.SubscribedTopicNames, b.SubscribedTopicNames) ||
			len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].TopicID != b.Assignment.TopicPartitions[0].TopicID ||
			!slices.Equal(m.Assignment.TopicPartitions[0].Partitions, b.Assignment.TopicPartitions[0].Partitions) {
			t.Fatalf("member %s after the restart: %+v\nbefore: %+v", m.MemberID, m, b)
		}
	}
	t.Logf("group epoch %d, members %s (epoch %d, partitions %v) and %s (epoch %d, partitions %v) kept across SIGKILL",
		after.GroupEpoch, after.Members[0].MemberID, after.Members[0].MemberEpoch, after.Members[0].Assignment.TopicPartitions[0].Partitions,
		after.Members[1].MemberID, after.Members[1].MemberEpoch, after.Members[1].Assignment.TopicPartitions[0].Partitions)

	// a continues at its epoch: no fencing, no new assignment needed.
	if r := smHeartbeat(t, cl, group, "a", epochs["a"], nil); r.ErrorCode != 0 || r.MemberEpoch != epochs["a"] {
		t.Fatalf("a at its epoch after the restart: %v, epoch %d (was %d)", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, epochs["a"])
	}
	if r := smHeartbeat(t, cl, group, "c", epochs["a"], nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("c, which left, after the restart: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// b says nothing: its session (6 s) runs from the restart, and a,
	// heartbeating every second, sees the epoch move when b goes and
	// takes all four partitions.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := smHeartbeat(t, cl, group, "a", epochs["a"], nil)
		if r.ErrorCode != 0 {
			t.Fatalf("a heartbeating: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		epochs["a"] = r.MemberEpoch
		if r.MemberEpoch > before.GroupEpoch {
			if r.Assignment == nil || len(r.Assignment.TopicPartitions) != 1 || len(r.Assignment.TopicPartitions[0].Partitions) != 4 {
				t.Fatalf("a after b's session ended: %+v", r.Assignment)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's session did not end within 30 s of the restart")
		}
		time.Sleep(time.Second)
	}
	if gone := time.Since(restarted); gone < 5*time.Second {
		t.Fatalf("b removed %v after the restart, before its session timeout", gone)
	}
	final := smDescribe(t, cl, group)
	if len(final.Members) != 1 || final.Members[0].MemberID != "a" || final.GroupEpoch != before.GroupEpoch+1 {
		t.Fatalf("after b's session ended: %+v", final)
	}
}
