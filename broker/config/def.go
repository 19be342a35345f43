package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Type is a config value's type, numbered as DescribeConfigs v3+ reports it
// (Kafka's DescribeConfigsResponse.ConfigType).
type Type int8

// Config types, with the wire numbers of DescribeConfigsResponse.ConfigType.
const (
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypeClass    Type = 8
	TypePassword Type = 9
)

// String returns the type's name as Kafka's ConfigDef.Type spells it.
func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "BOOLEAN"
	case TypeString:
		return "STRING"
	case TypeInt:
		return "INT"
	case TypeShort:
		return "SHORT"
	case TypeLong:
		return "LONG"
	case TypeDouble:
		return "DOUBLE"
	case TypeList:
		return "LIST"
	case TypeClass:
		return "CLASS"
	case TypePassword:
		return "PASSWORD"
	}
	return "UNKNOWN"
}

// Source says where a described config value comes from, numbered as
// DescribeConfigs v1+ reports it (Kafka's DescribeConfigsResponse.ConfigSource).
type Source int8

// Config sources, with the wire numbers of DescribeConfigsResponse.ConfigSource.
const (
	SourceUnknown                    Source = 0
	SourceDynamicTopicConfig         Source = 1
	SourceDynamicBrokerConfig        Source = 2
	SourceDynamicDefaultBrokerConfig Source = 3
	SourceStaticBrokerConfig         Source = 4
	SourceDefaultConfig              Source = 5
)

// ErrInvalid is wrapped by every error about a malformed or out-of-range
// config value. The handler edge answers INVALID_CONFIG for it.
var ErrInvalid = errors.New("invalid config")

// ErrUnknown is wrapped by every error about a config name that is not
// defined. The handler edge answers INVALID_CONFIG for it.
var ErrUnknown = errors.New("unknown config")

// ValueError is a malformed or out-of-range value, worded as Kafka's
// ConfigException(name, value, message).
type ValueError struct {
	Name, Value, Reason string
}

// Error renders the message exactly as Kafka's ConfigException does.
func (e *ValueError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("Invalid value %s for configuration %s", e.Value, e.Name)
	}
	return fmt.Sprintf("Invalid value %s for configuration %s: %s", e.Value, e.Name, e.Reason)
}

// Unwrap lets errors.Is match ErrInvalid.
func (e *ValueError) Unwrap() error { return ErrInvalid }

// Validator checks a parsed value (bool, string, int32, int64, float64 or
// []string, by the def's Type) and returns a reason when it is out of range,
// in the words of Kafka's ConfigDef validators.
type Validator func(v any) string

// Synonym is a broker config that supplies a topic config's default, with the
// factor that turns its unit into the topic config's (Kafka's ConfigSynonym:
// log.retention.hours feeds retention.ms times 3,600,000).
type Synonym struct {
	Name  string
	Scale int64
}

// Def defines one config, as one ConfigDef.define call in Kafka.
type Def struct {
	Name string
	Type Type
	// Default is the default value as text; HasDefault false is Kafka's null
	// default (the value is absent unless set).
	Default    string
	HasDefault bool
	Validate   Validator
	Doc        string
	// Dynamic marks broker configs Kafka lets AlterConfigs change without a
	// restart. Cascade reports it; Cascade itself changes no broker config
	// at run time.
	Dynamic   bool
	Sensitive bool
	// Synonyms lists, for a topic config, the broker configs that supply its
	// default, highest priority first (ServerTopicConfigSynonyms).
	Synonyms []Synonym
	// DefaultOnly marks a config Cascade accepts and describes but whose
	// behaviour it does not implement: only its default value is accepted,
	// so a setting is never silently ignored.
	DefaultOnly bool
	// NoEffect, when not empty, says why a broker config Cascade accepts
	// (with Kafka's validation) changes nothing in Cascade: a thread-pool
	// size where each connection has its own goroutine, or a setting of a
	// feature Cascade does not serve. The broker logs it at start when the
	// config is set.
	NoEffect string
}

// Parse converts text to the def's type and validates it, returning the
// parsed value or a *ValueError with Kafka's wording.
func (d *Def) Parse(s string) (any, error) {
	v, reason := parseType(d.Type, s)
	if reason == "" && d.Validate != nil {
		reason = d.Validate(v)
	}
	if reason != "" {
		return nil, &ValueError{Name: d.Name, Value: s, Reason: reason}
	}
	return v, nil
}

// Format renders a parsed value as Kafka's ConfigDef.convertToString does,
// which is how DescribeConfigs shows values: lists joined with ",",
// doubles as Java's Double.toString.
func Format(v any) string {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return javaDouble(x)
	case []string:
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v)
}

// javaDouble formats f as Java's Double.toString: plain decimal with at
// least one fractional digit for 1e-3 <= |f| < 1e7, else d.dddE±n.
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
	if a := math.Abs(f); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'E', -1, 64) // e.g. 1.5E+07, 1E-04
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	n, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(n)
}

// parseType follows ConfigDef.parseType: values are trimmed, booleans are
// case-insensitive true/false, numbers must fit their width.
func parseType(t Type, raw string) (any, string) {
	s := strings.TrimSpace(raw)
	switch t {
	case TypeBoolean:
		switch strings.ToLower(s) {
		case "true":
			return true, ""
		case "false":
			return false, ""
		}
		return nil, "Expected value to be either true or false"
	case TypeString, TypeClass, TypePassword:
		return s, ""
	case TypeInt:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, "Not a number of type INT"
		}
		return int32(n), ""
	case TypeShort:
		n, err := strconv.ParseInt(s, 10, 16)
		if err != nil {
			return nil, "Not a number of type SHORT"
		}
		return int16(n), ""
	case TypeLong:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, "Not a number of type LONG"
		}
		return n, ""
	case TypeDouble:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) {
			return nil, "Not a number of type DOUBLE"
		}
		return f, ""
	case TypeList:
		if s == "" {
			return []string{}, ""
		}
		parts := strings.Split(s, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts, ""
	}
	return nil, "unknown type"
}

// asInt64 widens any integer value for range checks.
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

// atLeast is Kafka's ConfigDef.Range.atLeast.
func atLeast(min int64) Validator {
	return func(v any) string {
		if n, ok := asInt64(v); ok && n < min {
			return fmt.Sprintf("Value must be at least %d", min)
		}
		return ""
	}
}

// between is Kafka's ConfigDef.Range.between for integers.
func between(min, max int64) Validator {
	return func(v any) string {
		n, ok := asInt64(v)
		if !ok {
			return ""
		}
		if n < min {
			return fmt.Sprintf("Value must be at least %d", min)
		}
		if n > max {
			return fmt.Sprintf("Value must be no more than %d", max)
		}
		return ""
	}
}

// betweenFloat is Kafka's ConfigDef.Range.between for doubles; Kafka prints
// the bounds as Java renders the boxed Number it was given.
func betweenFloat(min, max float64, minText, maxText string) Validator {
	return func(v any) string {
		f, ok := v.(float64)
		if !ok {
			return ""
		}
		if f < min {
			return "Value must be at least " + minText
		}
		if f > max {
			return "Value must be no more than " + maxText
		}
		return ""
	}
}

// oneOf is Kafka's ConfigDef.ValidString.in (case-sensitive).
func oneOf(allowed ...string) Validator {
	return func(v any) string {
		s, _ := v.(string)
		for _, a := range allowed {
			if s == a {
				return ""
			}
		}
		return "String must be one of: " + strings.Join(allowed, ", ")
	}
}

// listOf is Kafka's ConfigDef.ValidList.in: every element must be allowed,
// with no duplicates; an empty list passes when emptyOK.
func listOf(emptyOK bool, allowed ...string) Validator {
	return func(v any) string {
		l, _ := v.([]string)
		if len(l) == 0 && !emptyOK {
			return "Configuration must not be empty"
		}
		seen := map[string]bool{}
		for _, s := range l {
			if seen[s] {
				return "Values must not be duplicated"
			}
			seen[s] = true
			ok := false
			for _, a := range allowed {
				if s == a {
					ok = true
					break
				}
			}
			if !ok {
				return "String must be one of: " + strings.Join(allowed, ", ")
			}
		}
		return ""
	}
}

// Defs is an ordered set of definitions with lookup by name.
type Defs struct {
	list   []*Def
	byName map[string]*Def
}

func newDefs(defs ...*Def) *Defs {
	d := &Defs{byName: make(map[string]*Def, len(defs))}
	for _, def := range defs {
		if _, dup := d.byName[def.Name]; dup {
			panic("config: " + def.Name + " defined twice")
		}
		d.list = append(d.list, def)
		d.byName[def.Name] = def
	}
	return d
}

// Get returns the definition of name.
func (d *Defs) Get(name string) (*Def, bool) {
	def, ok := d.byName[name]
	return def, ok
}

// All returns every definition in definition order.
func (d *Defs) All() []*Def { return d.list }
