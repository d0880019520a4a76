package image

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
)

func TestScramRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		&UserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256, Salt: []byte("salt"), StoredKey: bytes.Repeat([]byte{1}, 32), ServerKey: bytes.Repeat([]byte{2}, 32), Iterations: 8192},
		&UserScramCredentialRecord{Name: "b,=ob", Mechanism: ScramSHA512, Salt: []byte{0}, StoredKey: []byte{3}, ServerKey: []byte{4}, Iterations: 16384},
		&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512},
	} {
		b := EncodeRecord(r)
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("%s: DecodeRecord: %v", r.Type(), err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, r)
		}
		for i := range b {
			if _, err := DecodeRecord(b[:i]); err == nil {
				t.Fatalf("%s: prefix of %d bytes decoded", r.Type(), i)
			}
		}
	}
	if got := TypeUserScramCredential.String(); got != "UserScramCredentialRecord" {
		t.Errorf("type 11 is %q", got)
	}
	if got := TypeRemoveUserScramCredential.String(); got != "RemoveUserScramCredentialRecord" {
		t.Errorf("type 22 is %q", got)
	}
}

func TestScramImage(t *testing.T) {
	cred := func(user string, m int8, iter int32) *UserScramCredentialRecord {
		return &UserScramCredentialRecord{Name: user, Mechanism: m, Salt: []byte(user + "-salt"),
			StoredKey: []byte{byte(m), 1}, ServerKey: []byte{byte(m), 2}, Iterations: iter}
	}
	img := mustApply(t, NewImage("c"), 1, cred("bob", ScramSHA512, 4096), cred("alice", ScramSHA256, 8192), cred("alice", ScramSHA512, 4096))
	before := img
	img = mustApply(t, img, 2, cred("alice", ScramSHA256, 10000), &RemoveUserScramCredentialRecord{Name: "bob", Mechanism: ScramSHA512})

	if got := img.ScramUsers(); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("users %v, want [alice]", got)
	}
	cs := img.ScramCredentials("alice")
	if len(cs) != 2 || cs[0].Mechanism != ScramSHA256 || cs[0].Iterations != 10000 || cs[1].Mechanism != ScramSHA512 || cs[1].Iterations != 4096 {
		t.Fatalf("alice's credentials %+v", cs)
	}
	if c, ok := img.ScramCredential("alice", ScramSHA512); !ok || string(c.Salt) != "alice-salt" || !bytes.Equal(c.StoredKey, []byte{2, 1}) || !bytes.Equal(c.ServerKey, []byte{2, 2}) {
		t.Fatalf("alice SHA-512: %+v %v", c, ok)
	}
	// The earlier image is unchanged.
	if got := before.ScramUsers(); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("earlier image's users %v", got)
	}
	if c, _ := before.ScramCredential("alice", ScramSHA256); c.Iterations != 8192 {
		t.Fatalf("earlier image sees %d iterations", c.Iterations)
	}

	// Removing what is not there, an unknown mechanism and an empty name
	// are refused, and leave the image as it was.
	for _, bad := range []Record{
		&RemoveUserScramCredentialRecord{Name: "bob", Mechanism: ScramSHA512},
		&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 3},
		cred("carol", 0, 4096),
		cred("", ScramSHA256, 4096),
	} {
		if got, err := img.Apply(3, cred("dave", ScramSHA256, 4096), bad); err == nil || got != img {
			t.Fatalf("apply %#v: %v", bad, err)
		}
	}

	// A snapshot keeps them.
	got, err := DecodeImage(EncodeImage(img))
	if err != nil {
		t.Fatalf("DecodeImage: %v", err)
	}
	if !reflect.DeepEqual(got, img) {
		t.Fatalf("decoded image differs:\n got %+v\nwant %+v", got, img)
	}
	if !reflect.DeepEqual(got.Records(), img.Records()) {
		t.Fatal("records of the decoded image differ")
	}
}
