package config

import (
	"maps"
	"strings"
	"testing"
)

func TestReadProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"equals", "a=b", map[string]string{"a": "b"}},
		{"colon", "a:b", map[string]string{"a": "b"}},
		{"blank separator", "a b", map[string]string{"a": "b"}},
		{"spaces around equals", "  a  =  b  ", map[string]string{"a": "b  "}},
		{"blank then separator", "a \t: b", map[string]string{"a": "b"}},
		{"second separator is value", "a==b", map[string]string{"a": "=b"}},
		{"colon in value", "listeners=PLAINTEXT://:9092", map[string]string{"listeners": "PLAINTEXT://:9092"}},
		{"hash comment", "# a=b\nc=d", map[string]string{"c": "d"}},
		{"bang comment", "  ! a=b\nc=d", map[string]string{"c": "d"}},
		{"hash inside value", "a=b#c", map[string]string{"a": "b#c"}},
		{"blank lines", "\n\n  \t\na=b\n\n", map[string]string{"a": "b"}},
		{"key only", "a", map[string]string{"a": ""}},
		{"empty value", "a=", map[string]string{"a": ""}},
		{"empty key", "=b", map[string]string{"": "b"}},
		{"continuation", "a=b,\\\n    c,\\\n\td", map[string]string{"a": "b,c,d"}},
		{"continuation keeps hash", "a=b\\\n#c", map[string]string{"a": "b#c"}},
		{"even backslashes do not continue", "a=b\\\\\nc=d", map[string]string{"a": `b\`, "c": "d"}},
		{"comment does not continue", "# x\\\na=b", map[string]string{"a": "b"}},
		{"blank line ends continuation", "a=b\\\n\nc=d", map[string]string{"a": "b", "c": "d"}},
		{"continuation at end of input", "a=b\\", map[string]string{"a": "b"}},
		{"crlf", "a=b\r\nc=d\r\n", map[string]string{"a": "b", "c": "d"}},
		{"cr only", "a=b\rc=d", map[string]string{"a": "b", "c": "d"}},
		{"crlf continuation", "a=b\\\r\n  c", map[string]string{"a": "bc"}},
		{"escaped separator in key", `a\=b\:c\ d=e`, map[string]string{"a=b:c d": "e"}},
		{"escapes", `a=\t\n\r\f\\\q`, map[string]string{"a": "\t\n\r\f\\q"}},
		{"unicode escape", `a=\u0041\u00e9`, map[string]string{"a": "Aé"}},
		{"surrogate pair", `a=\uD83D\uDE00`, map[string]string{"a": "😀"}},
		{"escaped leading space in value", `a=\ b`, map[string]string{"a": " b"}},
		{"duplicate later wins", "a=1\na=2", map[string]string{"a": "2"}},
		{"utf8 value", "a=héllo", map[string]string{"a": "héllo"}},
		{"latin1 value", "a=h\xe9llo", map[string]string{"a": "héllo"}},
		{"server.properties", `
# The role of this server.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
log.dirs=/tmp/kraft-combined-logs
`, map[string]string{
			"process.roles":                       "broker,controller",
			"node.id":                             "1",
			"controller.quorum.bootstrap.servers": "localhost:9093",
			"listeners":                           "PLAINTEXT://:9092,CONTROLLER://:9093",
			"log.dirs":                            "/tmp/kraft-combined-logs",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadProperties(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("ReadProperties(%q): %v", tt.in, err)
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("ReadProperties(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestReadPropertiesErrors(t *testing.T) {
	for _, in := range []string{
		`a=\u12`,
		`a=\u12g4`,
		"ok=1\n\\uzzzz=b",
	} {
		if got, err := ReadProperties(strings.NewReader(in)); err == nil {
			t.Errorf("ReadProperties(%q) = %q, want an error", in, got)
		}
	}
	big := strings.NewReader(strings.Repeat("#", maxPropertiesBytes+1))
	if _, err := ReadProperties(big); err == nil {
		t.Errorf("ReadProperties of %d bytes: want an error", maxPropertiesBytes+1)
	}
}

func BenchmarkReadProperties(b *testing.B) {
	var sb strings.Builder
	for i := range 200 {
		sb.WriteString("# comment\nsome.property.name")
		sb.WriteString(itoa(int64(i)))
		sb.WriteString(" = some value, with \\\n   continuation\n")
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := ReadProperties(strings.NewReader(text)); err != nil {
			b.Fatal(err)
		}
	}
}
