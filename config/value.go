package config

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Config types, as DescribeConfigs v3+ reports them (ConfigType).
const (
	TypeUnknown  int8 = 0
	TypeBoolean  int8 = 1
	TypeString   int8 = 2
	TypeInt      int8 = 3
	TypeShort    int8 = 4
	TypeLong     int8 = 5
	TypeDouble   int8 = 6
	TypeList     int8 = 7
	TypeClass    int8 = 8
	TypePassword int8 = 9
)

// Config sources, as DescribeConfigs reports them (kmsg.ConfigSource).
const (
	SourceUnknown              int8 = 0
	SourceDynamicTopic         int8 = 1
	SourceDynamicBroker        int8 = 2
	SourceDynamicDefaultBroker int8 = 3
	SourceStaticBroker         int8 = 4
	SourceDefault              int8 = 5
	SourceDynamicBrokerLogger  int8 = 6
	SourceClientMetrics        int8 = 7
	SourceGroup                int8 = 8
)

// ConfigError is a property that cannot be used: an unknown topic config
// name, a value that does not parse as its type, or one its validator
// rejects. Its message follows Kafka's ConfigException, so it can go to a
// client unchanged as the error message of INVALID_CONFIG.
type ConfigError struct {
	Name   string
	Value  string
	Reason string
	// Unknown is set when Name is not a config this table knows.
	Unknown bool
}

func (e *ConfigError) Error() string {
	if e.Unknown {
		return "Unknown topic config name: " + e.Name
	}
	return fmt.Sprintf("Invalid value %s for configuration %s: %s", e.Value, e.Name, e.Reason)
}

func invalid(name, val, reason string, args ...any) *ConfigError {
	return &ConfigError{Name: name, Value: val, Reason: fmt.Sprintf(reason, args...)}
}

// value is one parsed property. Which field holds it depends on the type;
// null is a property that has no value (Kafka's null default).
type value struct {
	null bool
	i    int64 // INT, SHORT, LONG
	f    float64
	b    bool
	s    string // STRING, CLASS, PASSWORD: the trimmed text
	list []string
}

// javaTrim removes what Java's String.trim removes: every char <= ' '.
// Kafka trims every value before parsing it.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// splitList splits a LIST value as Kafka's ConfigDef does: on commas with
// surrounding whitespace, an empty value being the empty list. Empty
// elements are kept so that validators can reject them.
func splitList(s string) []string {
	s = javaTrim(s)
	if s == "" {
		return []string{}
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = javaTrim(p)
	}
	return parts
}

// parseValue converts raw to typ as Kafka's ConfigDef.parseType does.
func parseValue(name string, typ int8, raw string) (value, error) {
	t := javaTrim(raw)
	bad := func(kind string) (value, error) {
		return value{}, invalid(name, raw, "Not a number of type %s", kind)
	}
	switch typ {
	case TypeBoolean:
		switch strings.ToLower(t) {
		case "true":
			return value{b: true}, nil
		case "false":
			return value{b: false}, nil
		}
		return value{}, invalid(name, raw, "Expected value to be either true or false")
	case TypeInt:
		n, err := strconv.ParseInt(t, 10, 32)
		if err != nil {
			return bad("INT")
		}
		return value{i: n}, nil
	case TypeShort:
		n, err := strconv.ParseInt(t, 10, 16)
		if err != nil {
			return bad("SHORT")
		}
		return value{i: n}, nil
	case TypeLong:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return bad("LONG")
		}
		return value{i: n}, nil
	case TypeDouble:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsNaN(f) {
			return bad("DOUBLE")
		}
		return value{f: f}, nil
	case TypeList:
		return value{list: splitList(t)}, nil
	case TypeString, TypeClass, TypePassword:
		return value{s: t}, nil
	}
	return value{}, invalid(name, raw, "unknown config type %d", typ)
}

// formatValue renders a parsed value as Kafka's ConfigDef.convertToString
// does, which is what DescribeConfigs returns.
func formatValue(typ int8, v value) (string, bool) {
	if v.null {
		return "", true
	}
	switch typ {
	case TypeBoolean:
		return strconv.FormatBool(v.b), false
	case TypeInt, TypeShort, TypeLong:
		return strconv.FormatInt(v.i, 10), false
	case TypeDouble:
		return javaDouble(v.f), false
	case TypeList:
		return strings.Join(v.list, ","), false
	}
	return v.s, false
}

// javaDouble formats f as Java's Double.toString: "0.5", "1.0", "1.0E-4".
func javaDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	a := math.Abs(f)
	if a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, 64) // e.g. 1E-04, 1.5E+07
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// validator checks a parsed, non-null value. raw is the text as given, for
// the error message.
type validator func(name, raw string, v value) error

func atLeast(min int64) validator {
	return func(name, raw string, v value) error {
		if v.i < min {
			return invalid(name, raw, "Value must be at least %d", min)
		}
		return nil
	}
}

func between(min, max int64) validator {
	return func(name, raw string, v value) error {
		if v.i < min {
			return invalid(name, raw, "Value must be at least %d", min)
		}
		if v.i > max {
			return invalid(name, raw, "Value must be no more than %d", max)
		}
		return nil
	}
}

func betweenFloat(min, max float64) validator {
	return func(name, raw string, v value) error {
		if v.f < min {
			return invalid(name, raw, "Value must be at least %s", javaDouble(min))
		}
		if v.f > max {
			return invalid(name, raw, "Value must be no more than %s", javaDouble(max))
		}
		return nil
	}
}

// oneOf is Kafka's case-sensitive ValidString.
func oneOf(valid ...string) validator {
	return func(name, raw string, v value) error {
		if !slices.Contains(valid, v.s) {
			return invalid(name, raw, "String must be one of: %s", strings.Join(valid, ", "))
		}
		return nil
	}
}

// oneOfFold is Kafka's CaseInsensitiveValidString.
func oneOfFold(valid ...string) validator {
	return func(name, raw string, v value) error {
		for _, ok := range valid {
			if strings.EqualFold(v.s, ok) {
				return nil
			}
		}
		return invalid(name, raw, "String must be one of (case insensitive): %s", strings.Join(valid, ", "))
	}
}

// listOf is Kafka's ValidList: no empty or duplicate elements and, when
// valid is not empty, every element one of valid. nonEmpty rejects the
// empty list.
func listOf(nonEmpty bool, valid ...string) validator {
	return func(name, raw string, v value) error {
		if nonEmpty && len(v.list) == 0 {
			return invalid(name, raw, "Configuration '%s' must not be empty.", name)
		}
		seen := make(map[string]bool, len(v.list))
		for _, s := range v.list {
			if seen[s] {
				return invalid(name, raw, "Configuration '%s' values must not be duplicated.", name)
			}
			seen[s] = true
		}
		for _, s := range v.list {
			if s == "" {
				return invalid(name, raw, "Configuration '%s' values must not be empty.", name)
			}
			if len(valid) > 0 && !slices.Contains(valid, s) {
				return invalid(name, s, "String must be one of: %s", strings.Join(valid, ", "))
			}
		}
		return nil
	}
}

// parseChecked parses raw and runs check on the result.
func parseChecked(name string, typ int8, check validator, raw string) (value, error) {
	v, err := parseValue(name, typ, raw)
	if err != nil {
		return value{}, err
	}
	if check != nil {
		if err := check(name, raw, v); err != nil {
			return value{}, err
		}
	}
	return v, nil
}

// checkHostPort accepts HOST:PORT with a port from 0 to 65535 (an empty
// host binds every interface).
func checkHostPort(name, raw string, v value) error {
	_, port, err := net.SplitHostPort(v.s)
	if err != nil {
		return invalid(name, raw, "must be HOST:PORT")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return invalid(name, raw, "the port must be a number from 0 to 65535")
	}
	return nil
}
