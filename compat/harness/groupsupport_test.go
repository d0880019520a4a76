package harness

import "testing"

// TestGroupSupportsCoverClients: every client of the matrix says whether
// it has a share consumer and a streams-group client, in the table's
// order, so docs/compatibility.md has a row for each.
func TestGroupSupportsCoverClients(t *testing.T) {
	if len(GroupSupports) != len(Clients) {
		t.Fatalf("%d group support entries for %d clients", len(GroupSupports), len(Clients))
	}
	for i, c := range Clients {
		g := GroupSupports[i]
		if g.Client != c.Name || g.Share == "" || g.Streams == "" {
			t.Errorf("entry %d: %+v, want client %s with both columns", i, g, c.Name)
		}
	}
}
