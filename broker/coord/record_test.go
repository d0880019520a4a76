package coord

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// javaHashReference computes String.hashCode the slow way: exact integer
// arithmetic reduced mod 2^32, then read as a signed 32-bit value.
func javaHashReference(s string) int32 {
	var h uint64
	for _, u := range utf16.Encode([]rune(s)) {
		h = (h*31 + uint64(u)) % (1 << 32)
	}
	return int32(uint32(h))
}

func TestPartitionFor(t *testing.T) {
	tests := []struct {
		group      string
		partitions int32
		want       int32
	}{
		{"", 50, 0},
		{"a", 50, 47},                   // 97
		{"Aa", 50, 12},                  // 2112, a known Java collision with "BB"
		{"BB", 50, 12},                  // 2112
		{"g1", 50, 42},                  // 'g'*31 + '1' = 3242
		{"é", 50, 33},                   // U+00E9 is one UTF-16 unit: 233
		{"😀", 50, 49},                   // surrogates D83D DE00: 55357*31 + 56832 = 1772899
		{"polygenelubricants", 50, 0},   // hashCode is Integer.MIN_VALUE; Utils.abs gives 0
		{"my-group", 50, 12},            // hashCode -1906497762: abs, not & 0x7fffffff (which gives 36)
		{"simple", 50, 26},              // hashCode -902286926
		{"console-consumer-1234", 4, 3}, // 836395459
		{"g1", 0, 0},
	}
	for _, tt := range tests {
		if got := PartitionFor(tt.group, tt.partitions); got != tt.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tt.group, tt.partitions, got, tt.want)
		}
	}
	for _, s := range []string{"", "a", "Aa", "g1", "é", "😀", "polygenelubricants", "my-group", "groupé", strings.Repeat("z", 1000)} {
		if got, want := javaStringHash(s), javaHashReference(s); got != want {
			t.Errorf("javaStringHash(%q) = %d, reference %d", s, got, want)
		}
	}
	if got := javaStringHash("polygenelubricants"); got != -2147483648 {
		t.Errorf("hash of polygenelubricants = %d, want Integer.MIN_VALUE", got)
	}
	if got := javaStringHash("my-group"); got != -1906497762 {
		t.Errorf("hash of my-group = %d, want -1906497762", got)
	}
}
