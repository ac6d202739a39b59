package reftest

import (
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// probe is the descriptor every scenario's YAML has, for waitLoaded.
const probe = `
  - key: probe
    rate_limit: {unit: hour, requests_per_unit: 1000}
`

func zero() *wrapperspb.UInt64Value { return wrapperspb.UInt64(0) }

// hits is desc with its own hits_addend.
func hits(n uint64, kv ...string) *rlpb.RateLimitDescriptor {
	d := desc(kv...)
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// TestAgreeSemantics: per-value counters, nesting and the most specific
// match, wildcards, unlimited, shadow mode, replaces, units and /json
// (scenarios that agreed before the issue, kept as a guard).
func TestAgreeSemantics(t *testing.T) {
	yaml := `domain: agree
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /login*
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: tenant
    value: acme
    rate_limit: {unit: day, requests_per_unit: 4}
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 100}
  - key: internal
    rate_limit: {unlimited: true}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: plan
    value: basic
    rate_limit: {unit: minute, requests_per_unit: 5, name: basic}
  - key: plan
    value: premium
    rate_limit: {unit: minute, requests_per_unit: 50, replaces: [{name: basic}]}
  - key: weekly
    rate_limit: {unit: week, requests_per_unit: 2}
` + probe
	p := startPair(t, "agree", yaml, opts{})
	var steps []step
	for i := 0; i < 4; i++ {
		steps = append(steps, step{"per value a", req("agree", desc("remote_address", "a")), nil})
	}
	steps = append(steps,
		step{"per value b", req("agree", desc("remote_address", "b")), nil},
		step{"wildcard", req("agree", desc("path", "/login/x")), nil},
		step{"wildcard 2", req("agree", desc("path", "/login")), nil},
		step{"wildcard 3", req("agree", desc("path", "/login/y")), nil},
		step{"nested", req("agree", desc("tenant", "acme", "user", "u1")), nil},
		step{"parent", req("agree", desc("tenant", "acme")), nil},
		step{"no match", req("agree", desc("tenant", "other")), nil},
		step{"unlimited", req("agree", desc("internal", "x")), nil},
		step{"shadow 1", req("agree", desc("trial", "t")), nil},
		step{"shadow 2", req("agree", desc("trial", "t")), nil},
		step{"replaces", req("agree", desc("plan", "basic"), desc("plan", "premium")), nil},
		step{"basic alone", req("agree", desc("plan", "basic")), nil},
		step{"week", req("agree", desc("weekly", "w")), nil},
		step{"unknown domain", req("nowhere", desc("remote_address", "a")), nil},
		step{"hits_addend", &pb.RateLimitRequest{Domain: "agree", HitsAddend: 2, Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "c")}}, nil},
	)
	p.run(steps...)
	// POST /json answers alike (the body's JSON fields, the status).
	body := `{"domain":"agree","descriptors":[{"entries":[{"key":"remote_address","value":"j"}]}]}`
	for i := 0; i < 4; i++ {
		rc, rt, _ := postJSON(t, p.ref, body)
		oc, ot, _ := postJSON(t, p.ours, body)
		if rc != oc || rt != ot {
			t.Fatalf("/json %d: %d %s from the reference, %d %s from rlserver", i, rc, rt, oc, ot)
		}
	}
}

// TestOverLimitCharged (issue 30, first point): by default the reference
// charges every descriptor, also when it answers OVER_LIMIT. Two
// descriptors where one goes over; a hits_addend above what is left;
// requests_per_unit 0 beside another limit; a shadow descriptor pushed
// over.
func TestOverLimitCharged(t *testing.T) {
	yaml := `domain: over
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: zero
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
` + probe
	p := startPair(t, "over", yaml, opts{})
	two := req("over", desc("a", "1"), desc("b", "1"))
	p.run(
		step{"two, 1st", two, nil}, step{"two, 2nd", two, nil}, step{"two, 3rd: b over", two, nil},
		step{"a after", req("over", desc("a", "1")), nil},
		step{"hits 8 of 10", req("over", hits(8, "a", "2")), nil},
		step{"hits 5, over", req("over", hits(5, "a", "2")), nil},
		step{"hits 1 after", req("over", hits(1, "a", "2")), nil},
		step{"zero beside a", req("over", desc("zero", "z"), desc("a", "3")), nil},
		step{"a after zero", req("over", desc("a", "3")), nil},
		step{"zero, hits 0", req("over", hits(0, "zero", "z")), nil},
		step{"shadow 1", req("over", desc("s", "1"), desc("a", "4")), nil},
		step{"shadow 2", req("over", desc("s", "1")), nil},
		step{"shadow 3 over", req("over", desc("s", "1")), nil},
		step{"shadow 4", req("over", hits(0, "s", "1")), nil},
	)
}

// TestStopIncrementWhenOverlimit: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
// set for both (rlserver reads the reference's variable).
func TestStopIncrementWhenOverlimit(t *testing.T) {
	yaml := `domain: stop
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 2}
` + probe
	p := startPair(t, "stop", yaml, opts{env: []string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true"}})
	two := req("stop", desc("a", "1"), desc("b", "1"))
	p.run(
		step{"two, 1st", two, nil}, step{"two, 2nd", two, nil}, step{"two, 3rd: b over", two, nil},
		step{"two, 4th", two, nil},
		step{"a after", req("stop", desc("a", "1")), nil},
		step{"b after", req("stop", desc("b", "1")), nil},
		step{"hits 8 of 10", req("stop", hits(8, "a", "2")), nil},
		step{"hits 5, over", req("stop", hits(5, "a", "2")), nil},
		step{"hits 2 after", req("stop", hits(2, "a", "2")), nil},
	)
}

// TestSameDescriptorTwice: the reference charges each occurrence in turn.
func TestSameDescriptorTwice(t *testing.T) {
	yaml := `domain: twice
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: u
    value: bob_a_x
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: u
    descriptors:
      - key: a
        rate_limit: {unit: minute, requests_per_unit: 10}
` + probe
	p := startPair(t, "twice", yaml, opts{})
	r := req("twice", desc("a", "1"), desc("a", "1"))
	p.run(step{"twice 1", r, nil}, step{"twice 2", r, nil}, step{"twice 3", r, nil},
		step{"flattened alike", req("twice", desc("u", "bob_a_x"), desc("u", "bob", "a", "x")), nil},
		step{"flattened alike 2", req("twice", desc("u", "bob", "a", "x")), nil})
}

// TestOverrideSharesCounter: a request's limit override shares the
// configured limit's counter when the window is the same.
func TestOverrideSharesCounter(t *testing.T) {
	yaml := `domain: ovr
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10}
` + probe
	awayFromHourStart(t)
	p := startPair(t, "ovr", yaml, opts{})
	ov := func(rpu uint32, unit typev3.RateLimitUnit) *rlpb.RateLimitDescriptor {
		d := desc("a", "1")
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
		return d
	}
	plain := req("ovr", desc("a", "1"))
	p.run(step{"config 1", plain, nil}, step{"config 2", plain, nil}, step{"config 3", plain, nil},
		step{"override 10/minute", req("ovr", ov(10, typev3.RateLimitUnit_MINUTE)), nil},
		step{"override 5/minute", req("ovr", ov(5, typev3.RateLimitUnit_MINUTE)), nil},
		step{"override 3/hour", req("ovr", ov(3, typev3.RateLimitUnit_HOUR)), nil},
		step{"override unconfigured", req("ovr", func() *rlpb.RateLimitDescriptor {
			d := desc("zz", "1")
			d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE}
			return d
		}()), nil},
		step{"config after", plain, nil})
}

// TestEmptyEntriesAndErrors: a descriptor with no entries is OK with no
// limit; an empty domain or descriptor list is gRPC Unknown; a bad /json
// body is 400 text/plain "Bad Request".
func TestEmptyEntriesAndErrors(t *testing.T) {
	yaml := `domain: errs
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 2}
` + probe
	p := startPair(t, "errs", yaml, opts{})
	p.run(step{"no entries", req("errs", desc()), nil},
		step{"no entries beside a", req("errs", desc(), desc("a", "1")), nil},
		step{"empty domain", req("", desc("a", "1")), nil},
		step{"no descriptors", req("errs"), nil},
		step{"a after", req("errs", desc("a", "1")), nil})
	for _, body := range []string{`{"domain":`, `not json`, `{"domain":"errs","bogus":1}`, `{"domain":"","descriptors":[{"entries":[{"key":"a","value":"1"}]}]}`, `{"domain":"errs"}`} {
		rc, rt, rb := postJSON(t, p.ref, body)
		oc, ot, ob := postJSON(t, p.ours, body)
		if rc != oc || rt != ot || rb != ob {
			t.Fatalf("/json %q: %d %q %q from the reference, %d %q %q from rlserver", body, rc, rt, rb, oc, ot, ob)
		}
	}
}

// TestYAMLNumbers: YAML 1.1's readings (010 is 8, 0x10, 1_000, yes/on,
// a repeated key) give the same limits.
func TestYAMLNumbers(t *testing.T) {
	yaml := `domain: nums
descriptors:
  - key: octal
    rate_limit: {unit: minute, requests_per_unit: 010}
  - key: hex
    rate_limit: {unit: minute, requests_per_unit: 0x10}
  - key: under
    rate_limit: {unit: minute, requests_per_unit: 1_000}
  - key: yes
    shadow_mode: yes
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: on
    shadow_mode: on
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: rep
    rate_limit:
      unit: minute
      requests_per_unit: 7
      requests_per_unit: 9
` + probe
	p := startPair(t, "nums", yaml, opts{})
	p.run(step{"octal", req("nums", desc("octal", "x")), nil},
		step{"hex", req("nums", desc("hex", "x")), nil},
		step{"underscores", req("nums", desc("under", "x")), nil},
		step{"yes 1", req("nums", desc("yes", "x")), nil},
		step{"yes 2 (shadow)", req("nums", desc("yes", "x")), nil},
		step{"on 1", req("nums", desc("on", "x")), nil},
		step{"on 2 (shadow)", req("nums", desc("on", "x")), nil},
		step{"repeated key", req("nums", desc("rep", "x")), nil})
	resp, err := p.call(p.ours, req("nums", desc("octal", "x")))
	if err != nil || resp.Statuses[0].CurrentLimit.RequestsPerUnit != 8 {
		t.Fatalf("010: %v %v, want 8 as YAML 1.1 reads it", resp, err)
	}
}

// TestReloadLengthensWindow: a reload that makes a minute an hour starts
// a new counter in the reference (its key ends with the window's start),
// and here.
func TestReloadLengthensWindow(t *testing.T) {
	v1 := `domain: rel
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 5}
` + probe
	v2 := strings.Replace(strings.Replace(v1, "unit: minute", "unit: hour", 1), "requests_per_unit: 1000", "requests_per_unit: 999", 1)
	awayFromHourStart(t)
	p := startPair(t, "rel", v1, opts{steps: 10 * time.Second})
	a := req("rel", desc("a", "1"))
	p.run(step{"minute 1", a, nil}, step{"minute 2", a, nil}, step{"minute 3", a, nil}, step{"minute 4", a, nil})
	p.write(v2)
	p.waitProbe(p.ref, "rel", 999)
	p.waitProbe(p.ours, "rel", 999)
	p.run(step{"hour 1", a, nil}, step{"hour 2", a, nil})
}

// TestSecondRollover: a second's window rolls over alike (a counter
// charged past its limit in one second starts afresh in the next).
func TestSecondRollover(t *testing.T) {
	yaml := `domain: roll
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 2}
` + probe
	p := startPair(t, "roll", yaml, opts{})
	a := req("roll", desc("a", "1"))
	for round := 0; round < 2; round++ {
		// Start early in a second, so that the round's requests share it.
		time.Sleep(time.Second - time.Duration(time.Now().UnixNano()%int64(time.Second)) + 20*time.Millisecond)
		p.run(step{"1st", a, nil}, step{"2nd", a, nil}, step{"3rd over", a, nil}, step{"4th over", a, nil})
	}
}

// awayFromHourStart waits out an hour's first minute: in it the
// reference's minute and hour keys coincide (both end with the same
// start), a difference docs/migrating.md lists, which the scenarios that
// change a window would otherwise meet once an hour.
func awayFromHourStart(t *testing.T) {
	if into := time.Now().Unix() % 3600; into < 60 {
		t.Logf("waiting %ds for the hour's second minute", 61-into)
		time.Sleep(time.Duration(61-into) * time.Second)
	}
}
