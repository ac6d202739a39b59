package config

import "strings"

// Entry is one key/value pair of a request's descriptor.
type Entry struct{ Key, Value string }

// Match is what applies to one descriptor of a request.
type Match struct {
	// Descriptor is the configured descriptor whose limits apply, nil if
	// the request's descriptor matches none that has a limit.
	Descriptor *Descriptor
	// MetricKey names the descriptor in metrics, without the domain: the
	// configured path ("path_/login*.user") or, with detailed_metric, the
	// request's values ("path_/login/x.user_alice"); value_to_metric puts
	// the request's value in place of a wildcard or a key-only level.
	MetricKey string
	// Share, when not nil, holds for each entry the value its counter is
	// kept under instead of the request's (share_threshold: the wildcard
	// pattern, so every matching value shares one counter); "" keeps the
	// request's value.
	Share []string
}

// Known reports whether the configuration has domain.
func (c *Config) Known(domain string) bool { return c.domains[domain] != nil }

// Match finds the limits for a descriptor of domain as envoyproxy/ratelimit
// does: level by level, an entry matches the child "key_value", else the
// first wildcard child whose pattern matches "key_value", else the child
// "key" (any value); the limits are those of the descriptor matched by the
// last entry, and a descriptor with more entries than the tree is deep
// matches nothing. It does not allocate unless a metric key must be built
// (detailed_metric, value_to_metric) or share_threshold applies.
func (c *Config) Match(domain string, entries []Entry) Match {
	d := c.domains[domain]
	if d == nil {
		return Match{}
	}
	var m Match
	levels := make([]level, 0, 8) // the matched descriptors, for value_to_metric's key
	enhanced := false
	for i, e := range entries {
		final := e.Key + "_" + e.Value
		next := d.children[final]
		wild := ""
		if next == nil {
			for _, w := range d.wildcards {
				if wildcardMatch(w.parts, final) {
					next, wild = d.children[w.key], w.key
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = d.children[e.Key]
		}
		if next == nil {
			return Match{}
		}
		if wild != "" && next.ShareThreshold {
			if m.Share == nil {
				m.Share = make([]string, len(entries))
			}
			m.Share[i] = strings.TrimPrefix(wild, e.Key+"_")
		}
		subst := next.ValueToMetric && (wild != "" && !next.ShareThreshold || !byValue)
		enhanced = enhanced || subst
		levels = append(levels, level{d: next, entry: e, subst: subst})
		if i == len(entries)-1 && len(next.Limits) > 0 {
			m.Descriptor = next
		}
		if len(next.children) == 0 {
			break
		}
		d = next
	}
	if m.Descriptor == nil {
		return Match{}
	}
	switch {
	case m.Descriptor.DetailedMetric:
		m.MetricKey = detailedKey(entries, m.Share)
	case enhanced:
		m.MetricKey = enhancedKey(levels)
	default:
		m.MetricKey = m.Descriptor.path
	}
	return m
}

// level is one matched level of a descriptor.
type level struct {
	d     *Descriptor
	entry Entry
	subst bool // value_to_metric: the request's value names it in metrics
}

// enhancedKey is the metric key of value_to_metric: the configured path,
// with the request's value at the levels marked subst.
func enhancedKey(levels []level) string {
	var b strings.Builder
	for i, l := range levels {
		if i > 0 {
			b.WriteByte('.')
		}
		switch {
		case l.subst:
			b.WriteString(l.entry.Key + "_" + l.entry.Value)
		case l.d.Value != "":
			b.WriteString(l.d.Key + "_" + l.d.Value)
		default:
			b.WriteString(l.d.Key)
		}
	}
	return b.String()
}

// detailedKey is the metric key of detailed_metric: every entry's key and
// value (or share_threshold's pattern).
func detailedKey(entries []Entry, share []string) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('.')
		}
		v := e.Value
		if share != nil && share[i] != "" {
			v = share[i]
		}
		b.WriteString(e.Key + "_" + v)
	}
	return b.String()
}

// wildcardMatch reports whether s matches the pattern split on '*' into
// parts: it starts with the first part, ends with the last, and holds the
// others in order between them; each '*' matches any run of characters.
func wildcardMatch(parts []string, s string) bool {
	if len(parts) == 1 {
		return parts[0] == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	rest := s[len(first) : len(s)-len(last)]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return true
}
