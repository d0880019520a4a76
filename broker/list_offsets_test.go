package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestListOffsetsByTimestamp(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "times", 1, nil)
	cl := ts.client(t, kgo.DefaultProduceTopic("times"), kgo.ProducerLinger(0))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	// Ten batches of ten records, one second apart; record j of batch i has
	// timestamp base + i s + j ms.
	for i := 0; i < 10; i++ {
		var recs []*kgo.Record
		for j := 0; j < 10; j++ {
			recs = append(recs, &kgo.Record{Value: []byte{byte(i), byte(j)}, Timestamp: base.Add(time.Duration(i)*time.Second + time.Duration(j)*time.Millisecond)})
		}
		if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testContext(t)
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{
		{base.Add(-time.Minute), 0},
		{base, 0},
		{base.Add(3 * time.Second), 30},
		{base.Add(3*time.Second + 4*time.Millisecond), 34}, // inside a batch
		{base.Add(3*time.Second + 500*time.Millisecond), 40},
		{base.Add(9*time.Second + 9*time.Millisecond), 99},
		{base.Add(10 * time.Second), 100}, // none: kadm asks again for the end offset
	} {
		res, err := adm.ListOffsetsAfterMilli(ctx, tc.at.UnixMilli(), "times")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := res.Lookup("times", 0)
		if !ok || o.Err != nil {
			t.Fatalf("lookup %v: %v", tc.at, o.Err)
		}
		if o.Offset != tc.want {
			t.Errorf("offset after %v: %d, want %d", tc.at.Sub(base), o.Offset, tc.want)
		}
	}
	start, _ := adm.ListStartOffsets(ctx, "times")
	end, _ := adm.ListEndOffsets(ctx, "times")
	if o, _ := start.Lookup("times", 0); o.Offset != 0 {
		t.Errorf("start offset %d", o.Offset)
	}
	if o, _ := end.Lookup("times", 0); o.Offset != 100 {
		t.Errorf("end offset %d", o.Offset)
	}
	maxTS, err := adm.ListMaxTimestampOffsets(ctx, "times")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := maxTS.Lookup("times", 0); o.Offset != 99 || o.Timestamp != base.Add(9*time.Second+9*time.Millisecond).UnixMilli() {
		t.Errorf("max timestamp offset %d ts %d", o.Offset, o.Timestamp)
	}
}
