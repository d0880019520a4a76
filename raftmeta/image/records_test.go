package image

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
)

func strp(s string) *string { return &s }

var testTopicID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// sampleRecords holds one or more records of every type, covering nil and
// empty slices and nil and empty optional strings.
func sampleRecords() []Record {
	return []Record{
		&TopicRecord{Name: "orders", ID: testTopicID},
		&TopicRecord{},
		&PartitionRecord{TopicID: testTopicID, Partition: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 3, LeaderEpoch: 4, PartitionEpoch: 9},
		&PartitionRecord{TopicID: testTopicID, Partition: 0, Replicas: []int32{}, ISR: nil, Leader: -1, LeaderEpoch: -1, PartitionEpoch: 2147483647},
		&PartitionChangeRecord{TopicID: testTopicID, Partition: 2, Leader: NoLeaderChange, ISR: []int32{5}},
		&PartitionChangeRecord{TopicID: testTopicID, Partition: -2147483648, Leader: NoLeader, Replicas: []int32{}},
		&RemoveTopicRecord{TopicID: testTopicID},
		&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Name: "retention.ms", Value: strp("1000")},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Name: "log.retention.hours", Value: nil},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "1", Name: "x", Value: strp("")},
		&RegisterBrokerRecord{
			BrokerID: 1, IncarnationID: testTopicID, Epoch: 1 << 40,
			Listeners: []Listener{{Name: "PLAINTEXT", Host: "localhost", Port: 9092, SecurityProtocol: 0}, {Name: "SSL", Host: "h", Port: 65535, SecurityProtocol: 1}},
			Rack:      strp("rack-a"), Fenced: true,
		},
		&RegisterBrokerRecord{BrokerID: 0},
		&BrokerRegistrationChangeRecord{BrokerID: 3, BrokerEpoch: 77, Fenced: true},
		&ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 12, NextProducerID: 9223372036854775807},
		&FeatureLevelRecord{Name: "metadata.version", Level: 21},
		&FeatureLevelRecord{Name: "x", Level: -32768},
		&AccessControlEntryRecord{ID: testTopicID, ResourceType: 2, ResourceName: "orders-", PatternType: 4, Principal: "User:alice", Host: "*", Operation: 3, PermissionType: 3},
		&RemoveAccessControlEntryRecord{ID: testTopicID},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		t.Run(r.Type().String(), func(t *testing.T) {
			b := EncodeRecord(r)
			got, err := DecodeRecord(b)
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
			}
			if again := EncodeRecord(got); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs: %x vs %x", again, b)
			}
			// Every strict prefix is truncated and must fail.
			for i := 0; i < len(b); i++ {
				if _, err := DecodeRecord(b[:i]); err == nil {
					t.Fatalf("prefix of %d/%d bytes decoded without error", i, len(b))
				}
			}
			if _, err := DecodeRecord(append(bytes.Clone(b), 0)); err == nil {
				t.Fatal("trailing byte decoded without error")
			}
		})
	}
}

func TestDecodeRecordRejectsGarbage(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "header"},
		{"unknown type", []byte{99, 0}, "unknown type 99"},
		{"huge type", []byte{0xff, 0xff, 0xff, 0x0f, 0}, "unknown type"},
		{"future version", []byte{byte(TypeRemoveTopic), 1}, "unsupported version 1"},
		{"bad bool", append(append([]byte{byte(TypeBrokerRegistrationChange), 0}, 2, 2), 7), "bool"},
		{"int32 overflow", append([]byte{byte(TypePartition), 0}, append(make([]byte, 16), 0xff, 0xff, 0xff, 0xff, 0x7f)...), "out of range"},
		{"huge array", append([]byte{byte(TypePartition), 0}, append(make([]byte, 16), 0, 0xfe, 0xff, 0xff, 0xff, 0x0f)...), "array length"},
		{"negative array", append([]byte{byte(TypePartition), 0}, append(make([]byte, 16), 0, 5)...), "array length"},
		{"huge string", []byte{byte(TypeTopic), 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, "exceeds"},
		{"negative nullable string", []byte{byte(TypeConfig), 0, 2, 0, 0, 5}, "negative string length"},
		{"huge listener count", []byte{byte(TypeRegisterBroker), 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0xff, 0xff, 0x03}, "count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRecord(tt.in)
			if err == nil {
				t.Fatalf("decoded %#v, want error", r)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(EncodeRecord(r))
	}
	f.Add([]byte{})
	f.Add([]byte{byte(TypePartition), 0, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		again, err := DecodeRecord(EncodeRecord(r))
		if err != nil {
			t.Fatalf("re-encoded %#v does not decode: %v", r, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoding changed the record:\n got %#v\nwant %#v", again, r)
		}
	})
}

// The reassignment fields survive the record codec, and version 0 records
// written before they existed still decode.
func TestReassignRecordVersions(t *testing.T) {
	for _, r := range []Record{
		&PartitionRecord{TopicID: testTopicID, Partition: 1, Replicas: []int32{3, 1, 2}, ISR: []int32{1}, Leader: 1, AddingReplicas: []int32{3}, RemovingReplicas: []int32{2}},
		&PartitionChangeRecord{TopicID: testTopicID, Partition: 1, Leader: NoLeaderChange, AddingReplicas: []int32{}, RemovingReplicas: []int32{4}},
	} {
		b := EncodeRecord(r)
		if b[1] != 1 {
			t.Fatalf("%s written as version %d", r.Type(), b[1])
		}
		got, err := DecodeRecord(b)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip %s: %#v %v", r.Type(), got, err)
		}
		// Version 0 is the same bytes without the two trailing arrays.
		v0 := bytes.Clone(b)
		v0[1] = 0
		v0 = v0[:len(v0)-len(appendInt32s(r))]
		old, err := DecodeRecord(v0)
		if err != nil {
			t.Fatalf("version 0 %s: %v", r.Type(), err)
		}
		switch o := old.(type) {
		case *PartitionRecord:
			if o.AddingReplicas != nil || o.RemovingReplicas != nil || !slices.Equal(o.Replicas, []int32{3, 1, 2}) {
				t.Fatalf("version 0 decoded as %#v", o)
			}
		case *PartitionChangeRecord:
			if o.AddingReplicas != nil || o.RemovingReplicas != nil {
				t.Fatalf("version 0 decoded as %#v", o)
			}
		}
		if _, err := DecodeRecord(append([]byte{b[0], 2}, b[2:]...)); err == nil {
			t.Fatalf("%s version 2 decoded", r.Type())
		}
	}
}

// appendInt32s is the encoding of r's two reassignment arrays.
func appendInt32s(r Record) []byte {
	e := compact.Encoder{}
	switch r := r.(type) {
	case *PartitionRecord:
		e.Int32s(r.AddingReplicas)
		e.Int32s(r.RemovingReplicas)
	case *PartitionChangeRecord:
		e.Int32s(r.AddingReplicas)
		e.Int32s(r.RemovingReplicas)
	}
	return e.Buf
}
