package group

import "testing"

// TestCompileRegex: a regex matches whole topic names, and its text cannot
// reach past the anchors.
func TestCompileRegex(t *testing.T) {
	for _, c := range []struct {
		rx, topic string
		match     bool
	}{
		{"a|ab", "ab", true}, // the whole name, not the leftmost match
		{"a.", "ab", true},
		{"a", "ab", false},
		{"b", "ab", false},
		{`\Qa.b`, "a.b", true}, // a quote to the end of the regex
		{`\Qa.b`, "axb", false},
		{"(?i)AB", "ab", true},
		{"[[:alpha:]]+", "ab", true},
	} {
		re, err := compileRegex(c.rx)
		if err != nil {
			t.Fatalf("%q: %v", c.rx, err)
		}
		if got := re.MatchString(c.topic); got != c.match {
			t.Errorf("%q on %q: %v, want %v", c.rx, c.topic, got, c.match)
		}
	}
	for rx, msg := range map[string]string{
		")(":    "SubscribedTopicRegex `)(` is not a valid regular expression: regexp/syntax: internal error.",
		"a)|(b": "SubscribedTopicRegex `a)|(b` is not a valid regular expression: regexp/syntax: internal error.",
		"(?=x)": "SubscribedTopicRegex `(?=x)` is not a valid regular expression: invalid or unsupported Perl syntax.",
		"a**":   "SubscribedTopicRegex `a**` is not a valid regular expression: invalid nested repetition operator.",
	} {
		_, err := compileRegex(rx)
		if err == nil {
			t.Errorf("%q compiled", rx)
			continue
		}
		if got := regexError(rx, err); got != msg {
			t.Errorf("%q: %s, want %s", rx, got, msg)
		}
	}
}
