package config

import (
	"fmt"
	"strings"

	"github.com/rlserver/rlserver/engine"
)

// Unit is a rate limit's unit of time. Its values are those of the RLS
// protocol's RateLimitResponse.RateLimit.Unit, so that a Unit converts to
// and from the protocol by a plain conversion.
type Unit int32

// The units, numbered as the RLS protocol numbers them.
const (
	Unknown Unit = 0
	Second  Unit = 1
	Minute  Unit = 2
	Hour    Unit = 3
	Day     Unit = 4
	Month   Unit = 5
	Year    Unit = 6
	Week    Unit = 7
)

// unitNames maps the YAML names (any case) to units.
var unitNames = map[string]Unit{"second": Second, "minute": Minute, "hour": Hour, "day": Day,
	"week": Week, "month": Month, "year": Year}

// ParseUnit returns the unit named s (second, minute, hour, day, week,
// month, year; any case).
func ParseUnit(s string) (Unit, bool) {
	u, ok := unitNames[strings.ToLower(s)]
	return u, ok
}

// Seconds returns the unit's length as envoyproxy/ratelimit counts it (a
// month is 30 days, a year 365), or 0 for Unknown and unknown values.
func (u Unit) Seconds() int64 {
	switch u {
	case Second:
		return 1
	case Minute:
		return 60
	case Hour:
		return 3600
	case Day:
		return 86400
	case Week:
		return 7 * 86400
	case Month:
		return 30 * 86400
	case Year:
		return 365 * 86400
	}
	return 0
}

// String returns the unit's name in lower case.
func (u Unit) String() string {
	for name, v := range unitNames {
		if v == u {
			return name
		}
	}
	return "unknown"
}

// Limit is one rate_limit (or one entry of rate_limits) of a descriptor. It
// is immutable once loaded.
type Limit struct {
	Name      string   // rate_limit.name; "" if none
	Replaces  []string // the names of the limits this one replaces
	Unlimited bool     // the descriptor is never limited
	// RequestsPerUnit is the quota per window; 0 denies every request
	// (envoyproxy/ratelimit's "always over the limit").
	RequestsPerUnit int64
	Unit            Unit
	UnitMultiplier  int64       // windows of this many units (1 unless set)
	Algo            engine.Algo // fixed unless algorithm says otherwise
	Burst           int64       // bucket capacity (token, leaky, gcra); 0 is RequestsPerUnit
	// Index is the limit's position among its descriptor's limits (0 for
	// rate_limit, then the rate_limits entries); counters of one
	// descriptor's limits are told apart by it.
	Index int
}

// Window returns the limit's window in nanoseconds.
func (l *Limit) Window() int64 { return l.Unit.Seconds() * l.UnitMultiplier * 1e9 }

// Params returns the engine parameters of the limit. It is meaningful only
// when RequestsPerUnit > 0 and the limit is not Unlimited.
func (l *Limit) Params() engine.Params {
	return engine.Params{Limit: l.RequestsPerUnit, Window: l.Window(), Burst: l.Burst}
}

// Descriptor is one node of a domain's descriptor tree.
type Descriptor struct {
	Key, Value     string
	Limits         []*Limit // rate_limit, then rate_limits; empty if none
	ShadowMode     bool
	DetailedMetric bool
	ValueToMetric  bool
	ShareThreshold bool

	path      string                 // "key_value.key" from the domain down, for metrics
	children  map[string]*Descriptor // by "key_value", or "key" for a default
	wildcards []wildcard             // children whose value holds '*', in file order
}

// wildcard is a child whose composite key holds '*', split on it.
type wildcard struct {
	key   string
	parts []string
}

// Config is a loaded configuration: every domain of every file. It is
// immutable and safe for concurrent use.
type Config struct {
	domains map[string]*Descriptor
	files   []string
}

// Domains returns the number of domains.
func (c *Config) Domains() int { return len(c.domains) }

// Files returns the files the configuration was read from.
func (c *Config) Files() []string { return c.files }

// Empty returns a configuration with no domain.
func Empty() *Config { return &Config{domains: map[string]*Descriptor{}} }

// Error is a configuration error: the file, the line (0 if unknown) and
// the field it concerns, and why.
type Error struct {
	File  string
	Line  int
	Field string // a path such as descriptors[0].rate_limit.unit; "" for the file
	Msg   string
}

// Error returns "file:line: field: msg".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}
