package luaref_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/luaref"
)

func TestNamesAreTheAlgorithms(t *testing.T) {
	var want []string
	for a := engine.Fixed; a <= engine.GCRA; a++ {
		want = append(want, a.String())
	}
	slices.Sort(want)
	if got := luaref.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	all := luaref.Scripts()
	for _, name := range want {
		src, ok := luaref.Source(name)
		if !ok || src == "" || all[name] != src {
			t.Errorf("Source(%q) = %d bytes, %v; Scripts()[%q] = %d bytes", name, len(src), ok, name, len(all[name]))
		}
	}
	delete(all, "fixed")
	if _, ok := luaref.Scripts()["fixed"]; !ok {
		t.Error("Scripts() returned a shared map: deleting from one copy changed the next")
	}
	for _, name := range []string{"", "nope", "fixed.lua", "../luaref/fixed"} {
		if _, ok := luaref.Source(name); ok {
			t.Errorf("Source(%q) found a script", name)
		}
	}
}

// TestScriptsDocumentTheirContract checks that each script's header states
// the calling convention that doc.go promises and the tests rely on.
func TestScriptsDocumentTheirContract(t *testing.T) {
	for name, src := range luaref.Scripts() {
		want := []string{"KEYS[1]", "ARGV[1]  limit", "ARGV[2]  window  window length, microseconds",
			"ARGV[3]  now     the caller's clock, microseconds since the Unix epoch", "ARGV[4]  cost",
			"Returns {allowed, remaining, retry_after_us, reset_after_us}"}
		if a, _ := engine.ParseAlgo([]byte(name)); a.Bucket() {
			want = append(want, "ARGV[5]  burst")
		}
		if name == "gcra" {
			want = append(want, strconv.FormatInt(gcraEpochUS, 10))
		}
		for _, w := range want {
			if !strings.Contains(src, w) {
				t.Errorf("%s.lua does not say %q", name, w)
			}
		}
	}
}

// TestScriptsByHand runs short time-stepped tables, worked out by hand,
// through the scripts and the engine: cases the random traces do not reach
// (costs in the thousands, an absent ARGV[5]) and the replies' meaning
// spelled out.
func TestScriptsByHand(t *testing.T) {
	s := startScripts(t)
	const t0 = traceStartUS // on every window edge used here
	type step struct {
		at   int64 // µs after t0
		p    engine.Params
		cost int64
		want luaReply
	}
	ms := func(n int64) int64 { return n * 1000 }
	perSec := func(limit int64) engine.Params { return engine.Params{Limit: limit, Window: 1e9} }
	tests := []struct {
		name  string
		algo  engine.Algo
		steps []step
	}{
		{"fixed: the limit per window, then the next window", engine.Fixed, []step{
			{0, perSec(3), 2, luaReply{true, 1, 0, ms(1000)}},
			{ms(400), perSec(3), 2, luaReply{false, 1, ms(600), ms(600)}},
			{ms(400), perSec(3), 4, luaReply{false, 1, -1, ms(600)}},
			{ms(1000), perSec(3), 3, luaReply{true, 0, 0, ms(1000)}},
		}},
		{"log: thousands of members in one call, unique at one instant", engine.Log, []step{
			{0, perSec(5000), 4500, luaReply{true, 500, 0, ms(1000)}},
			{0, perSec(5000), 499, luaReply{true, 1, 0, ms(1000)}},
			{ms(10), perSec(5000), 2, luaReply{false, 1, ms(990), ms(990)}},
			{ms(1000), perSec(5000), 5000, luaReply{true, 0, 0, ms(1000)}},
		}},
		{"sliding: the previous window weighs as it overlaps", engine.Sliding, []step{
			{0, perSec(4), 4, luaReply{true, 0, 0, ms(2000) - ms(250) + 1}},
			// Half way through the next window the 4 weigh 2.
			{ms(1500), perSec(4), 2, luaReply{true, 0, 0, ms(1000) + 1}},
			// They weigh 1 from 1 µs later on.
			{ms(1500), perSec(4), 1, luaReply{false, 0, 1, ms(1000) + 1}},
			{ms(1500) + 1, perSec(4), 1, luaReply{true, 0, 0, 1166666}},
		}},
		{"token: ARGV[5] absent is BURST 0, the limit", engine.Token, []step{
			{0, perSec(4), 4, luaReply{true, 0, 0, ms(1000)}},
			{ms(500), perSec(4), 3, luaReply{false, 2, ms(250), ms(500)}},
		}},
		{"leaky: ARGV[5] absent is BURST 0, the limit", engine.Leaky, []step{
			{0, perSec(4), 4, luaReply{true, 0, 0, ms(1000)}},
			{ms(500), perSec(4), 3, luaReply{false, 2, ms(250), ms(500)}},
		}},
		{"gcra: ARGV[5] absent is BURST 0, the limit", engine.GCRA, []step{
			{0, perSec(4), 4, luaReply{true, 0, 0, ms(1000)}},
			{ms(500), perSec(4), 3, luaReply{false, 2, ms(250), ms(500)}},
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "{byhand:" + strconv.Itoa(i) + "}"
			var state engine.State
			for j, st := range tt.steps {
				r := engine.Check(tt.algo, &state, st.p, st.cost, (t0+st.at)*1000)
				if eng := (luaReply{r.Allowed, r.Remaining, ceilUS(r.RetryAfter), ceilUS(r.ResetAfter)}); eng != st.want {
					t.Errorf("step %d: engine replied %+v, want %v", j, r, st.want)
				}
				argv := args(tt.algo, st.p, st.cost, t0+st.at)
				if tt.algo.Bucket() {
					argv = argv[:4] // no ARGV[5]
				}
				v, err := s.rdb.EvalSha(t.Context(), s.sha[tt.algo.String()], []string{key}, argv...).Result()
				if err != nil {
					t.Fatalf("step %d: %v", j, err)
				}
				got, err := parseReply(v)
				if err != nil {
					t.Fatalf("step %d: %v", j, err)
				}
				if got != st.want {
					t.Errorf("step %d (+%dus, cost %d): got %v, want %v", j, st.at, st.cost, got, st.want)
				}
			}
		})
	}
}
