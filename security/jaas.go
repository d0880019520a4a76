package security

import (
	"errors"
	"fmt"
	"strings"
)

// JAASEntry is one login module of a JAAS config:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";
type JAASEntry struct {
	LoginModule string
	ControlFlag string // REQUIRED, REQUISITE, SUFFICIENT or OPTIONAL
	Options     map[string]string
}

// ParseJAAS parses the value of a sasl.jaas.config property as Kafka's
// JaasConfig does (a java.io.StreamTokenizer with // and /* */ comments,
// words of letters, digits, '.', '-', '_' and '$', quoted values with
// backslash escapes) and, as Kafka's JaasContext requires of a property,
// wants exactly one login module.
func ParseJAAS(text string) (JAASEntry, error) {
	t := &jaasTokenizer{s: text}
	var entries []JAASEntry
	for {
		tok, err := t.next()
		if err != nil {
			return JAASEntry{}, err
		}
		if tok.kind == tokEOF {
			break
		}
		e, err := parseJAASEntry(t, tok)
		if err != nil {
			return JAASEntry{}, err
		}
		entries = append(entries, e)
	}
	switch len(entries) {
	case 0:
		return JAASEntry{}, errors.New("JAAS config property does not contain any login modules")
	case 1:
		return entries[0], nil
	}
	return JAASEntry{}, fmt.Errorf("JAAS config property contains %d login modules, should be 1 module", len(entries))
}

func parseJAASEntry(t *jaasTokenizer, first jaasToken) (JAASEntry, error) {
	if first.kind != tokWord {
		return JAASEntry{}, errors.New("login module not specified in JAAS config")
	}
	e := JAASEntry{LoginModule: first.text, Options: map[string]string{}}
	flag, err := t.next()
	if err != nil {
		return e, err
	}
	if flag.kind == tokEOF {
		return e, errors.New("login module control flag not specified in JAAS config")
	}
	switch f := strings.ToUpper(flag.text); f {
	case "REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL":
		e.ControlFlag = f
	default:
		return e, fmt.Errorf("invalid login module control flag '%s' in JAAS config", flag.text)
	}
	for {
		key, err := t.next()
		if err != nil {
			return e, err
		}
		if key.kind == tokEOF {
			return e, errors.New("JAAS config entry not terminated by semi-colon")
		}
		if key.kind == tokSymbol && key.text == ";" {
			return e, nil
		}
		eq, err := t.next()
		if err != nil {
			return e, err
		}
		val, err := t.next()
		if err != nil {
			return e, err
		}
		if eq.kind != tokSymbol || eq.text != "=" || (val.kind != tokWord && val.kind != tokQuoted) {
			return e, fmt.Errorf("value not specified for key '%s' in JAAS config", key.text)
		}
		e.Options[key.text] = val.text
	}
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokWord
	tokQuoted
	tokSymbol
	tokNumber // StreamTokenizer parses a bare number, which has no string value
)

type jaasToken struct {
	kind tokKind
	text string
}

type jaasTokenizer struct {
	s string
	i int
}

func isWordStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '$' || c >= 0xa0
}

func isWordPart(c byte) bool { return isWordStart(c) || c >= '0' && c <= '9' || c == '.' }

func (t *jaasTokenizer) next() (jaasToken, error) {
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch {
		case c <= ' ':
			t.i++
		case strings.HasPrefix(t.s[t.i:], "//"):
			end := strings.IndexAny(t.s[t.i:], "\r\n")
			if end < 0 {
				t.i = len(t.s)
			} else {
				t.i += end
			}
		case strings.HasPrefix(t.s[t.i:], "/*"):
			end := strings.Index(t.s[t.i+2:], "*/")
			if end < 0 {
				t.i = len(t.s)
			} else {
				t.i += 2 + end + 2
			}
		case isWordStart(c):
			j := t.i
			for j < len(t.s) && isWordPart(t.s[j]) {
				j++
			}
			tok := jaasToken{kind: tokWord, text: t.s[t.i:j]}
			t.i = j
			return tok, nil
		case c >= '0' && c <= '9' || c == '.':
			j := t.i
			for j < len(t.s) && (t.s[j] >= '0' && t.s[j] <= '9' || t.s[j] == '.') {
				j++
			}
			t.i = j
			return jaasToken{kind: tokNumber}, nil
		case c == '"' || c == '\'':
			return t.quoted(c)
		default:
			t.i++
			return jaasToken{kind: tokSymbol, text: string(c)}, nil
		}
	}
	return jaasToken{kind: tokEOF}, nil
}

// quoted reads a quoted string as StreamTokenizer does: backslash
// escapes, ended by the quote or by the end of the line.
func (t *jaasTokenizer) quoted(q byte) (jaasToken, error) {
	var b strings.Builder
	t.i++
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch {
		case c == q:
			t.i++
			return jaasToken{kind: tokQuoted, text: b.String()}, nil
		case c == '\n' || c == '\r':
			return jaasToken{kind: tokQuoted, text: b.String()}, nil
		case c == '\\' && t.i+1 < len(t.s):
			t.i++
			switch e := t.s[t.i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'a':
				b.WriteByte(7)
			case 'v':
				b.WriteByte('\v')
			default:
				b.WriteByte(e)
			}
			t.i++
		default:
			b.WriteByte(c)
			t.i++
		}
	}
	return jaasToken{kind: tokQuoted, text: b.String()}, nil
}
