package image

import (
	"reflect"
	"testing"
)

func TestClientQuotaRecordRoundTrip(t *testing.T) {
	for _, r := range []*ClientQuotaRecord{
		{Entity: []QuotaEntityData{{Type: QuotaUser, Name: strp("alice")}, {Type: QuotaClientID, Name: nil}}, Key: "producer_byte_rate", Value: 1048576},
		{Entity: []QuotaEntityData{{Type: QuotaIP, Name: strp("10.0.0.1")}}, Key: "connection_creation_rate", Value: 0.5, Remove: true},
	} {
		b := EncodeRecord(r)
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
		}
		for i := range b {
			if _, err := DecodeRecord(b[:i]); err == nil {
				t.Fatalf("prefix of %d bytes decoded", i)
			}
		}
	}
}

func TestClientQuotaImage(t *testing.T) {
	alice := []QuotaEntityData{{Type: QuotaUser, Name: strp("alice")}}
	aliceAnyClient := []QuotaEntityData{{Type: QuotaClientID, Name: nil}, {Type: QuotaUser, Name: strp("alice")}}
	img := mustApply(t, NewImage("c"), 1,
		&ClientQuotaRecord{Entity: alice, Key: "producer_byte_rate", Value: 1000},
		&ClientQuotaRecord{Entity: alice, Key: "consumer_byte_rate", Value: 2000},
		&ClientQuotaRecord{Entity: aliceAnyClient, Key: "producer_byte_rate", Value: 500},
	)
	before := img
	img = mustApply(t, img, 2,
		&ClientQuotaRecord{Entity: alice, Key: "producer_byte_rate", Remove: true},
		&ClientQuotaRecord{Entity: aliceAnyClient, Key: "producer_byte_rate", Remove: true},
	)
	ea, _ := QuotaEntityOf(alice)
	eac, _ := QuotaEntityOf(aliceAnyClient)
	if got := img.ClientQuotas(ea); !reflect.DeepEqual(got, map[string]float64{"consumer_byte_rate": 2000}) {
		t.Fatalf("alice's quotas %v", got)
	}
	if got := img.ClientQuotas(eac); got != nil || len(img.QuotaEntities()) != 1 {
		t.Fatalf("alice's default-client quotas %v, entities %v", got, img.QuotaEntities())
	}
	if got := before.ClientQuotas(ea); len(got) != 2 || len(before.QuotaEntities()) != 2 {
		t.Fatalf("earlier image changed: %v", got)
	}
	if got, want := eac.String(), "ClientQuotaEntity(entries={user=alice, client-id=null})"; got != want {
		t.Errorf("entity string %q, want %q", got, want)
	}
	for _, bad := range [][]QuotaEntityData{
		nil,
		{{Type: "group", Name: strp("g")}},
		{{Type: QuotaUser, Name: strp("a")}, {Type: QuotaUser, Name: nil}},
		{{Type: QuotaUser, Name: strp("")}},
	} {
		if _, err := img.Apply(3, &ClientQuotaRecord{Entity: bad, Key: "k", Value: 1}); err == nil {
			t.Errorf("entity %v applied", bad)
		}
	}
	got, err := DecodeImage(EncodeImage(before))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, before) {
		t.Fatalf("decoded image differs:\n got %+v\nwant %+v", got, before)
	}
}
