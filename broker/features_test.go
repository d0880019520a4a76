package broker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestApiVersionsFeatures: ApiVersions v4 lists every supported feature
// and finalizes metadata.version at 4.0-IV3 (25), group.version 1,
// share.version 1, streams.version 1 and transaction.version 2, not
// kraft.version (level 0, a static quorum).
func TestApiVersionsFeatures(t *testing.T) {
	ts := startServer(t, "")
	cl := ts.client(t)
	for _, tc := range []struct {
		version              int16
		supported, finalized []string
	}{
		{4, []string{"group.version 0-1", "kraft.version 0-0", "metadata.version 25-25", "share.version 0-1", "streams.version 0-1", "transaction.version 0-2"},
			[]string{"group.version 1", "metadata.version 25", "share.version 1", "streams.version 1", "transaction.version 2"}},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = tc.version
		req.ClientSoftwareName, req.ClientSoftwareVersion = "gregor-test", "1"
		resp, err := cl.Broker(1).RetriableRequest(testContext(t), req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.ApiVersionsResponse)
		var sup, fin []string
		for _, f := range r.SupportedFeatures {
			sup = append(sup, fmt.Sprintf("%s %d-%d", f.Name, f.MinVersion, f.MaxVersion))
		}
		for _, f := range r.FinalizedFeatures {
			if f.MinVersionLevel != f.MaxVersionLevel {
				t.Errorf("v%d: %s finalized %d-%d", tc.version, f.Name, f.MinVersionLevel, f.MaxVersionLevel)
			}
			fin = append(fin, fmt.Sprintf("%s %d", f.Name, f.MaxVersionLevel))
		}
		slices.Sort(sup)
		slices.Sort(fin)
		if !slices.Equal(sup, tc.supported) || !slices.Equal(fin, tc.finalized) {
			t.Errorf("v%d: supported %q finalized %q; want %q and %q", tc.version, sup, fin, tc.supported, tc.finalized)
		}
	}
}
