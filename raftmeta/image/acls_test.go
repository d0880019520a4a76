package image

import (
	"reflect"
	"testing"
)

// TestACLsApply adds and removes ACLs, checks that an image shares its ACL
// set until a record changes it, that an ID is unique and a removal names
// an existing ACL, and that a snapshot carries the ACLs.
func TestACLsApply(t *testing.T) {
	id1 := [16]byte{1}
	id2 := [16]byte{2}
	a1 := &AccessControlEntryRecord{ID: id1, ResourceType: 2, ResourceName: "t", PatternType: 3, Principal: "User:a", Host: "*", Operation: 3, PermissionType: 3}
	a2 := &AccessControlEntryRecord{ID: id2, ResourceType: 3, ResourceName: "g-", PatternType: 4, Principal: "User:*", Host: "10.0.0.1", Operation: 2, PermissionType: 2}
	img0 := NewImage("c")
	img1, err := img0.Apply(1, a1, a2)
	if err != nil {
		t.Fatal(err)
	}
	if img0.ACLs().Len() != 0 || img1.ACLs().Len() != 2 {
		t.Fatalf("ACL counts %d, %d; want 0, 2", img0.ACLs().Len(), img1.ACLs().Len())
	}
	if got, ok := img1.ACLs().Get(id2); !ok || got != *a2 {
		t.Fatalf("Get(id2) = %+v, %v", got, ok)
	}
	img2, err := img1.Apply(2, &FeatureLevelRecord{Name: "x", Level: 1})
	if err != nil {
		t.Fatal(err)
	}
	if img2.ACLs() != img1.ACLs() {
		t.Error("a record that changes no ACL replaced the ACL set")
	}
	if _, err := img1.Apply(3, a1); err == nil {
		t.Error("an ACL with an existing ID was accepted")
	}
	if _, err := img1.Apply(3, &RemoveAccessControlEntryRecord{ID: [16]byte{9}}); err == nil {
		t.Error("removing an unknown ACL was accepted")
	}
	dec, err := DecodeImage(EncodeImage(img1))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec.ACLs().All(), img1.ACLs().All()) {
		t.Errorf("snapshot ACLs %+v, want %+v", dec.ACLs().All(), img1.ACLs().All())
	}
	img3, err := img1.Apply(3, &RemoveAccessControlEntryRecord{ID: id1})
	if err != nil {
		t.Fatal(err)
	}
	if all := img3.ACLs().All(); len(all) != 1 || all[0] != *a2 || img1.ACLs().Len() != 2 {
		t.Errorf("after removal: %+v (old image %d)", all, img1.ACLs().Len())
	}
}
