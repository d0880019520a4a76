package image

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
)

// imageWithTopics is an image of n one-partition topics.
func imageWithTopics(tb testing.TB, n int) *Image {
	tb.Helper()
	var recs []Record
	for i := range n {
		recs = append(recs, createTopicRecords(fmt.Sprintf("t%d", i), uint64(i)+1)...)
	}
	img, err := NewImage("c").Apply(1, recs...)
	if err != nil {
		tb.Fatal(err)
	}
	return img
}

// createTopicRecords are the records of a one-partition topic.
func createTopicRecords(name string, seq uint64) []Record {
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], seq)
	id[15] = 1
	return []Record{
		&TopicRecord{Name: name, ID: id},
		&PartitionRecord{TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	}
}

// BenchmarkApplyCreateTopic: applying one CreateTopics of one partition
// to an image of n topics, as every node does for each committed entry.
func BenchmarkApplyCreateTopic(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			img := imageWithTopics(b, n)
			recs := createTopicRecords("new", uint64(n)+1)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := img.Apply(img.Offset()+1, recs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDiffTopics: what a metadata watcher pays to find the topic one
// CreateTopics added to an image of n topics.
func BenchmarkDiffTopics(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			img := imageWithTopics(b, n)
			next, err := img.Apply(img.Offset()+1, createTopicRecords("new", uint64(n)+1)...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if d := DiffTopics(img, next); len(d.Created) != 1 {
					b.Fatalf("%d created", len(d.Created))
				}
			}
		})
	}
}

// TestApplyCopiesOnlyWhatChanges: images share the topics no record
// touched (cowmap), and an Apply never changes the image it starts from,
// whether it creates, deletes or fails half way.
func TestApplyCopiesOnlyWhatChanges(t *testing.T) {
	const n = 1000
	base := imageWithTopics(t, n)
	next, err := base.Apply(base.Offset()+1, createTopicRecords("added", n+1)...)
	if err != nil {
		t.Fatal(err)
	}
	victim, _ := base.Topic("t7")
	gone, err := next.Apply(next.Offset()+1, &RemoveTopicRecord{TopicID: victim.ID})
	if err != nil {
		t.Fatal(err)
	}
	// The second record fails: nothing of the first may show.
	if _, err := gone.Apply(gone.Offset()+1, append(createTopicRecords("half", n+2), &TopicRecord{Name: "t8", ID: [16]byte{9}})...); err == nil {
		t.Fatal("a duplicate topic was applied")
	}
	for _, c := range []struct {
		img         *Image
		num         int
		added, t7ok bool
	}{{base, n, false, true}, {next, n + 1, true, true}, {gone, n, true, false}} {
		if c.img.NumTopics() != c.num || len(c.img.Topics()) != c.num || len(c.img.TopicNames()) != c.num {
			t.Errorf("image at %d: %d topics (%d listed), want %d", c.img.Offset(), c.img.NumTopics(), len(c.img.Topics()), c.num)
		}
		if _, ok := c.img.Topic("added"); ok != c.added {
			t.Errorf("image at %d: added present %v", c.img.Offset(), ok)
		}
		if _, ok := c.img.TopicByID(victim.ID); ok != c.t7ok {
			t.Errorf("image at %d: t7 present %v", c.img.Offset(), ok)
		}
		if _, ok := c.img.Topic("half"); ok {
			t.Errorf("image at %d: a failed Apply's topic shows", c.img.Offset())
		}
		names := c.img.TopicNames()
		for i := 1; i < len(names); i++ {
			if names[i-1] >= names[i] {
				t.Fatalf("image at %d: names not sorted at %d", c.img.Offset(), i)
			}
		}
	}
	a, _ := base.Topic("t500")
	b, _ := gone.Topic("t500")
	if a != b {
		t.Error("an untouched topic was copied")
	}
	if d := DiffTopics(base, gone); len(d.Created) != 1 || len(d.Deleted) != 1 || len(d.Changed) != 0 {
		t.Errorf("diff: %d created, %d deleted, %d changed", len(d.Created), len(d.Deleted), len(d.Changed))
	}
}

// TestChangedTopicNames: the topics a create, a change and a deletion
// touched, and nothing else, whatever lies between the two images; every
// topic against the empty image or an image decoded anew (it shares
// nothing).
func TestChangedTopicNames(t *testing.T) {
	const n = 1000
	base := imageWithTopics(t, n)
	t3, _ := base.Topic("t3")
	t7, _ := base.Topic("t7")
	next, err := base.Apply(base.Offset()+1, createTopicRecords("added", n+1)...)
	if err != nil {
		t.Fatal(err)
	}
	next, err = next.Apply(next.Offset()+1, &PartitionChangeRecord{TopicID: t3.ID, Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}})
	if err != nil {
		t.Fatal(err)
	}
	last, err := next.Apply(next.Offset()+1, &RemoveTopicRecord{TopicID: t7.ID})
	if err != nil {
		t.Fatal(err)
	}
	changed := func(prev, img *Image) []string {
		names := slices.Collect(img.ChangedTopicNames(prev))
		slices.Sort(names)
		return names
	}
	for _, c := range []struct {
		prev, img *Image
		want      []string
	}{
		{base, last, []string{"added", "t3", "t7"}},
		{last, base, []string{"added", "t3", "t7"}},
		{next, last, []string{"t7"}},
		{base, base, nil},
		{last, last.WithOffset(last.Offset() + 1), nil},
	} {
		if got := changed(c.prev, c.img); !slices.Equal(got, c.want) {
			t.Errorf("from %d to %d: %v, want %v", c.prev.Offset(), c.img.Offset(), got, c.want)
		}
	}
	if got := changed(nil, base); len(got) != n {
		t.Errorf("against no image: %d names, want %d", len(got), n)
	}
	decoded, err := DecodeImage(EncodeImage(base))
	if err != nil {
		t.Fatal(err)
	}
	if got := changed(base, decoded); len(got) != n {
		t.Errorf("against a decoded copy: %d names, want every one of %d", len(got), n)
	}
}

// BenchmarkChangedTopicNames: what the metadata watcher pays to find the
// topic one CreateTopics added to an image of n topics (DiffTopics walks
// every topic).
func BenchmarkChangedTopicNames(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			img := imageWithTopics(b, n)
			next, err := img.Apply(img.Offset()+1, createTopicRecords("new", uint64(n)+1)...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				count := 0
				for range next.ChangedTopicNames(img) {
					count++
				}
				if count != 1 {
					b.Fatalf("%d changed", count)
				}
			}
		})
	}
}
