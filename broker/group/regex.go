package group

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"time"
)

// Regular expression subscriptions (KIP-848) are resolved as Kafka 4.4's
// GroupMetadataManager resolves them: a group's regexes are matched, all at
// once, against every topic of the metadata image (internal topics too) in
// a task that runs after the heartbeat that asked for it has been answered,
// leaving out the topics the asking member may not describe. The result is
// kept per regex as a ConsumerGroupRegularExpression record and is what the
// group subscribes to until the next resolution. A group is resolved again
// on a member's heartbeat when a regex is unresolved or topics were created
// since the last resolution, but at most once per regexRefreshInterval.

// regexRefreshInterval is Kafka's REGEX_BATCH_REFRESH_INTERVAL_MS: the least
// time between two resolutions of one group's regexes.
const regexRefreshInterval = 10 * time.Second

// resolvedRegex is what a regex of the group matched: Kafka's
// ResolvedRegularExpression.
type resolvedRegex struct {
	topics []string // sorted
	// version is the coordinator's topic generation the regex was
	// resolved against (c.topicsGen); a resolution replayed from the log
	// has -1, older than any image this coordinator has seen.
	version int64
	at      time.Time
}

func regexKey(gid string) string { return "regex/" + gid }

// compileRegex compiles s to match whole topic names, as RE2/J's
// Matcher.matches, in the syntax of Kafka's RE2/J Pattern.compile (Go's
// syntax.Perl: RE2/J is a port of Go's parser, and its errors carry the
// same descriptions). The anchors wrap the parsed expression, not its
// text, so that a \Q quote without \E or an unbalanced group cannot
// reach past them.
func compileRegex(s string) (*regexp.Regexp, error) {
	re, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return nil, err
	}
	whole := &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{{Op: syntax.OpBeginText}, re, {Op: syntax.OpEndText}}}
	return regexp.Compile(whole.String())
}

// regexError is Kafka's message for a SubscribedTopicRegex that does not
// compile: Utils.throwIfRegularExpressionIsInvalid with RE2/J's description.
func regexError(s string, err error) string {
	desc := err.Error()
	var se *syntax.Error
	if errors.As(err, &se) {
		desc = string(se.Code)
		if se.Code == syntax.ErrUnexpectedParen {
			// RE2/J kept the older Go parser's answer to an
			// unmatched ")".
			desc = string(syntax.ErrInternalError)
		}
	}
	return fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %s.", s, desc)
}

// regexCounts returns how many members subscribe to each regex.
func (g *consumerGroup) regexCounts() map[string]int {
	out := map[string]int{}
	for _, m := range g.members {
		if rx := deref(m.regex); rx != "" {
			out[rx]++
		}
	}
	return out
}

// lastRegexRefresh and lastRegexVersion are Kafka's
// lastResolvedRegularExpressionRefreshTimeMs and
// lastResolvedRegularExpressionVersion: every regex of a group is resolved
// together, so any entry stands for all.
func (g *consumerGroup) lastRegexRefresh() (at time.Time, version int64) {
	for _, r := range g.regexes {
		if r.at.After(at) {
			at = r.at
		}
		version = r.version
	}
	return at, version
}

// regexTopics returns the existing topics the group's resolution of rx
// matched.
func (c *Coordinator) regexTopics(g *consumerGroup, rx string) []Topic {
	r := g.regexes[rx]
	if r == nil {
		return nil
	}
	var out []Topic
	for _, name := range r.topics {
		if t, ok := c.topics[name]; ok {
			out = append(out, t)
		}
	}
	return out
}

// updateRegexes is Kafka's maybeUpdateRegularExpressions, for a member whose
// regex went from old to cur in this heartbeat; counts are the group's
// regex subscriptions before it. It writes the tombstone of a regex nobody
// subscribes to any more, schedules a resolution when one is due, and
// reports whether the group epoch must be bumped (the member took up a
// regex the group has already resolved).
func (c *Coordinator) updateRegexes(r Request, g *consumerGroup, counts map[string]int, old, cur *string) bool {
	oldRx, newRx := deref(old), deref(cur)
	bump, refresh := false, false
	if oldRx != newRx {
		if oldRx != "" && counts[oldRx] == 1 {
			c.dropRegex(g, oldRx)
		}
		if newRx != "" {
			if counts[newRx] == 0 {
				refresh = true
			} else {
				_, bump = g.regexes[newRx]
			}
		}
	}
	if !refresh && len(counts) == 0 {
		return bump
	}
	if _, running := c.timers[regexKey(g.id)]; running {
		return bump
	}
	last, version := g.lastRegexRefresh()
	if !c.now.After(last.Add(regexRefreshInterval)) {
		return bump
	}
	after := maps.Clone(counts)
	if oldRx != "" {
		if after[oldRx]--; after[oldRx] <= 0 {
			delete(after, oldRx)
		}
	}
	if newRx != "" {
		after[newRx]++
	}
	refresh = refresh || len(after) != len(g.regexes) || version < c.newTopicsGen
	if refresh && len(after) > 0 {
		gid, regexes, describable := g.id, slices.Sorted(maps.Keys(after)), r.CanDescribe
		c.schedule(regexKey(gid), 0, func() { c.resolveRegexes(gid, regexes, describable) })
	}
	return bump
}

// resolveRegexes is the resolution task and its result: Kafka's
// refreshRegularExpressions then handleRegularExpressionsResult. Each
// regex still subscribed to is stored with what it matched now; the group
// epoch is bumped when a regex matches other topics than before or the
// group's subscribed topics changed.
func (c *Coordinator) resolveRegexes(gid string, regexes []string, describable func(string) bool) {
	g := c.consumer[gid]
	if g == nil {
		return
	}
	names := sortedKeys(c.topics)
	counts := g.regexCounts()
	bump := false
	for _, rx := range regexes {
		if counts[rx] == 0 {
			continue
		}
		re, err := compileRegex(rx)
		if err != nil {
			continue // validated when the member sent it
		}
		matched := []string{}
		for _, name := range names {
			if re.MatchString(name) && (describable == nil || describable(name)) {
				matched = append(matched, name)
			}
		}
		var before []string
		if old := g.regexes[rx]; old != nil {
			before = old.topics
		}
		if !slices.Equal(before, matched) {
			bump = true
		}
		res := &resolvedRegex{topics: matched, version: c.topicsGen, at: c.now}
		g.regexes[rx] = res
		c.record(gid, encodeRegexKey(gid, rx), encodeRegexValue(RegexValue{Topics: matched, Version: res.version, Timestamp: c.nowMs()}))
	}
	if bump || g.fingerprint(c) != g.subMeta {
		c.bumpGroupEpoch(g)
	}
}

// dropRegex forgets the group's resolution of rx and writes its tombstone.
func (c *Coordinator) dropRegex(g *consumerGroup, rx string) {
	delete(g.regexes, rx)
	c.record(g.id, encodeRegexKey(g.id, rx), nil)
}

// dropMemberRegex drops the resolution of m's regex when m, leaving the
// group, was its last subscriber.
func (c *Coordinator) dropMemberRegex(g *consumerGroup, m *consumerMember) {
	if rx := deref(m.regex); rx != "" && g.regexCounts()[rx] == 1 {
		c.dropRegex(g, rx)
	}
}

// replayRegex applies a ConsumerGroupRegularExpression record.
func (c *Coordinator) replayRegex(k Key, value []byte) error {
	if value == nil {
		if g := c.consumer[k.Group]; g != nil {
			delete(g.regexes, k.Regex)
		}
		return nil
	}
	v, err := DecodeRegexValue(value)
	if err != nil {
		return err
	}
	g := c.replayConsumerGroup(k.Group)
	topics := slices.Clone(v.Topics)
	slices.Sort(topics)
	g.regexes[k.Regex] = &resolvedRegex{topics: topics, version: -1, at: time.UnixMilli(v.Timestamp)}
	return nil
}
