package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf builds a request as a client would: the header of the request's
// header version, then the body.
func frameOf(req kmsg.Request, corr int32, clientID *string) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func TestParseRequestRoundTrip(t *testing.T) {
	id := "client-1"
	for _, v := range []int16{0, 1, 4, 9, 12, 13} {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		topic := "orders"
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		h, got, err := ParseRequest(frameOf(req, 77, &id))
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if h.Key != 3 || h.Version != v || h.CorrelationID != 77 || h.ClientID == nil || *h.ClientID != id {
			t.Fatalf("v%d: header %+v", v, h)
		}
		m := got.(*kmsg.MetadataRequest)
		if len(m.Topics) != 1 || *m.Topics[0].Topic != "orders" {
			t.Fatalf("v%d: topics %+v", v, m.Topics)
		}
	}
}

func TestParseRequestNullClientIDAndTags(t *testing.T) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName = "gregor-test"
	req.ClientSoftwareVersion = "1"
	frame := frameOf(req, 5, nil)
	h, got, err := ParseRequest(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClientID != nil || got.(*kmsg.ApiVersionsRequest).ClientSoftwareName != "gregor-test" {
		t.Fatalf("got %+v %+v", h, got)
	}
	// A header tag section with one tag of 3 bytes must be skipped.
	var b []byte
	b = append(b, frame[:10]...)          // key, version, corr, null client id
	b = append(b, 1, 7, 3, 'a', 'b', 'c') // one tag
	b = append(b, frame[11:]...)
	if _, got, err = ParseRequest(b); err != nil || got.(*kmsg.ApiVersionsRequest).ClientSoftwareName != "gregor-test" {
		t.Fatalf("with header tag: %v", err)
	}
}

func TestParseRequestMalformed(t *testing.T) {
	for name, frame := range map[string][]byte{
		"short":            {0, 3, 0},
		"unknown key":      {0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff},
		"client id length": {0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 'x'},
		"negative id len":  {0, 3, 0, 1, 0, 0, 0, 1, 0x80, 0x00},
		"body truncated":   {0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 9},
		"tag past end":     {0, 18, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 1, 1, 50},
	} {
		if _, _, err := ParseRequest(frame); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestReadFrame(t *testing.T) {
	var in bytes.Buffer
	in.Write([]byte{0, 0, 0, 3, 'a', 'b', 'c'})
	in.Write([]byte{0, 0, 0x10, 0}) // 4096 > max below
	f, err := ReadFrame(&in, 100, nil)
	if err != nil || string(f) != "abc" {
		t.Fatalf("frame %q %v", f, err)
	}
	if _, err := ReadFrame(&in, 100, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 100, nil); !errors.Is(err, ErrFrameSize) {
		t.Fatalf("negative size: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 9, 1}), 100, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestAppendResponseHeaders(t *testing.T) {
	// Flexible responses carry a tag byte after the correlation id, except
	// ApiVersions, whose response header is always v0.
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(12)
	b := AppendResponse(nil, 9, md)
	if int(binary.BigEndian.Uint32(b)) != len(b)-4 || binary.BigEndian.Uint32(b[4:]) != 9 || b[8] != 0 {
		t.Fatalf("metadata frame % x", b[:9])
	}
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(3)
	av.ErrorCode = 35
	b = AppendResponse(nil, 9, av)
	if binary.BigEndian.Uint16(b[8:]) != 35 {
		t.Fatalf("api versions header not v0: % x", b[:10])
	}
}

func TestVersionsTable(t *testing.T) {
	var v Versions
	v.Register(0, 0, 13)
	v.Register(18, 0, 4)
	if !v.Supports(0, 13) || v.Supports(0, 14) || v.Supports(1, 4) {
		t.Fatal("supports")
	}
	keys := v.Keys()
	if len(keys) != 2 || keys[0].ApiKey != 0 || keys[1].ApiKey != 18 || keys[1].MaxVersion != 4 {
		t.Fatalf("keys %+v", keys)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering beyond kmsg's max did not panic")
		}
	}()
	v.Register(1, 0, 99)
}

func FuzzParseRequest(f *testing.F) {
	id := "c"
	for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrApiVersionsRequest()} {
		for _, v := range []int16{0, 3, 9, req.MaxVersion()} {
			if v > req.MaxVersion() {
				continue
			}
			req.SetVersion(v)
			f.Add(frameOf(req, 1, &id))
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, err := ParseRequest(frame)
		if err == nil && (req == nil || req.Key() != h.Key) {
			t.Fatalf("parsed without a request: %+v", h)
		}
	})
}
