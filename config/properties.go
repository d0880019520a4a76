package config

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxPropertiesBytes bounds what ReadProperties reads: a broker config is a
// few kilobytes, and an endless stream must not exhaust memory.
const maxPropertiesBytes = 16 << 20

// ReadProperties reads a Java .properties file as java.util.Properties.load
// does, which is how Kafka reads server.properties:
//
//   - a line whose first non-blank character is '#' or '!' is a comment;
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading blanks are dropped;
//   - the key ends at the first unescaped '=', ':' or blank; blanks and at
//     most one '=' or ':' separate it from the value;
//   - escapes \t \n \r \f \uXXXX, and a backslash before any other character
//     stands for that character;
//   - a later duplicate key replaces an earlier one.
//
// Java reads the bytes as ISO-8859-1; Gregor reads them as UTF-8 when they
// are valid UTF-8 (the common case today) and as ISO-8859-1 otherwise.
func ReadProperties(r io.Reader) (map[string]string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPropertiesBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read properties: %w", err)
	}
	if len(data) > maxPropertiesBytes {
		return nil, fmt.Errorf("read properties: larger than %d bytes", maxPropertiesBytes)
	}
	text := string(data)
	if !utf8.ValidString(text) {
		runes := make([]rune, len(data))
		for i, c := range data {
			runes[i] = rune(c)
		}
		text = string(runes)
	}
	props := make(map[string]string)
	lineNo := 0
	for len(text) > 0 {
		var logical string
		var start int
		logical, text, start, lineNo = nextLogicalLine(text, lineNo)
		if logical == "" {
			continue
		}
		key, val, err := splitProperty(logical)
		if err != nil {
			return nil, fmt.Errorf("read properties: line %d: %w", start, err)
		}
		props[key] = val
	}
	return props, nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// nextNaturalLine cuts one line off text at "\n", "\r" or "\r\n".
func nextNaturalLine(text string) (line, rest string) {
	i := strings.IndexAny(text, "\r\n")
	if i < 0 {
		return text, ""
	}
	line, rest = text[:i], text[i+1:]
	if text[i] == '\r' && strings.HasPrefix(rest, "\n") {
		rest = rest[1:]
	}
	return line, rest
}

// nextLogicalLine returns the next logical line of text with leading blanks
// removed and continuations joined, or "" for a blank or comment line.
// start is the 1-based number of the line it began on.
func nextLogicalLine(text string, lineNo int) (logical, rest string, start, next int) {
	var b strings.Builder
	first := true
	start = lineNo + 1
	for {
		var line string
		line, text = nextNaturalLine(text)
		lineNo++
		line = strings.TrimLeft(line, " \t\f")
		if first {
			if line == "" || line[0] == '#' || line[0] == '!' {
				return "", text, start, lineNo
			}
			first = false
		}
		// An odd run of trailing backslashes escapes the line end.
		n := 0
		for n < len(line) && line[len(line)-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			b.WriteString(line)
			return b.String(), text, start, lineNo
		}
		b.WriteString(line[:len(line)-1])
		if text == "" {
			return b.String(), text, start, lineNo
		}
	}
}

// splitProperty splits a logical line into its unescaped key and value.
func splitProperty(line string) (key, val string, err error) {
	keyEnd, valStart := len(line), len(line)
	hasSep, escaped := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if !escaped && (c == '=' || c == ':') {
			keyEnd, valStart, hasSep = i, i+1, true
			break
		}
		if !escaped && isBlank(c) {
			keyEnd, valStart = i, i+1
			break
		}
		escaped = c == '\\' && !escaped
	}
	for valStart < len(line) {
		c := line[valStart]
		if !isBlank(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valStart++
	}
	if key, err = unescape(line[:keyEnd]); err != nil {
		return "", "", err
	}
	if val, err = unescape(line[valStart:]); err != nil {
		return "", "", err
	}
	return key, val, nil
}

var errMalformedUnicode = errors.New(`malformed \uxxxx encoding`)

// unescape resolves the backslash escapes of a .properties key or value.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	var units []uint16 // pending \u escapes, so surrogate pairs combine
	flush := func() {
		if len(units) > 0 {
			b.WriteString(string(utf16.Decode(units)))
			units = units[:0]
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			flush()
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break // a dangling backslash at the end is dropped, as in Java
		}
		c = s[i]
		if c == 'u' {
			if i+5 > len(s) {
				return "", errMalformedUnicode
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", errMalformedUnicode
			}
			units = append(units, uint16(n))
			i += 4
			continue
		}
		flush()
		switch c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		default:
			// Any other escaped character stands for itself; it may be the
			// first byte of a multi-byte UTF-8 sequence, copied as is.
			b.WriteByte(c)
		}
	}
	flush()
	return b.String(), nil
}
