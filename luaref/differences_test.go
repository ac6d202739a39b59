package luaref_test

import (
	"fmt"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// namedCall is one request of a TestNamedDifferences case: at is µs after
// the case's start (2026-01-01T00:00:00Z, on every window edge used here).
type namedCall struct {
	at   int64
	p    engine.Params
	cost int64
}

// TestNamedDifferences pins, with concrete numbers, each difference between
// the reference scripts and the engine that the differential test names.
// Each case sends the same calls to both and checks both replies to the
// last call exactly.
func TestNamedDifferences(t *testing.T) {
	s := startScripts(t)
	perSec := func(limit, burst int64) engine.Params {
		return engine.Params{Limit: limit, Window: 1e9, Burst: burst}
	}
	tests := []struct {
		name  string
		algo  engine.Algo
		calls []namedCall
		lua   luaReply      // the script's reply to the last call
		eng   engine.Result // the engine's
	}{{
		// 0.00002 tokens left at 100002 µs, plus 0.99998 refilled by
		// 200000 µs, is one token; in doubles it is 0.9999999999999999.
		name: "token: doubles miss a whole token by an ulp",
		algo: engine.Token,
		calls: []namedCall{
			{0, perSec(10, 0), 10}, {100002, perSec(10, 0), 1}, {200000, perSec(10, 0), 1},
		},
		lua: luaReply{Allowed: false, Remaining: 0, RetryAfter: 1, ResetAfter: 900000},
		eng: engine.Result{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 1e9},
	}, {
		// Half empty; then the rate goes up tenfold with the same burst.
		// Both keep the 5 tokens and take one: raising a limit never takes
		// tokens away. (This case pins an agreement, not a difference.)
		name:  "token: a higher rate keeps the tokens in both",
		algo:  engine.Token,
		calls: []namedCall{{0, perSec(10, 10), 5}, {0, perSec(100, 10), 1}},
		lua:   luaReply{Allowed: true, Remaining: 4, ResetAfter: 60000},
		eng:   engine.Result{Allowed: true, Limit: 10, Remaining: 4, ResetAfter: 60e6},
	}, {
		name:  "token: a larger burst keeps the tokens available in Lua, the tokens in use in the engine",
		algo:  engine.Token,
		calls: []namedCall{{0, perSec(10, 10), 1}, {0, perSec(10, 20), 1}},
		lua:   luaReply{Allowed: true, Remaining: 8, ResetAfter: 1200000},
		eng:   engine.Result{Allowed: true, Limit: 20, Remaining: 18, ResetAfter: 200e6},
	}, {
		// An agreement too: the level is kept through a new rate.
		name:  "leaky: a higher rate keeps the level in both",
		algo:  engine.Leaky,
		calls: []namedCall{{0, perSec(10, 0), 5}, {0, perSec(20, 10), 1}},
		lua:   luaReply{Allowed: true, Remaining: 4, ResetAfter: 300000},
		eng:   engine.Result{Allowed: true, Limit: 10, Remaining: 4, ResetAfter: 300e6},
	}, {
		// 8 of 10 in use; the burst drops to 4. The script keeps the level
		// of 8 and denies even a peek until it has drained to 4; the engine
		// counts a full bucket of 4, which drains in 0.4 s.
		name:  "leaky: a smaller burst caps the level in the engine only",
		algo:  engine.Leaky,
		calls: []namedCall{{0, perSec(10, 10), 8}, {0, perSec(10, 4), 0}},
		lua:   luaReply{Allowed: false, Remaining: 0, RetryAfter: 400000, ResetAfter: 800000},
		eng:   engine.Result{Allowed: true, Limit: 4, Remaining: 0, ResetAfter: 400e6},
	}, {
		// 3 in [10 s, 20 s); at 16 s the window becomes a minute, which
		// holds the old window: the engine keeps the 3, the script keys
		// the minute afresh.
		name: "fixed: a longer window carries the count in the engine only",
		algo: engine.Fixed,
		calls: []namedCall{
			{15e6, engine.Params{Limit: 5, Window: 10e9}, 3}, {16e6, engine.Params{Limit: 5, Window: 60e9}, 1},
		},
		lua: luaReply{Allowed: true, Remaining: 4, ResetAfter: 44e6},
		eng: engine.Result{Allowed: true, Limit: 5, Remaining: 1, ResetAfter: 44e9},
	}, {
		name: "sliding: a longer window carries the count in the engine only",
		algo: engine.Sliding,
		calls: []namedCall{
			{15e6, engine.Params{Limit: 5, Window: 10e9}, 3}, {16e6, engine.Params{Limit: 5, Window: 60e9}, 1},
		},
		lua: luaReply{Allowed: true, Remaining: 4, ResetAfter: 44000001},
		eng: engine.Result{Allowed: true, Limit: 5, Remaining: 1, ResetAfter: 89000000001},
	}, {
		// Exactly one more request fits; the double TAT, rounded to
		// 1/128 µs, leaves 0.99999998 of it.
		name:  "gcra: remaining computed in doubles can be one short",
		algo:  engine.GCRA,
		calls: []namedCall{{29160913382, perSec(3, 2), 1}},
		lua:   luaReply{Allowed: true, Remaining: 0, ResetAfter: 333334},
		eng:   engine.Result{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: 333333333},
	}, {
		// The engine's emission interval is 333333333 ns, not 333333333⅓:
		// 3000 of them end 1 µs before a second's worth.
		name:  "gcra: the emission interval is truncated to whole nanoseconds",
		algo:  engine.GCRA,
		calls: []namedCall{{0, perSec(3, 3000), 3000}},
		lua:   luaReply{Allowed: true, Remaining: 0, ResetAfter: 1e9},
		eng:   engine.Result{Allowed: true, Limit: 3000, Remaining: 0, ResetAfter: 999999999000},
	}}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("{named:%d}", i)
			var st engine.State
			var lua luaReply
			var eng engine.Result
			for _, c := range tt.calls {
				now := traceStartUS + c.at
				var err error
				if lua, err = s.call(t.Context(), tt.algo, key, c.p, c.cost, now); err != nil {
					t.Fatal(err)
				}
				eng = engine.Check(tt.algo, &st, c.p, c.cost, now*1000)
			}
			if lua != tt.lua {
				t.Errorf("script replied %v, want %v", lua, tt.lua)
			}
			if eng != tt.eng {
				t.Errorf("engine replied %+v, want %+v", eng, tt.eng)
			}
		})
	}
}
