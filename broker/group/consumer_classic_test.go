package group

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// TestClassicMemberMetadataRecord: a classic member's
// ConsumerGroupMemberMetadataValue carries ClassicMemberMetadata as tagged
// field 0, a nullable struct (size counting the presence varint), in the
// bytes Kafka's generated code writes, and reads back.
func TestClassicMemberMetadataRecord(t *testing.T) {
	mem := &consumerMember{
		id: "m", clientID: "c", clientHost: "h", topicNames: []string{"t"}, rebalanceTimeoutMs: 1000,
		classic: &classicMeta{sessionTimeoutMs: 45000, protocols: []protocol{{name: "range", metadata: []byte{0, 1}}}},
	}
	r := cgMemberRecord("g", mem)
	want, _ := hex.DecodeString("0000" + // value version 0
		"00" + "00" + // instance id, rack id: null
		"0263" + "0268" + // client id "c", client host "h"
		"02" + "0274" + // subscribed topics ["t"]
		"00" + // regex: null
		"000003e8" + // rebalance timeout 1000
		"00" + // server assignor: null
		"01" + "00" + "11" + "01" + // one tagged field: tag 0, 17 bytes, present
		"0000afc8" + // session timeout 45000
		"02" + "0672616e6765" + "03" + "0001" + "00" + // [{range, 0x0001}]
		"00") // the struct's tagged fields
	if !bytes.Equal(r.Value, want) {
		t.Fatalf("value\n got %x\nwant %x", r.Value, want)
	}
	s, err := decodeCGMember(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	if !s.classic.equal(mem.classic) || s.clientID != "c" || len(s.topicNames) != 1 {
		t.Fatalf("decoded %+v (classic %+v)", s, s.classic)
	}
	// Without classic metadata there are no tagged fields.
	mem.classic = nil
	r = cgMemberRecord("g", mem)
	if r.Value[len(r.Value)-1] != 0 {
		t.Fatalf("a consumer member's record ends in %x, want no tagged fields", r.Value[len(r.Value)-1])
	}
	if s, err := decodeCGMember(r.Value); err != nil || s.classic != nil {
		t.Fatalf("decoded %+v %v, want no classic metadata", s, err)
	}
}
