package raftnode

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/gregorbroker/gregor/raftmeta/image"
)

// sampleRecords holds records of several types, enough to exercise the
// entry body (the records' own encodings are tested in package image).
func sampleRecords() []image.Record {
	return []image.Record{
		&image.TopicRecord{Name: "orders", ID: idA},
		&image.PartitionRecord{TopicID: idA, Partition: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 3, LeaderEpoch: 4, PartitionEpoch: 9},
		&image.ConfigRecord{ResourceType: image.ResourceTopic, ResourceName: "orders", Name: "retention.ms", Value: strp("1000")},
		&image.RegisterBrokerRecord{BrokerID: 1, IncarnationID: idB, Epoch: 1 << 40, Rack: strp("rack-a"), Fenced: true},
		&image.FeatureLevelRecord{Name: "metadata.version", Level: 21},
	}
}

func TestEntryRoundTrip(t *testing.T) {
	recs := sampleRecords()
	b := encodeEntry(recs)
	want := entryHeader{node: 3, incarnation: 1<<63 + 5, seq: 42}
	setEntryHeader(b, want)
	h, got, err := decodeEntry(b)
	if err != nil {
		t.Fatalf("decodeEntry: %v", err)
	}
	if h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("records differ:\n got %#v\nwant %#v", got, recs)
	}
	for _, bad := range [][]byte{nil, b[:entryHeaderLen-1], b[:len(b)-1], append(bytes.Clone(b), 0)} {
		if _, _, err := decodeEntry(bad); err == nil {
			t.Fatalf("decodeEntry(%d bytes) succeeded", len(bad))
		}
	}
	other := bytes.Clone(b)
	other[0] = 9
	if _, _, err := decodeEntry(other); err == nil {
		t.Fatal("unknown entry version decoded")
	}
}

func FuzzDecodeEntry(f *testing.F) {
	b := encodeEntry(sampleRecords())
	f.Add(b)
	f.Add(b[:entryHeaderLen])
	f.Fuzz(func(t *testing.T, b []byte) {
		_, recs, err := decodeEntry(b)
		if err != nil {
			return
		}
		// Applying garbage that decodes must fail cleanly, not panic.
		_, _ = image.NewImage("c").Apply(1, recs...)
	})
}
