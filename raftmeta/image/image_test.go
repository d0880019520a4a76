package image

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

var (
	idA = [16]byte{0xa}
	idB = [16]byte{0xb}
)

// baseRecords builds an image with two brokers and a three-partition topic.
func baseRecords() []Record {
	return []Record{
		&RegisterBrokerRecord{BrokerID: 1, Epoch: 10},
		&RegisterBrokerRecord{BrokerID: 2, Epoch: 11, Rack: strp("r2")},
		&TopicRecord{Name: "a", ID: idA},
		&PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
		&PartitionRecord{TopicID: idA, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2},
		&PartitionRecord{TopicID: idA, Partition: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
	}
}

func mustApply(t *testing.T, img *Image, offset uint64, recs ...Record) *Image {
	t.Helper()
	next, err := img.Apply(offset, recs...)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return next
}

func TestImageApply(t *testing.T) {
	base := mustApply(t, NewImage("c"), 1, baseRecords()...)
	tests := []struct {
		name  string
		recs  []Record
		check func(t *testing.T, img *Image)
		err   string
	}{
		{
			name: "partition change bumps epochs",
			recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 1, Leader: 1, ISR: []int32{1}}},
			check: func(t *testing.T, img *Image) {
				p := mustTopic(t, img, "a").Partitions[1]
				want := PartitionImage{Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1}
				if !reflect.DeepEqual(p, want) {
					t.Fatalf("partition %+v, want %+v", p, want)
				}
			},
		},
		{
			name: "ISR change keeps leader epoch",
			recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: NoLeaderChange, ISR: []int32{1}}},
			check: func(t *testing.T, img *Image) {
				p := mustTopic(t, img, "a").Partitions[0]
				if p.Leader != 1 || p.LeaderEpoch != 0 || p.PartitionEpoch != 1 || !reflect.DeepEqual(p.ISR, []int32{1}) {
					t.Fatalf("partition %+v", p)
				}
			},
		},
		{
			name: "remove topic",
			recs: []Record{&RemoveTopicRecord{TopicID: idA}},
			check: func(t *testing.T, img *Image) {
				if _, ok := img.Topic("a"); ok {
					t.Fatal("topic a still there by name")
				}
				if _, ok := img.TopicByID(idA); ok {
					t.Fatal("topic a still there by ID")
				}
			},
		},
		{
			name: "topic and broker configs",
			recs: []Record{
				&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "cleanup.policy", Value: strp("compact")},
				&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "retention.ms", Value: strp("1")},
				&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "a", Name: "retention.ms", Value: nil},
				&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Name: "num.partitions", Value: strp("3")},
			},
			check: func(t *testing.T, img *Image) {
				if got := mustTopic(t, img, "a").Configs; !reflect.DeepEqual(got, map[string]string{"cleanup.policy": "compact"}) {
					t.Fatalf("topic configs %v", got)
				}
				if got := img.BrokerConfigs(""); !reflect.DeepEqual(got, map[string]string{"num.partitions": "3"}) {
					t.Fatalf("broker configs %v", got)
				}
			},
		},
		{
			name: "fence broker, producer ids, features",
			recs: []Record{
				&BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 11, Fenced: true},
				&ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 10, NextProducerID: 1000},
				&FeatureLevelRecord{Name: "metadata.version", Level: 7},
			},
			check: func(t *testing.T, img *Image) {
				if got := img.UnfencedBrokerIDs(); !reflect.DeepEqual(got, []int32{1}) {
					t.Fatalf("unfenced %v", got)
				}
				if img.NextProducerID() != 1000 {
					t.Fatalf("next producer ID %d", img.NextProducerID())
				}
				if l, ok := img.Feature("metadata.version"); !ok || l != 7 {
					t.Fatalf("feature %d %v", l, ok)
				}
			},
		},
		{name: "duplicate name", recs: []Record{&TopicRecord{Name: "a", ID: idB}}, err: "already exists"},
		{name: "duplicate ID", recs: []Record{&TopicRecord{Name: "b", ID: idA}}, err: "already exists"},
		{name: "zero ID", recs: []Record{&TopicRecord{Name: "b"}}, err: "zero topic ID"},
		{name: "invalid name", recs: []Record{&TopicRecord{Name: "a/b", ID: idB}}, err: "illegal"},
		{name: "colliding name", recs: []Record{&TopicRecord{Name: "x.y", ID: idB}, &TopicRecord{Name: "x_y", ID: [16]byte{9}}}, err: "collides"},
		{name: "partition gap", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 4, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}}, err: "has 3 partitions"},
		{name: "partition of unknown topic", recs: []Record{&PartitionRecord{TopicID: idB, Replicas: []int32{1}, Leader: 1}}, err: "unknown topic ID"},
		{name: "leader not a replica", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 3, Replicas: []int32{1}, ISR: []int32{1}, Leader: 2}}, err: "not a replica"},
		{name: "ISR outside replicas", recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: NoLeaderChange, ISR: []int32{3}}}, err: "ISR"},
		{name: "duplicate replica", recs: []Record{&PartitionRecord{TopicID: idA, Partition: 3, Replicas: []int32{1, 1}, Leader: 1}}, err: "twice"},
		{name: "change of missing partition", recs: []Record{&PartitionChangeRecord{TopicID: idA, Partition: 3, Leader: 1}}, err: "has 3 partitions"},
		{name: "config of unknown topic", recs: []Record{&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "zz", Name: "k", Value: strp("v")}}, err: "unknown topic"},
		{name: "config of unknown resource type", recs: []Record{&ConfigRecord{ResourceType: 16, ResourceName: "zz", Name: "k"}}, err: "resource type"},
		{name: "producer ids going back", recs: []Record{&ProducerIDsRecord{NextProducerID: 1000}, &ProducerIDsRecord{NextProducerID: 1000}}, err: "does not advance"},
		{name: "stale broker epoch", recs: []Record{&BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 9}}, err: "epoch"},
		{name: "register with old epoch", recs: []Record{&RegisterBrokerRecord{BrokerID: 1, Epoch: 10}}, err: "does not advance"},
		{name: "remove missing topic", recs: []Record{&RemoveTopicRecord{TopicID: idB}}, err: "unknown topic ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := EncodeImage(base)
			next, err := base.Apply(5, tt.recs...)
			if string(EncodeImage(base)) != string(before) {
				t.Fatal("Apply modified its receiver")
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one mentioning %q", err, tt.err)
				}
				if next != base {
					t.Fatal("failed Apply did not return the receiver")
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if next.Offset() != 5 {
				t.Fatalf("offset %d", next.Offset())
			}
			tt.check(t, next)
		})
	}
}

func mustTopic(t *testing.T, img *Image, name string) *TopicImage {
	t.Helper()
	tp, ok := img.Topic(name)
	if !ok {
		t.Fatalf("no topic %s", name)
	}
	return tp
}

func TestImageCopyOnWrite(t *testing.T) {
	img := mustApply(t, NewImage("c"), 1, baseRecords()...)
	img = mustApply(t, img, 2, &TopicRecord{Name: "b", ID: idB},
		&PartitionRecord{TopicID: idB, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
	next := mustApply(t, img, 3, &PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: 2})
	a0, a1 := mustTopic(t, img, "a"), mustTopic(t, next, "a")
	if a0 == a1 {
		t.Fatal("changed topic is shared")
	}
	if a0.Partitions[0].Leader != 1 || a1.Partitions[0].Leader != 2 {
		t.Fatalf("leaders %d then %d", a0.Partitions[0].Leader, a1.Partitions[0].Leader)
	}
	if mustTopic(t, img, "b") != mustTopic(t, next, "b") {
		t.Fatal("untouched topic was copied")
	}
	d := DiffTopics(img, next)
	if len(d.Created) != 0 || len(d.Deleted) != 0 || len(d.Changed) != 1 || d.Changed[0].Name != "a" {
		t.Fatalf("diff %+v", d)
	}
	gone := mustApply(t, next, 4, &RemoveTopicRecord{TopicID: idB}, &TopicRecord{Name: "c", ID: [16]byte{0xc}})
	d = DiffTopics(next, gone)
	if len(d.Created) != 1 || d.Created[0].Name != "c" || len(d.Deleted) != 1 || d.Deleted[0].Name != "b" || len(d.Changed) != 0 {
		t.Fatalf("diff %+v", d)
	}
	if d := DiffTopics(nil, img); len(d.Created) != 2 {
		t.Fatalf("diff from nil %+v", d)
	}
}

func TestImageEncodeDecode(t *testing.T) {
	img := mustApply(t, NewImage("cluster-1"), 42, append(baseRecords(),
		&TopicRecord{Name: "x.y", ID: idB},
		&PartitionRecord{TopicID: idB, Replicas: []int32{2}, ISR: []int32{}, Leader: NoLeader, LeaderEpoch: 3, PartitionEpoch: 8},
		&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "x.y", Name: "k", Value: strp("v")},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "2", Name: "b", Value: strp("w")},
		&BrokerRegistrationChangeRecord{BrokerID: 2, BrokerEpoch: 11, Fenced: true},
		&ProducerIDsRecord{NextProducerID: 5000},
		&FeatureLevelRecord{Name: "f", Level: 2},
	)...)
	b := EncodeImage(img)
	got, err := DecodeImage(b)
	if err != nil {
		t.Fatalf("DecodeImage: %v", err)
	}
	if !reflect.DeepEqual(got, img) {
		t.Fatalf("decoded image differs:\n got %+v\nwant %+v", got, img)
	}
	if _, ok := got.CollidingTopic("x_y"); !ok {
		t.Fatal("collision index not rebuilt")
	}
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(append([]byte{}, b...), 1)} {
		if _, err := DecodeImage(bad); err == nil {
			t.Fatalf("DecodeImage(%d bytes) succeeded", len(bad))
		}
	}
}

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"Orders.v1_x-2", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"a b", false},
		{"é", false},
		{"a/b", false},
	}
	for _, tt := range tests {
		if err := ValidateTopicName(tt.name); (err == nil) != tt.ok {
			t.Errorf("ValidateTopicName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestNewUUID(t *testing.T) {
	seen := map[[16]byte]bool{}
	for i := 0; i < 1000; i++ {
		id := NewUUID()
		s := UUIDString(id)
		if id == ([16]byte{}) || s[0] == '-' || id[6]>>4 != 4 || seen[id] {
			t.Fatalf("bad uuid %x (%s)", id, s)
		}
		seen[id] = true
		back, err := ParseUUID(s)
		if err != nil || back != id {
			t.Fatalf("ParseUUID(%s) = %x, %v", s, back, err)
		}
	}
	if _, err := ParseUUID("short"); err == nil {
		t.Fatal("ParseUUID accepted a short string")
	}
}

// Applying checks the reassignment sets and bumps the leader epoch
// whenever a change names the leader, even the current one.
func TestReassignImageApply(t *testing.T) {
	base := mustApply(t, NewImage("c"), 1, baseRecords()...)
	bad := []struct {
		name string
		rec  Record
	}{
		{"adding not a replica", &PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: NoLeaderChange, AddingReplicas: []int32{7}}},
		{"adding twice", &PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: NoLeaderChange, Replicas: []int32{1, 2, 3}, AddingReplicas: []int32{3, 3}}},
		{"both adding and removing", &PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: NoLeaderChange, Replicas: []int32{1, 2, 3}, AddingReplicas: []int32{3}, RemovingReplicas: []int32{3}}},
		{"partition record removing outside", &PartitionRecord{TopicID: idA, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, RemovingReplicas: []int32{2}}},
	}
	for _, tt := range bad {
		if _, err := base.Apply(2, tt.rec); err == nil {
			t.Errorf("%s: applied", tt.name)
		}
	}
	p0 := mustTopic(t, base, "a").Partitions[0]
	next := mustApply(t, base, 2, &PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: p0.Leader})
	if p := mustTopic(t, next, "a").Partitions[0]; p.LeaderEpoch != p0.LeaderEpoch+1 || p.Leader != p0.Leader {
		t.Fatalf("leader named again: %+v (was %+v)", p, p0)
	}
	grown := mustApply(t, base, 2, &PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: NoLeaderChange,
		Replicas: append(slices.Clone(p0.Replicas), 3), AddingReplicas: []int32{3}})
	if p := mustTopic(t, grown, "a").Partitions[0]; !p.Reassigning() || p.LeaderEpoch != p0.LeaderEpoch {
		t.Fatalf("grown: %+v", p)
	}
	// An empty set clears, a nil one keeps.
	kept := mustApply(t, grown, 3, &PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: NoLeaderChange, ISR: []int32{1}})
	if p := mustTopic(t, kept, "a").Partitions[0]; !slices.Equal(p.AddingReplicas, []int32{3}) {
		t.Fatalf("nil adding did not keep: %+v", p)
	}
	cleared := mustApply(t, kept, 4, &PartitionChangeRecord{TopicID: idA, Partition: 0, Leader: NoLeaderChange, AddingReplicas: []int32{}})
	if p := mustTopic(t, cleared, "a").Partitions[0]; p.AddingReplicas != nil || p.Reassigning() {
		t.Fatalf("empty adding did not clear: %+v", p)
	}
}
