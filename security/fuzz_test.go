package security

import (
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
