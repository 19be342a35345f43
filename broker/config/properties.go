package config

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Property is one key=value pair of a properties file, with the line it
// starts on (for error messages).
type Property struct {
	Key, Value string
	Line       int
}

// SyntaxError is a malformed line of a properties file.
type SyntaxError struct {
	Line int
	Msg  string
}

// Error returns "line N: message".
func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// maxPropertiesBytes bounds what ParseProperties reads, so a wrong path
// (a device, a huge file) fails instead of exhausting memory.
const maxPropertiesBytes = 16 << 20

// ParseProperties reads Java properties syntax, as java.util.Properties.load
// does: '#' and '!' comment lines, keys ended by the first unescaped '=', ':'
// or whitespace, a trailing odd backslash continuing the logical line (the
// next line's leading whitespace dropped), and the escapes \t \n \r \f
// \uXXXX and \<any char>. The file is read as UTF-8 (Java reads ISO-8859-1;
// the two agree on ASCII and on \u escapes). Pairs are returned in file
// order; a later duplicate wins when the caller builds a map.
func ParseProperties(r io.Reader) ([]Property, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPropertiesBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: reading properties: %w", err)
	}
	if len(data) > maxPropertiesBytes {
		return nil, fmt.Errorf("config: properties file larger than %d bytes", maxPropertiesBytes)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("config: properties file is not valid UTF-8")
	}
	lines := splitNaturalLines(string(data))
	var out []Property
	for i := 0; i < len(lines); i++ {
		startLine := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue // comment lines never continue, as in Java
		}
		// Join continuation lines: a line ending in an odd number of
		// backslashes continues on the next one, minus its leading blanks.
		logical := line
		for endsWithContinuation(logical) && i+1 < len(lines) {
			logical = logical[:len(logical)-1]
			i++
			logical += strings.TrimLeft(lines[i], " \t\f")
		}
		if endsWithContinuation(logical) {
			logical = logical[:len(logical)-1] // continuation at EOF
		}
		key, value, err := splitKeyValue(logical)
		if err != nil {
			return nil, &SyntaxError{Line: startLine, Msg: err.Error()}
		}
		out = append(out, Property{Key: key, Value: value, Line: startLine})
	}
	return out, nil
}

// splitNaturalLines splits on \n, \r and \r\n, as LineReader does.
func splitNaturalLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\n':
			lines = append(lines, s[start:i])
			start = i + 1
		case '\r':
			lines = append(lines, s[start:i])
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

func endsWithContinuation(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitKeyValue separates a logical line into its unescaped key and value.
func splitKeyValue(line string) (string, string, error) {
	keyEnd := len(line)
	valStart := len(line)
	hasSep := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++ // skip the escaped char
			continue
		}
		if c == '=' || c == ':' {
			keyEnd, valStart, hasSep = i, i+1, true
			break
		}
		if c == ' ' || c == '\t' || c == '\f' {
			keyEnd, valStart = i, i+1
			break
		}
	}
	rest := line[min(valStart, len(line)):]
	// After whitespace ending the key, skip blanks and at most one '=' or ':'.
	rest = strings.TrimLeft(rest, " \t\f")
	if !hasSep && rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	key, err := unescape(line[:keyEnd])
	if err != nil {
		return "", "", err
	}
	value, err := unescape(rest)
	if err != nil {
		return "", "", err
	}
	return key, value, nil
}

// unescape applies Properties.loadConvert's escapes.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break // a lone trailing backslash is dropped, as in Java
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, err := hex4(s, i+1)
			if err != nil {
				return "", err
			}
			i += 4
			// Java strings are UTF-16: join an escaped surrogate pair.
			if utf16.IsSurrogate(r) && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if r2, err := hex4(s, i+3); err == nil {
					if j := utf16.DecodeRune(r, r2); j != utf8.RuneError {
						r = j
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			// Any other escaped char (including UTF-8 lead bytes) stands
			// for itself.
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// hex4 decodes the four hex digits of a \uXXXX escape starting at s[at].
func hex4(s string, at int) (rune, error) {
	if at+4 > len(s) {
		return 0, fmt.Errorf(`malformed \uxxxx encoding`)
	}
	var r rune
	for _, h := range []byte(s[at : at+4]) {
		var d byte
		switch {
		case h >= '0' && h <= '9':
			d = h - '0'
		case h >= 'a' && h <= 'f':
			d = h - 'a' + 10
		case h >= 'A' && h <= 'F':
			d = h - 'A' + 10
		default:
			return 0, fmt.Errorf(`malformed \uxxxx encoding`)
		}
		r = r<<4 | rune(d)
	}
	return r, nil
}
