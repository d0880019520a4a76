package main

import "testing"

func TestParseGroupSizes(t *testing.T) {
	got, err := parseGroupSizes("100x1000, 1000x10000")
	if err != nil || len(got) != 2 || got[0] != (groupSize{100, 1000}) || got[1] != (groupSize{1000, 10000}) {
		t.Fatalf("parseGroupSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "100", "x10", "0x10", "10x-1", "ax1"} {
		if _, err := parseGroupSizes(bad); err == nil {
			t.Errorf("parseGroupSizes(%q): no error", bad)
		}
	}
}

// TestIsStable: stable only when every member is at one epoch, holds
// something, and the members together hold each partition once.
func TestIsStable(t *testing.T) {
	a, b := [16]byte{1}, [16]byte{2}
	stable := []hbMember{
		{id: "m1", epoch: 3, owned: []tp{{a, 0}, {b, 1}}},
		{id: "m2", epoch: 3, owned: []tp{{a, 1}, {b, 0}}},
	}
	if !isStable(stable, 4) {
		t.Fatal("an exact cover at one epoch is not stable")
	}
	for name, ms := range map[string][]hbMember{
		"epochs differ":  {{epoch: 3, owned: []tp{{a, 0}, {b, 1}}}, {epoch: 2, owned: []tp{{a, 1}, {b, 0}}}},
		"not joined":     {{epoch: 0, owned: []tp{{a, 0}, {a, 1}, {b, 0}, {b, 1}}}, {epoch: 0}},
		"one holds none": {{epoch: 3, owned: []tp{{a, 0}, {a, 1}, {b, 0}, {b, 1}}}, {epoch: 3}},
		"held twice":     {{epoch: 3, owned: []tp{{a, 0}, {b, 1}}}, {epoch: 3, owned: []tp{{a, 0}, {a, 1}, {b, 0}}}},
		"one not held":   {{epoch: 3, owned: []tp{{a, 0}}}, {epoch: 3, owned: []tp{{a, 1}, {b, 0}}}},
	} {
		if isStable(ms, 4) {
			t.Errorf("%s: stable", name)
		}
	}
	// More members than partitions: some hold none.
	if !isStable([]hbMember{{epoch: 1, owned: []tp{{a, 0}}}, {epoch: 1}}, 1) {
		t.Error("two members over one partition, one idle: not stable")
	}
}

func TestOwnedTopics(t *testing.T) {
	a, b := [16]byte{1}, [16]byte{2}
	if got := ownedTopics(nil); got == nil || len(got) != 0 {
		t.Fatalf("ownedTopics(nil) = %#v, want an empty, non-nil list", got)
	}
	got := ownedTopics([]tp{{a, 0}, {b, 2}, {a, 1}})
	if len(got) != 2 || got[0].TopicID != a || len(got[0].Partitions) != 2 || got[1].TopicID != b || got[1].Partitions[0] != 2 {
		t.Fatalf("ownedTopics = %#v", got)
	}
}
