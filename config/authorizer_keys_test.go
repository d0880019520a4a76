package config

import (
	"strings"
	"testing"
)

// TestAuthorizerKeys: Kafka's StandardAuthorizer is read with its
// settings, no authorizer is the default, and any other class stops
// start-up with a message naming the property.
func TestAuthorizerKeys(t *testing.T) {
	b, _, err := Parse(map[string]string{
		"authorizer.class.name":          StandardAuthorizer,
		"super.users":                    "User:admin;User:ops",
		"allow.everyone.if.no.acl.found": "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Authorizer{ClassName: StandardAuthorizer, SuperUsers: "User:admin;User:ops", AllowEveryoneIfNoACLFound: true}
	if b.Authorizer != want || !b.Authorizer.Enabled() {
		t.Errorf("Authorizer = %+v, want %+v", b.Authorizer, want)
	}
	if b, _, err := Parse(map[string]string{}); err != nil || b.Authorizer.Enabled() || b.Authorizer.AllowEveryoneIfNoACLFound {
		t.Errorf("default Authorizer = %+v, %v", b.Authorizer, err)
	}
	for _, class := range []string{"kafka.security.authorizer.AclAuthorizer", "com.example.MyAuthorizer"} {
		_, _, err := Parse(map[string]string{"authorizer.class.name": class})
		if err == nil || !strings.Contains(err.Error(), "authorizer.class.name") || !strings.Contains(err.Error(), StandardAuthorizer) {
			t.Errorf("authorizer.class.name=%s: %v", class, err)
		}
	}
}
