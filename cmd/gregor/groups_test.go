package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestGroupRows(t *testing.T) {
	d := describedGroup{
		name:  "g1",
		state: "Stable",
		members: []groupMember{
			{id: "m1", host: "/10.0.0.1", client: "c1", assigned: map[string][]int32{"t1": {1, 0}}},
			{id: "m2", host: "/10.0.0.2", client: "c2", assigned: map[string][]int32{"t2": {0}}},
		},
		committed: map[string]map[int32]int64{"t1": {0: 10, 1: 25}, "old": {3: 7}},
		logEnd:    map[string]map[int32]int64{"t1": {0: 15, 1: 20}, "t2": {0: 9}, "old": {3: -1}},
	}
	want := []groupRow{
		{"old", 3, "7", "-", "-", "-", "-", "-"},
		{"t1", 0, "10", "15", "5", "m1", "/10.0.0.1", "c1"},
		// A commit ahead of the end offset (a truncated log) is no lag.
		{"t1", 1, "25", "20", "0", "m1", "/10.0.0.1", "c1"},
		{"t2", 0, "-", "9", "-", "m2", "/10.0.0.2", "c2"},
	}
	got := groupRows(d)
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	var b bytes.Buffer
	if err := printGroup(&b, d); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 || strings.Fields(lines[0])[0] != "GROUP" || strings.Join(strings.Fields(lines[2]), " ") != "g1 t1 0 10 15 5 m1 /10.0.0.1 c1" {
		t.Errorf("output:\n%s", b.String())
	}

	b.Reset()
	d.members = nil
	if err := printGroup(&b, d); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "Consumer group 'g1' has no active members.") {
		t.Errorf("empty group output:\n%s", b.String())
	}
}

// TestGroupsArgs: mistakes on the command line of `gregor group` (and
// its old name `gregor groups`) are usage errors, exit status 2, named
// before any connection is tried.
func TestGroupsArgs(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"groups"}, "group needs a subcommand"},
		{[]string{"group", "describe"}, "needs GROUP..."},
		{[]string{"groups", "list", "extra"}, `unexpected argument "extra"`},
		{[]string{"group", "frob"}, `unknown command "frob" for gregor group`},
		{[]string{"group", "list", "--brokers", " , "}, "names no broker"},
		{[]string{"group", "describe", "g", "--nope"}, "unknown flag --nope"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := runMain(tt.args, nil, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut.String(), tt.want)
		}
	}
}
