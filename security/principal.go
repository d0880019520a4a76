package security

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Principal is who a connection acts as, Kafka's KafkaPrincipal: always
// of type User for the principals Gregor builds.
type Principal struct {
	Type string
	Name string
}

// Anonymous is the principal of a PLAINTEXT connection, and of a TLS one
// without a client certificate, as in Kafka.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// User is the principal of the named user.
func User(name string) Principal { return Principal{Type: "User", Name: name} }

// String is Kafka's "User:name" form, as ACLs name principals.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// writes by keyword; it writes every other one as its OID and the hex of
// its DER value, and so does SubjectDN, since principal mapping rules are
// written against Java's form.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.6":                    "C",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// SubjectDN is a certificate's subject as Java's
// X500Principal.getName() (RFC 2253) writes it: the most specific RDN
// first, multi-valued RDNs joined with '+'.
func SubjectDN(cert *x509.Certificate) (string, error) {
	var seq pkix.RDNSequence
	if _, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil {
		return "", fmt.Errorf("parse certificate subject: %w", err)
	}
	// The raw values are needed for the hex form.
	var raw []asn1.RawValue
	if _, err := asn1.Unmarshal(cert.RawSubject, &raw); err != nil {
		return "", fmt.Errorf("parse certificate subject: %w", err)
	}
	var rdns []string
	for i := len(seq) - 1; i >= 0; i-- {
		var atvs []struct {
			Type  asn1.ObjectIdentifier
			Value asn1.RawValue
		}
		if _, err := asn1.UnmarshalWithParams(raw[i].FullBytes, &atvs, "set"); err != nil {
			return "", fmt.Errorf("parse certificate subject: %w", err)
		}
		var parts []string
		for j, atv := range seq[i] {
			oid := atv.Type.String()
			kw, known := rfc2253Keywords[oid]
			s, isString := atv.Value.(string)
			if known && isString {
				parts = append(parts, kw+"="+escapeDNValue(s))
				continue
			}
			name := kw
			if !known {
				name = oid
			}
			parts = append(parts, name+"=#"+hex.EncodeToString(atvs[j].Value.FullBytes))
		}
		rdns = append(rdns, strings.Join(parts, "+"))
	}
	return strings.Join(rdns, ","), nil
}

// escapeDNValue escapes an attribute value as RFC 2253 section 2.4 asks.
func escapeDNValue(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case strings.ContainsRune(`,+"\<>;`, r),
			i == 0 && (r == ' ' || r == '#'),
			i == len(s)-1 && r == ' ':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// PrincipalMapper is Kafka's SslPrincipalMapper: ssl.principal.mapping.rules
// turning a certificate's subject into a principal name.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	dflt         bool
	pattern      *regexp.Regexp // anchored: Java's Matcher.matches
	find         *regexp.Regexp // unanchored: Java's replaceAll
	replacement  string         // in Go's Expand syntax
	lower, upper bool
	text         string
}

// Kafka's RULE_PATTERN and RULE_SPLITTER.
const rulePattern = `(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)`

var (
	ruleSplitter = regexp.MustCompile(`\s*(` + rulePattern + `)\s*(,\s*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// NewPrincipalMapper parses ssl.principal.mapping.rules.
func NewPrincipalMapper(rules string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{}
	for _, sm := range ruleSplitter.FindAllStringSubmatch(strings.TrimSpace(rules), -1) {
		rule := sm[1]
		pm := ruleParser.FindStringSubmatchIndex(rule)
		if pm == nil {
			return nil, fmt.Errorf("invalid rule: %s", rule)
		}
		if pm[1] != len(rule) {
			return nil, fmt.Errorf("invalid rule: `%s`, unmatched substring: `%s`", rule, rule[pm[1]:])
		}
		group := func(n int) (string, bool) {
			if pm[2*n] < 0 {
				return "", false
			}
			return rule[pm[2*n]:pm[2*n+1]], true
		}
		if _, ok := group(1); ok {
			m.rules = append(m.rules, mappingRule{dflt: true, text: "DEFAULT"})
			continue
		}
		pat, ok := group(2)
		if !ok {
			continue // empty rules are ignored, as in Kafka
		}
		repl, _ := group(4)
		flag, _ := group(6)
		find, err := regexp.Compile(pat)
		if err != nil {
			return nil, fmt.Errorf("invalid rule %s: %w", rule, err)
		}
		anchored := regexp.MustCompile(`^(?:` + pat + `)$`)
		m.rules = append(m.rules, mappingRule{
			pattern: anchored, find: find, replacement: javaReplacement(repl, find.NumSubexp()),
			lower: flag == "L", upper: flag == "U", text: rule,
		})
	}
	return m, nil
}

// javaReplacement turns a Java replacement string ($1, \$ for a dollar)
// into Go's Expand form, with Kafka's rule for back references beyond the
// groups: $123 with 12 groups is group 12 then "3"; with no such group at
// all, the text stays literal.
func javaReplacement(s string, groups int) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == '$' {
				b.WriteString("$$")
			} else {
				b.WriteByte(s[i])
			}
		case c == '$':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			digits := s[i+1 : j]
			// The longest prefix naming an existing group.
			k := len(digits)
			for k > 0 {
				n, _ := strconv.Atoi(digits[:k])
				if n <= groups {
					break
				}
				k--
			}
			if k == 0 {
				b.WriteString("$$")
				continue
			}
			b.WriteString("${" + digits[:k] + "}")
			b.WriteString(digits[k:])
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Name maps a distinguished name by the first rule that matches it.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if r.dflt {
			return dn, nil
		}
		if !r.pattern.MatchString(dn) {
			continue
		}
		out := r.find.ReplaceAllString(dn, r.replacement)
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	texts := make([]string, len(m.rules))
	for i, r := range m.rules {
		texts[i] = r.text
	}
	return "", fmt.Errorf("no rules apply to %s, rules %v", dn, texts)
}

// CertificatePrincipal is the principal of a TLS client: User:ANONYMOUS
// without a certificate, else its subject mapped by m.
func (m *PrincipalMapper) CertificatePrincipal(chain []*x509.Certificate) (Principal, error) {
	if len(chain) == 0 {
		return Anonymous, nil
	}
	dn, err := SubjectDN(chain[0])
	if err != nil {
		return Principal{}, err
	}
	name, err := m.Name(dn)
	if err != nil {
		return Principal{}, err
	}
	return User(name), nil
}
