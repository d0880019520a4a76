package protocol

import (
	"reflect"
	"testing"
)

// TestRecompressBatchLevel: each codec's level changes the size of the
// re-encoded batch the way the codec promises (a higher level is no
// larger, and the extremes differ), the records read back unchanged, and
// the default level encodes as RecompressBatch does.
func TestRecompressBatchLevel(t *testing.T) {
	recs, raw := streamRecords()
	src := batchOf(t, CodecNone, int32(len(recs)), raw)
	for _, tt := range []struct {
		c           Codec
		fast, small int
	}{
		{CodecGzip, 1, 9},
		{CodecLZ4, 9, 17}, // 9 is the fast mode, as in Kafka
		{CodecZstd, -5, 19},
	} {
		size := func(level int) int {
			out, err := RecompressBatchLevel(src, tt.c, level, 1<<20, 1<<20)
			if err != nil {
				t.Fatalf("%s level %d: %v", tt.c, level, err)
			}
			var back []Record
			if err := DecodeBatch(out, 1<<20, func(_ *BatchHeader, r Record) error { back = append(back, r); return nil }); err != nil {
				t.Fatalf("%s level %d: %v", tt.c, level, err)
			}
			if !reflect.DeepEqual(back, recs) {
				t.Fatalf("%s level %d: records changed", tt.c, level)
			}
			return len(out)
		}
		fast, small, dflt := size(tt.fast), size(tt.small), size(DefaultLevel(tt.c))
		t.Logf("%s: level %d %d bytes, level %d %d bytes, default %d bytes (uncompressed %d)", tt.c, tt.fast, fast, tt.small, small, dflt, len(src))
		if small >= fast {
			t.Errorf("%s: level %d gives %d bytes, level %d %d: the level is not applied", tt.c, tt.small, small, tt.fast, fast)
		}
		plain, err := RecompressBatch(src, tt.c, 1<<20, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(plain) != dflt {
			t.Errorf("%s: RecompressBatch %d bytes, the default level %d", tt.c, len(plain), dflt)
		}
	}
}
