package protocol

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A request made by AppendRequest parses back as the broker reads it, in
// both header versions.
func TestAppendRequestParses(t *testing.T) {
	for _, version := range []int16{4, 12} { // Fetch v4: header v1; v12: flexible, header v2
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		req.MaxWaitMillis = 321
		frame := AppendRequest([]byte("xx"), 77, "follower-1", req)
		if !bytes.HasPrefix(frame, []byte("xx")) {
			t.Fatalf("v%d: dst's bytes overwritten", version)
		}
		body, err := ReadFrame(bytes.NewReader(frame[2:]), DefaultMaxRequestSize, nil)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		h, got, err := ParseRequest(body)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if h.CorrelationID != 77 || h.ClientID == nil || *h.ClientID != "follower-1" || h.Version != version {
			t.Fatalf("v%d: header %+v", version, h)
		}
		if f := got.(*kmsg.FetchRequest); f.MaxWaitMillis != 321 {
			t.Fatalf("v%d: MaxWaitMillis %d", version, f.MaxWaitMillis)
		}
	}
}

// ReadResponse reads what AppendResponse writes (flexible headers, and
// ApiVersions' v0 header at a flexible version), reusing buf, and refuses
// another request's answer and a frame too short or too large.
func TestReadResponse(t *testing.T) {
	for _, version := range []int16{4, 12} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(version)
		resp.ThrottleMillis = 9
		buf := make([]byte, 0, 4096)
		frame, got, err := ReadResponse(bytes.NewReader(AppendResponse(nil, 5, resp)), 1<<20, buf, 5, req)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if &frame[0] != &buf[:1][0] {
			t.Fatalf("v%d: buf not reused", version)
		}
		if got.(*kmsg.FetchResponse).ThrottleMillis != 9 {
			t.Fatalf("v%d: ThrottleMillis %d", version, got.(*kmsg.FetchResponse).ThrottleMillis)
		}
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	avResp := kmsg.NewPtrApiVersionsResponse()
	avResp.SetVersion(3)
	avResp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 1, MaxVersion: 17}}
	_, got, err := ReadResponse(bytes.NewReader(AppendResponse(nil, 1, avResp)), 1<<20, nil, 1, av)
	if err != nil {
		t.Fatal(err)
	}
	if k := got.(*kmsg.ApiVersionsResponse).ApiKeys; len(k) != 1 || k[0].MaxVersion != 17 {
		t.Fatalf("ApiVersions keys %+v", k)
	}

	req := kmsg.NewPtrMetadataRequest()
	resp := kmsg.NewPtrMetadataResponse()
	if _, _, err := ReadResponse(bytes.NewReader(AppendResponse(nil, 2, resp)), 1<<20, nil, 3, req); err == nil || !strings.Contains(err.Error(), "correlation id 2, want 3") {
		t.Fatalf("another request's answer: %v", err)
	}
	if _, _, err := ReadResponse(bytes.NewReader([]byte{0, 0, 0, 2, 0, 0}), 1<<20, nil, 0, req); !errors.Is(err, ErrFrameSize) {
		t.Fatalf("2-byte frame: %v", err)
	}
	if _, _, err := ReadResponse(bytes.NewReader(AppendResponse(nil, 2, resp)), 3, nil, 2, req); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("frame over max: %v", err)
	}
}
