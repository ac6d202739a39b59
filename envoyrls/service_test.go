package envoyrls_test

import (
	"math"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlserver/rlserver/envoyrls"
	"github.com/rlserver/rlserver/envoyrls/config"
)

const semantics = `domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: remote_address
    value: 10.0.0.9
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: /login*
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: /free
    rate_limit: {unlimited: true}
  - key: path
    value: /closed
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: user
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: plan
    value: basic
    rate_limit: {unit: minute, requests_per_unit: 5, name: basic}
  - key: plan
    value: premium
    rate_limit: {unit: minute, requests_per_unit: 50, name: premium, replaces: [{name: basic}]}
  - key: tenant
    descriptors:
      - key: api_key
        rate_limit: {unit: day, requests_per_unit: 2}
  - key: sliding
    rate_limit: {unit: minute, requests_per_unit: 4, algorithm: sliding}
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token, burst: 2}
  - key: tens
    rate_limit: {unit: second, unit_multiplier: 10, requests_per_unit: 2}
  - key: both
    rate_limit: {unit: second, requests_per_unit: 3, name: per-second}
    rate_limits:
      - {unit: hour, requests_per_unit: 5, name: per-hour}
`

// want checks one descriptor status.
func want(t *testing.T, what string, st *pb.RateLimitResponse_DescriptorStatus, code pb.RateLimitResponse_Code, remaining uint32, resetSec int64) {
	t.Helper()
	if st.Code != code || st.LimitRemaining != remaining || st.GetDurationUntilReset().GetSeconds() != resetSec {
		t.Fatalf("%s: code %v remaining %d reset %v, want %v %d %ds", what, st.Code, st.LimitRemaining, st.GetDurationUntilReset(), code, remaining, resetSec)
	}
}

const ok, over = pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT

// TestFixedWindowPerValue: a key-only descriptor counts each value apart,
// in windows aligned to the unit; duration_until_reset is the rest of
// the window in whole seconds; the current limit says what applies.
func TestFixedWindowPerValue(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	for i, rem := range []uint32{2, 1, 0} {
		resp := r.ask("api", desc("remote_address", "10.0.0.1"))
		if resp.OverallCode != ok {
			t.Fatalf("hit %d: %v", i, resp)
		}
		want(t, "10.0.0.1", resp.Statuses[0], ok, rem, 43)
	}
	resp := r.ask("api", desc("remote_address", "10.0.0.1"))
	if resp.OverallCode != over {
		t.Fatalf("4th hit: %v", resp)
	}
	want(t, "10.0.0.1 over", resp.Statuses[0], over, 0, 43)
	if cl := resp.Statuses[0].CurrentLimit; cl.RequestsPerUnit != 3 || cl.Unit != pb.RateLimitResponse_RateLimit_MINUTE {
		t.Fatalf("current limit %v", cl)
	}
	want(t, "another value", r.ask("api", desc("remote_address", "10.0.0.2")).Statuses[0], ok, 2, 43)
	r.clock.Advance(42 * time.Second) // 59 s into the minute: same window
	want(t, "same window", r.ask("api", desc("remote_address", "10.0.0.1")).Statuses[0], over, 0, 1)
	r.clock.Advance(time.Second) // the next minute
	want(t, "next window", r.ask("api", desc("remote_address", "10.0.0.1")).Statuses[0], ok, 2, 60)
}

// rest is duration_until_reset at t0 for a unit of u seconds.
func rest(u int64) int64 { return u - t0.Unix()%u }

// TestMostSpecificMatch: key_value beats key; a trailing '*' matches a
// prefix; nested descriptors match only at full depth; no match is OK
// with no limit.
func TestMostSpecificMatch(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	want(t, "exact value", r.ask("api", desc("remote_address", "10.0.0.9")).Statuses[0], ok, 0, 43)
	want(t, "exact value over", r.ask("api", desc("remote_address", "10.0.0.9")).Statuses[0], over, 0, 43)
	want(t, "wildcard", r.ask("api", desc("path", "/login/sso")).Statuses[0], ok, 1, rest(3600))
	want(t, "wildcard, another value", r.ask("api", desc("path", "/login")).Statuses[0], ok, 1, rest(3600))
	want(t, "nested", r.ask("api", desc("tenant", "t1", "api_key", "k1")).Statuses[0], ok, 1, rest(86400))
	want(t, "nested, other tenant", r.ask("api", desc("tenant", "t2", "api_key", "k1")).Statuses[0], ok, 1, rest(86400))
	for _, d := range []*rlpb.RateLimitDescriptor{desc("tenant", "t1"), desc("path", "/x"), desc("nothing", "x"),
		desc("remote_address", "1", "extra", "2")} {
		st := r.ask("api", d).Statuses[0]
		if st.Code != ok || st.CurrentLimit != nil || st.LimitRemaining != 0 || st.DurationUntilReset != nil {
			t.Fatalf("%v matched: %v", d, st)
		}
	}
}

// TestUnknownDomain: OK for every descriptor, no limit, even with an
// override (as envoyproxy/ratelimit).
func TestUnknownDomain(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	d := desc("remote_address", "1")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 0, Unit: typev3.RateLimitUnit_SECOND}
	resp := r.ask("nope", d, desc("x", "y"))
	if resp.OverallCode != ok || len(resp.Statuses) != 2 || resp.Statuses[0].CurrentLimit != nil || resp.Statuses[1].Code != ok {
		t.Fatalf("unknown domain: %v", resp)
	}
}

// TestUnlimitedZeroAndShadow: unlimited is OK with no current limit and
// the largest remaining; requests_per_unit 0 is always over; shadow mode
// answers OK when over.
func TestUnlimitedZeroAndShadow(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	for i := 0; i < 3; i++ {
		st := r.ask("api", desc("path", "/free")).Statuses[0]
		if st.Code != ok || st.CurrentLimit != nil || st.LimitRemaining != math.MaxUint32 || st.DurationUntilReset != nil {
			t.Fatalf("unlimited: %v", st)
		}
	}
	resp := r.ask("api", desc("path", "/closed"))
	if resp.OverallCode != over || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 0 {
		t.Fatalf("requests_per_unit 0: %v", resp)
	}
	want(t, "zero", resp.Statuses[0], over, 0, 1)
	want(t, "shadow 1", r.ask("api", desc("user", "u")).Statuses[0], ok, 0, 43)
	resp = r.ask("api", desc("user", "u"))
	if resp.OverallCode != ok || resp.Statuses[0].CurrentLimit == nil {
		t.Fatalf("shadow over: %v", resp)
	}
	want(t, "shadow 2", resp.Statuses[0], ok, 0, 43)
}

// TestOverallAndEach: one descriptor over makes the whole request
// OVER_LIMIT, and by default every descriptor is charged all the same, as
// envoyproxy/ratelimit charges them; a counter named twice is charged in
// turn.
func TestOverallAndEach(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	r.ask("api", desc("remote_address", "a"), desc("remote_address", "10.0.0.9"))
	resp := r.ask("api", desc("remote_address", "a"), desc("remote_address", "10.0.0.9"))
	if resp.OverallCode != over {
		t.Fatalf("second: %v", resp)
	}
	want(t, "a, charged", resp.Statuses[0], ok, 1, 43)
	want(t, "10.0.0.9", resp.Statuses[1], over, 0, 43)
	want(t, "a alone", r.ask("api", desc("remote_address", "a")).Statuses[0], ok, 0, 43)
	resp = r.ask("api", desc("remote_address", "c"), desc("remote_address", "c"))
	want(t, "same counter, first", resp.Statuses[0], ok, 2, 43)
	want(t, "same counter, second", resp.Statuses[1], ok, 1, 43)
}

// TestOverallAndAllOrNothing: with ChargeAllOrNothing, a denied request
// charges none of its descriptors.
func TestOverallAndAllOrNothing(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{}, allOrNothing)
	resp := r.ask("api", desc("remote_address", "a"), desc("remote_address", "10.0.0.9"))
	if resp.OverallCode != ok {
		t.Fatalf("first: %v", resp)
	}
	resp = r.ask("api", desc("remote_address", "a"), desc("remote_address", "10.0.0.9"))
	if resp.OverallCode != over {
		t.Fatalf("second: %v", resp)
	}
	want(t, "a, not charged", resp.Statuses[0], ok, 2, 43)
	want(t, "10.0.0.9", resp.Statuses[1], over, 0, 43)
	want(t, "a alone", r.ask("api", desc("remote_address", "a")).Statuses[0], ok, 1, 43)
	// A shadow descriptor over its limit does not deny the others.
	r.ask("api", desc("user", "v"))
	resp = r.ask("api", desc("user", "v"), desc("remote_address", "b"))
	if resp.OverallCode != ok || resp.Statuses[1].LimitRemaining != 2 {
		t.Fatalf("shadow beside: %v", resp)
	}
	// Two descriptors naming the same counter charge it with both.
	resp = r.ask("api", desc("remote_address", "c"), desc("remote_address", "c"))
	want(t, "same counter twice", resp.Statuses[0], ok, 1, 43)
}

// TestReplaces: a matched limit named in another matched limit's replaces
// does not apply.
func TestReplaces(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	resp := r.ask("api", desc("plan", "basic"), desc("plan", "premium"))
	if st := resp.Statuses[0]; st.Code != ok || st.CurrentLimit != nil {
		t.Fatalf("replaced: %v", st)
	}
	want(t, "premium", resp.Statuses[1], ok, 49, 43)
	want(t, "basic alone", r.ask("api", desc("plan", "basic")).Statuses[0], ok, 4, 43)
}

// TestHitsAddend: the request's hits_addend (0 is 1), the descriptor's
// (which overrides it, and 0 only looks).
func TestHitsAddend(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	resp, err := r.call(&pb.RateLimitRequest{Domain: "api", HitsAddend: 2, Descriptors: []*rlpb.RateLimitDescriptor{desc("remote_address", "h")}})
	if err != nil {
		t.Fatal(err)
	}
	want(t, "request hits 2", resp.Statuses[0], ok, 1, 43)
	d := desc("remote_address", "h")
	d.HitsAddend = wrapperspb.UInt64(0)
	want(t, "descriptor hits 0", r.ask("api", d).Statuses[0], ok, 1, 43)
	d.HitsAddend = wrapperspb.UInt64(2)
	want(t, "descriptor hits 2 over", r.ask("api", d).Statuses[0], over, 0, 43)
	d.HitsAddend = wrapperspb.UInt64(1)
	resp, _ = r.call(&pb.RateLimitRequest{Domain: "api", HitsAddend: 5, Descriptors: []*rlpb.RateLimitDescriptor{d}})
	// The refused 2 were charged (the reference's INCRBY): 1 more is over.
	want(t, "descriptor hits 1 beats request's 5", resp.Statuses[0], over, 0, 43)
	d.HitsAddend = wrapperspb.UInt64(0)
	resp, _ = r.call(&pb.RateLimitRequest{Domain: "api", HitsAddend: 5, Descriptors: []*rlpb.RateLimitDescriptor{d}})
	want(t, "descriptor hits 0 beats request's 5", resp.Statuses[0], over, 0, 43)
}

// TestLimitOverride: a descriptor's own limit applies instead of the
// configured one, matched or not.
func TestLimitOverride(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	d := desc("remote_address", "o")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_HOUR}
	st := r.ask("api", d).Statuses[0]
	want(t, "override", st, ok, 1, rest(3600))
	if st.CurrentLimit.RequestsPerUnit != 2 || st.CurrentLimit.Unit != pb.RateLimitResponse_RateLimit_HOUR {
		t.Fatalf("override limit %v", st.CurrentLimit)
	}
	d2 := desc("unconfigured", "x")
	d2.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE}
	want(t, "override, unconfigured", r.ask("api", d2).Statuses[0], ok, 0, 43)
	want(t, "override, unconfigured over", r.ask("api", d2).Statuses[0], over, 0, 43)
}

// TestAlgorithmsAndSeveralLimits: rlserver's additions.
func TestAlgorithmsAndSeveralLimits(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	// sliding: 4 per minute, weighted with the previous minute.
	for i := 0; i < 4; i++ {
		r.ask("api", desc("sliding", "s"))
	}
	r.clock.Advance(43 * time.Second) // the next minute starts
	if st := r.ask("api", desc("sliding", "s")).Statuses[0]; st.Code != over {
		t.Fatalf("sliding, start of the next minute: %v", st)
	}
	r.clock.Advance(45 * time.Second) // 3/4 through: weight 1 of the 4
	if st := r.ask("api", desc("sliding", "s")).Statuses[0]; st.Code != ok {
		t.Fatalf("sliding, later: %v", st)
	}
	// token, burst 2, 1 per second.
	want(t, "token 1", r.ask("api", desc("bucket", "b")).Statuses[0], ok, 1, 1)
	want(t, "token 2", r.ask("api", desc("bucket", "b")).Statuses[0], ok, 0, 2)
	if st := r.ask("api", desc("bucket", "b")).Statuses[0]; st.Code != over {
		t.Fatalf("token 3: %v", st)
	}
	r.clock.Advance(time.Second)
	want(t, "token refilled", r.ask("api", desc("bucket", "b")).Statuses[0], ok, 0, 2)
	// unit_multiplier: windows of 10 s, aligned.
	now := r.clock.Now() / 1e9
	for i := 0; i < 2; i++ {
		want(t, "tens", r.ask("api", desc("tens", "x")).Statuses[0], ok, uint32(1-i), 10-now%10)
	}
	want(t, "tens over", r.ask("api", desc("tens", "x")).Statuses[0], over, 0, 10-now%10)
	// Two limits on one descriptor: the one that denies first speaks.
	for i := 0; i < 3; i++ {
		st := r.ask("api", desc("both", "x")).Statuses[0]
		if st.Code != ok || st.CurrentLimit.Name != "per-second" || st.LimitRemaining != uint32(2-i) {
			t.Fatalf("both %d: %v", i, st)
		}
	}
	if st := r.ask("api", desc("both", "x")).Statuses[0]; st.Code != over || st.CurrentLimit.Name != "per-second" {
		t.Fatalf("both over the second: %v", st)
	}
	r.clock.Advance(time.Second)
	// The hour was charged with the request over the second too.
	for i := 0; i < 1; i++ {
		if st := r.ask("api", desc("both", "x")).Statuses[0]; st.Code != ok || st.CurrentLimit.Name != "per-hour" || st.LimitRemaining != uint32(0-i) {
			t.Fatalf("both, next second %d: %v", i, st)
		}
	}
	if st := r.ask("api", desc("both", "x")).Statuses[0]; st.Code != over || st.CurrentLimit.Name != "per-hour" {
		t.Fatalf("both over the hour: %v", st)
	}
}

// TestResponseHeaders: the draft-10 fields of the most restrictive limit.
func TestResponseHeaders(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{})
	resp := r.ask("api", desc("plan", "premium"), desc("remote_address", "10.0.0.9"))
	got := map[string]string{}
	for _, h := range resp.ResponseHeadersToAdd {
		got[h.Key] = h.Value
	}
	if got["RateLimit-Policy"] != `"remote_address_10.0.0.9";q=1;w=60` || got["RateLimit"] != `"remote_address_10.0.0.9";r=0;t=43` {
		t.Fatalf("headers %v", got)
	}
}

// TestMetrics: envoyproxy/ratelimit's per-descriptor counters; values
// appear as labels only with detailed_metric, and their number is bounded.
func TestMetrics(t *testing.T) {
	r := startRLS(t, semantics+`  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
`, envoyrls.ServerOptions{})
	for i := 0; i < 5; i++ {
		r.ask("api", desc("remote_address", "m"))
	}
	r.ask("api", desc("detailed", "v1"))
	r.ask("nope", desc("x", "y"))
	got := gather(t, r)
	for k, v := range map[string]float64{
		"total_hits/remote_address": 5, "within_limit/remote_address": 3, "near_limit/remote_address": 1,
		"over_limit/remote_address": 2, "total_hits/detailed_v1": 1, "domain_not_found/nope": 1,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// gather reads the service's counters as "name/key" → value.
func gather(t *testing.T, r *rls) map[string]float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		name := strings.TrimPrefix(strings.TrimPrefix(mf.GetName(), "ratelimit_service_rate_limit_"), "rlserver_rls_rate_limit_")
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "key" || (name == "domain_not_found" && l.GetName() == "domain") {
					out[name+"/"+l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestCounterKeysApartByAlgorithm: [user=alice_action_login] and [user=alice,
// action=login] flatten to the same counter key, as in envoyproxy/ratelimit,
// which shares the counter. Two fixed windows still share it, as there; but
// descriptors of different algorithms keep their state apart (before, each
// dropped the other's state, alone and in one request).
func TestCounterKeysApartByAlgorithm(t *testing.T) {
	r := startRLS(t, `domain: kc
descriptors:
  - key: user
    value: alice_action_login
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: token}
  - key: user
    descriptors:
      - key: action
        rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding}
  - key: u
    value: bob_a_x
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: u
    descriptors:
      - key: a
        rate_limit: {unit: minute, requests_per_unit: 10}
`, envoyrls.ServerOptions{})
	token := desc("user", "alice_action_login")
	sliding := desc("user", "alice", "action", "login")
	for i, step := range []struct {
		descs []*rlpb.RateLimitDescriptor
		want  []uint32 // limit_remaining of each descriptor
	}{
		{[]*rlpb.RateLimitDescriptor{token}, []uint32{4}},
		{[]*rlpb.RateLimitDescriptor{sliding}, []uint32{2}},
		{[]*rlpb.RateLimitDescriptor{token}, []uint32{3}},
		{[]*rlpb.RateLimitDescriptor{sliding}, []uint32{1}},
		{[]*rlpb.RateLimitDescriptor{token, sliding}, []uint32{2, 0}},
		{[]*rlpb.RateLimitDescriptor{token}, []uint32{1}},
		// Fixed windows share the reference's counter.
		{[]*rlpb.RateLimitDescriptor{desc("u", "bob_a_x")}, []uint32{9}},
		{[]*rlpb.RateLimitDescriptor{desc("u", "bob", "a", "x")}, []uint32{8}},
		{[]*rlpb.RateLimitDescriptor{desc("u", "bob_a_x"), desc("u", "bob", "a", "x")}, []uint32{7, 6}},
	} {
		resp := r.ask("kc", step.descs...)
		for j, w := range step.want {
			if st := resp.Statuses[j]; st.Code != ok || st.LimitRemaining != w {
				t.Fatalf("step %d, descriptor %d: %v remaining %d, want OK %d", i, j, st.Code, st.LimitRemaining, w)
			}
		}
	}
}

// chargingYAML has two fixed windows for the charging tests.
const chargingYAML = `domain: ch
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 2}
`

// TestStopWhenOver: envoyproxy/ratelimit's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT:
// when a descriptor would go over, only those that would are charged.
func TestStopWhenOver(t *testing.T) {
	r := startRLS(t, chargingYAML, envoyrls.ServerOptions{}, func(c *envoyrls.Config) { c.Charging = envoyrls.ChargeStopWhenOver })
	r.ask("ch", desc("a", "1"), desc("b", "1"))
	r.ask("ch", desc("a", "1"), desc("b", "1"))
	resp := r.ask("ch", desc("a", "1"), desc("b", "1"))
	want(t, "a, not charged", resp.Statuses[0], ok, 8, 43)
	want(t, "b over", resp.Statuses[1], over, 0, 43)
	want(t, "a alone", r.ask("ch", desc("a", "1")).Statuses[0], ok, 7, 43)
	// Nothing would go over: every descriptor is charged.
	resp = r.ask("ch", desc("a", "1"), desc("b", "2"))
	want(t, "a with b2", resp.Statuses[0], ok, 6, 43)
	want(t, "b2", resp.Statuses[1], ok, 1, 43)
}

// TestOverrideSharesCounter: a limit override of the configured window
// charges the configured limit's counter; another window has its own.
func TestOverrideSharesCounter(t *testing.T) {
	r := startRLS(t, chargingYAML, envoyrls.ServerOptions{})
	for i := 0; i < 3; i++ {
		r.ask("ch", desc("a", "1"))
	}
	d := desc("a", "1")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 10, Unit: typev3.RateLimitUnit_MINUTE}
	want(t, "override, same window", r.ask("ch", d).Statuses[0], ok, 6, 43)
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 10, Unit: typev3.RateLimitUnit_HOUR}
	want(t, "override, an hour", r.ask("ch", d).Statuses[0], ok, 9, rest(3600))
	want(t, "configured after", r.ask("ch", desc("a", "1")).Statuses[0], ok, 5, 43)
}

// TestNoEntries: a descriptor without entries answers OK with no limit,
// beside others that are counted.
func TestNoEntries(t *testing.T) {
	r := startRLS(t, chargingYAML, envoyrls.ServerOptions{})
	resp := r.ask("ch", desc(), desc("a", "1"))
	if st := resp.Statuses[0]; st.Code != ok || st.CurrentLimit != nil || st.LimitRemaining != 0 {
		t.Fatalf("no entries: %v", st)
	}
	want(t, "a beside", resp.Statuses[1], ok, 9, 43)
}

// TestWindowChangeIsNewCounter: a reload that makes a window longer
// starts a new counter, as the reference's keys (which end with the
// window's start) do.
func TestWindowChangeIsNewCounter(t *testing.T) {
	r := startRLS(t, chargingYAML, envoyrls.ServerOptions{})
	for i := 0; i < 4; i++ {
		r.ask("ch", desc("a", "1"))
	}
	c := config.Empty()
	if err := config.Parse(c, "test.yaml", []byte(strings.Replace(chargingYAML, "unit: minute, requests_per_unit: 10", "unit: hour, requests_per_unit: 10", 1)), config.Options{}); err != nil {
		t.Fatal(err)
	}
	r.svc.SetConfig(c)
	want(t, "an hour now", r.ask("ch", desc("a", "1")).Statuses[0], ok, 9, rest(3600))
}
