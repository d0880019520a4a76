package security

import (
	"os"
	"testing"

	"github.com/gregorbroker/gregor/config"
)

// FuzzParseJAAS: any text parses or fails, without a panic.
func FuzzParseJAAS(f *testing.F) {
	f.Add(`org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";`)
	f.Add(`a required x='y\` + "\n" + `'; /* c`)
	f.Fuzz(func(t *testing.T, s string) { ParseJAAS(s) })
}

// FuzzPrincipalMapper: any rules parse or fail, and any name maps or
// fails, without a panic.
func FuzzPrincipalMapper(f *testing.F) {
	f.Add(`RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT`, "CN=a,OU=b")
	f.Add(`RULE:(.*)/$123\$9/U`, "x")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := NewPrincipalMapper(rules)
		if err == nil {
			m.Name(dn)
		}
	})
}

// FuzzScram: any client messages fail or succeed, without a panic; a
// store that knows the user is used so the exchange goes past the
// first message.
func FuzzScram(f *testing.F) {
	cred, err := NewScramCredential(config.MechanismScramSHA256, "pw", []byte("salt"), 4096)
	if err != nil {
		f.Fatal(err)
	}
	m, err := NewScram(config.MechanismScramSHA256, oneUser{config.MechanismScramSHA256, "u", cred})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("n,,n=u,r=abc"), []byte("c=biws,r=abcdef,p=AAAA"))
	f.Add([]byte("n,a=u,m=x,n=u,r=abc,e=1"), []byte("c=,r=,p="))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s := m.Start()
		if _, _, err := s.Step(first); err == nil {
			s.Step(final)
		}
	})
}

// FuzzOAuthBearer: any client messages fail, are refused with a
// challenge, or succeed, without a panic, with both validators; a
// refused exchange's 0x01 answer fails it.
func FuzzOAuthBearer(f *testing.F) {
	const jaas = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="b" unsecuredValidatorRequiredScope="k";`
	unsecured, err := NewOAuthBearer(config.OAuthBearerSettings{Handler: config.OAuthBearerUnsecuredValidator, JAAS: jaas}, nil)
	if err != nil {
		f.Fatal(err)
	}
	jwks := f.TempDir() + "/jwks.json"
	if err := os.WriteFile(jwks, []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4","y":"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}]}`), 0o600); err != nil {
		f.Fatal(err)
	}
	jwt, err := NewOAuthBearer(config.OAuthBearerSettings{Handler: config.OAuthBearerJWTValidator, JAAS: jaas, JWKSURL: "file://" + jwks,
		ExpectedAudience: []string{"k"}, ExpectedIssuer: "i", SubClaimName: "sub", ScopeClaimName: "scope"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIiwiZXhwIjo5OTk5OTk5OTk5fQ.\x01\x01"))
	f.Add([]byte("n,a=x,\x01auth=Bearer eyJhbGciOiJFUzI1NiJ9.e30.AAAA\x01k=v\x01\x01"))
	f.Add([]byte("n,,\x01auth=Bearer a.b.c\x01\x01"))
	f.Fuzz(func(t *testing.T, first []byte) {
		for _, m := range []*OAuthBearer{unsecured, jwt} {
			s := m.Start()
			if reply, done, err := s.Step(first); err == nil && !done && len(reply) > 0 {
				if _, _, err := s.Step([]byte{1}); err == nil {
					t.Fatal("the 0x01 after a refusal did not fail the exchange")
				}
			}
		}
	})
}
