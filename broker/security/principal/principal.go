package principal

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Anonymous is the principal of a connection nobody authenticated, as
// Kafka's KafkaPrincipal.ANONYMOUS prints it.
const Anonymous = "User:ANONYMOUS"

// User returns the principal of an authenticated user name, as Kafka's
// DefaultKafkaPrincipalBuilder builds it: type User.
func User(name string) string { return "User:" + name }

// ErrInvalidRule is wrapped by the error for a malformed
// ssl.principal.mapping.rules.
var ErrInvalidRule = errors.New("invalid ssl.principal.mapping.rules")

// ErrNoMatchingRule is returned by Map when no rule matches a name, as
// Kafka's SslPrincipalMapper.NoMatchingRule: the connection then fails to
// authenticate.
var ErrNoMatchingRule = errors.New("no rule of ssl.principal.mapping.rules applies to the distinguished name")

// maxRules bounds the rules one configuration may hold.
const maxRules = 1000

// rule is one entry of ssl.principal.mapping.rules.
type rule struct {
	isDefault   bool
	pattern     *regexp.Regexp
	replacement string
	lower       bool
	upper       bool
}

// Rules are parsed ssl.principal.mapping.rules, as Kafka's
// SslPrincipalMapper: a comma- or newline-separated list of DEFAULT and
// RULE:pattern/replacement/[LU] entries, tried in order; the first whose
// pattern matches the whole distinguished name gives the principal name
// (DEFAULT gives the name unchanged).
type Rules struct {
	rules []rule
}

// ParseRules parses ssl.principal.mapping.rules.
func ParseRules(text string) (*Rules, error) {
	r := &Rules{}
	s := text
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			break
		}
		if len(r.rules) == maxRules {
			return nil, fmt.Errorf("%w: more than %d rules", ErrInvalidRule, maxRules)
		}
		var ru rule
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			ru.isDefault = true
			s = strings.TrimLeft(s[len("DEFAULT"):], " \t\r")
			if s != "" && s[0] != ',' && s[0] != '\n' {
				return nil, fmt.Errorf("%w: Invalid rule: %s", ErrInvalidRule, text)
			}
		case strings.HasPrefix(s, "RULE:"):
			s = s[len("RULE:"):]
			pat, rest, ok := cutUnescaped(s)
			if !ok {
				return nil, fmt.Errorf("%w: Invalid rule: %s", ErrInvalidRule, text)
			}
			repl, rest, ok := cutUnescaped(rest)
			if !ok {
				return nil, fmt.Errorf("%w: Invalid rule: %s", ErrInvalidRule, text)
			}
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return nil, fmt.Errorf("%w: pattern %q: %v", ErrInvalidRule, pat, err)
			}
			ru.pattern, ru.replacement = re, javaReplacement(repl)
			if strings.HasPrefix(rest, "L") {
				ru.lower, rest = true, rest[1:]
			} else if strings.HasPrefix(rest, "U") {
				ru.upper, rest = true, rest[1:]
			}
			s = rest
		default:
			return nil, fmt.Errorf("%w: Invalid rule: %s", ErrInvalidRule, s)
		}
		// Anything up to the next separator is ignored, as Kafka's rule
		// pattern's trailing ".*?".
		if i := strings.IndexAny(s, ",\n"); i >= 0 {
			s = s[i+1:]
		} else {
			s = ""
		}
		r.rules = append(r.rules, ru)
	}
	if len(r.rules) == 0 {
		return nil, fmt.Errorf("%w: no rule", ErrInvalidRule)
	}
	return r, nil
}

// cutUnescaped splits s at its first '/' that no backslash escapes.
func cutUnescaped(s string) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// javaReplacement turns a java.util.regex replacement ($1, \x) into a Go
// regexp template (${1}, x).
func javaReplacement(s string) string {
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
			if j == i+1 {
				b.WriteString("$$")
				continue
			}
			b.WriteString("${" + s[i+1:j] + "}")
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Map returns the principal name of a distinguished name.
func (r *Rules) Map(dn string) (string, error) {
	for _, ru := range r.rules {
		if ru.isDefault {
			return dn, nil
		}
		m := ru.pattern.FindStringSubmatchIndex(dn)
		if m == nil {
			continue
		}
		out := string(ru.pattern.ExpandString(nil, ru.replacement, dn, m))
		switch {
		case ru.lower:
			out = strings.ToLower(out)
		case ru.upper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: %s", ErrNoMatchingRule, dn)
}
