package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// blockRule is a rule of algo allowing 2 per 10 s that blocks an ip it
// denies 3 times within a minute, for 15 minutes.
func blockRule(id, algo string) string {
	return fmt.Sprintf(`{"id":%q,"target":"/api/*","tier":"*","key_type":"ip","algo":%q,"limit":2,"window":"10s",`+
		`"block":{"after":3,"within":"1m","for":"15m"}}`, id, algo)
}

// blocked is RL.CHECKRULES's reply for an identifier blocked for ttl more.
func blocked(identifier string, ttl time.Duration) []any {
	ms := ttl.Milliseconds()
	return []any{int64(0), int64(0), int64(0), ms, ms, "block:" + identifier}
}

func TestRuleBlocksAfterRepeatedDenials(t *testing.T) {
	for _, algo := range []string{"fixed", "sliding", "log", "token", "leaky", "gcra"} {
		t.Run(algo, func(t *testing.T) {
			clk := clock()
			n := testserver.Start(t, testserver.Options{Clock: clk.Now})
			rdb := dial(t, n, 2)
			id := "r-" + algo
			run(t, rdb, []step{{args: []any{"RL.RULE.SET", id, blockRule(id, algo)}, want: int64(1)}})
			check := func() []any {
				t.Helper()
				got, err := rdb.Do(ctx, "RL.CHECKRULES", "/api/x", "free", "ip=1.2.3.4", "user=u1").Slice()
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			for i := 0; i < 2; i++ {
				if got := check(); got[0] != int64(1) || got[5] != id {
					t.Fatalf("check %d: got %v, want allowed by %s", i+1, got, id)
				}
			}
			for i := 0; i < 3; i++ { // the rule's own denials; the third blocks
				if got := check(); got[0] != int64(0) || got[5] != id {
					t.Fatalf("denial %d: got %v, want denied by %s", i+1, got, id)
				}
			}
			counter := []any{"RL.PEEK", id + ":1.2.3.4", algo, "2", "10s"}
			before, err := rdb.Do(ctx, counter...).Slice()
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 5; i++ {
				if got := check(); !equal(got, blocked("ip=1.2.3.4", 15*time.Minute)) {
					t.Fatalf("blocked check %d: got %#v", i+1, got)
				}
			}
			// Nothing was charged while blocked: neither the rule's counter
			// nor the count of its denials.
			run(t, rdb, []step{
				{args: counter, want: before},
				{args: []any{"RL.PEEK", "!" + id + ":1.2.3.4", "log", "3", "1m"}, want: []any{int64(1), int64(3), int64(0), int64(0), int64(60000)}},
			})
			// The rule's window passes: still blocked, another ip is not.
			clk.Advance(20 * time.Second)
			if got, err := rdb.Do(ctx, "RL.CHECKRULES", "/api/x", "free", "ip=5.6.7.8").Slice(); err != nil || got[0] != int64(1) {
				t.Fatalf("another ip: got %v, %v; want allowed", got, err)
			}
			run(t, rdb, []step{
				{args: []any{"RL.CHECKRULES", "/api/x", "free", "ip=1.2.3.4"}, want: blocked("ip=1.2.3.4", 15*time.Minute-20*time.Second)},
				{args: []any{"RL.CHECKRULES", "/other", "free", "user=u1", "ip=1.2.3.4"}, want: blocked("ip=1.2.3.4", 15*time.Minute-20*time.Second)},
				{args: []any{"RL.BLOCKS"}, want: []any{[]any{"ip=1.2.3.4", (15*time.Minute - 20*time.Second).Milliseconds(),
					"rule " + id + " denied it 3 times within 1m0s"}}},
				{args: []any{"RL.UNBLOCK", "ip=1.2.3.4"}, want: int64(1)},
				{args: []any{"RL.UNBLOCK", "ip=1.2.3.4"}, want: int64(0)},
				{args: []any{"RL.BLOCKS"}, want: []any{}},
			})
			if got := check(); got[0] != int64(1) || got[5] != id {
				t.Fatalf("after RL.UNBLOCK: got %v, want allowed by %s", got, id)
			}
			if got := n.Metric(t, "rlserver_blocks_made_total", map[string]string{"source": id}); got != 1 {
				t.Errorf("rlserver_blocks_made_total{source=%s} = %v, want 1", id, got)
			}
			if got := n.Metric(t, "rlserver_block_denials_total", nil); got != 7 {
				t.Errorf("rlserver_block_denials_total = %v, want 7", got)
			}
			if got := n.Metric(t, "rlserver_blocks_active", nil); got != 0 {
				t.Errorf("rlserver_blocks_active = %v, want 0", got)
			}
		})
	}
}

func TestRuleBlockCountsOnlyDenialsWithinItsSpan(t *testing.T) {
	clk := clock()
	n := testserver.Start(t, testserver.Options{Clock: clk.Now})
	rdb := dial(t, n, 2)
	run(t, rdb, []step{{args: []any{"RL.RULE.SET", "r", blockRule("r", "fixed")}, want: int64(1)}})
	deny := func(times int) {
		t.Helper()
		for i := 0; i < times; i++ {
			got, err := rdb.Do(ctx, "RL.CHECKRULES", "/api/x", "free", "ip=1.2.3.4").Slice()
			if err != nil || got[0] != int64(0) || got[5] != "r" {
				t.Fatalf("got %v, %v; want denied by r", got, err)
			}
		}
	}
	spend := []any{"RL.CHECKRULES", "/api/x", "free", "ip=1.2.3.4", "COST", "2"}
	rdb.Do(ctx, spend...)
	deny(2)
	clk.Advance(61 * time.Second) // the two denials leave the minute
	rdb.Do(ctx, spend...)
	deny(2) // 2 within the minute: not blocked yet
	deny(1) // the third within it blocks
	run(t, rdb, []step{{args: []any{"RL.CHECKRULES", "/api/x", "free", "ip=1.2.3.4"}, want: blocked("ip=1.2.3.4", 15*time.Minute)}})
	// The block expires after 15 minutes and is gone.
	clk.Advance(15 * time.Minute)
	run(t, rdb, []step{
		{args: []any{"RL.BLOCKS"}, want: []any{}},
		{args: []any{"RL.CHECKRULES", "/api/x", "free", "ip=1.2.3.4"}, want: []any{int64(1), int64(2), int64(1), int64(0), int64(4000), "r"}},
	})
}

func TestManualBlocks(t *testing.T) {
	clk := clock()
	n := testserver.Start(t, testserver.Options{Clock: clk.Now})
	rdb := dial(t, n, 3)
	run(t, rdb, []step{
		{args: []any{"RL.RULE.SET", "per-ip", ruleB}, want: int64(1)},
		{args: []any{"RL.BLOCKS"}, want: []any{}},
		{args: []any{"RL.BLOCK", "user=u9", "60", "scraping"}, want: "OK"},
		{args: []any{"RL.BLOCK", "ip=10.0.0.1", "30"}, want: "OK"},
		// A block applies to every rules check naming the identifier,
		// whether or not a rule matches it.
		{args: []any{"RL.CHECKRULES", "/any", "pro", "ip=1.1.1.1", "user=u9"}, want: blocked("user=u9", time.Minute)},
		{args: []any{"RL.CHECKRULES", "/any", "pro", "ip=10.0.0.1", "user=u9"}, want: blocked("user=u9", time.Minute)},
		{args: []any{"RL.CHECKRULES", "/any", "pro", "ip=10.0.0.1"}, want: blocked("ip=10.0.0.1", 30*time.Second)},
		{args: []any{"RL.BLOCKS"}, want: []any{
			[]any{"ip=10.0.0.1", int64(30000), ""},
			[]any{"user=u9", int64(60000), "scraping"},
		}},
		// Blocking again replaces the block.
		{args: []any{"RL.BLOCK", "ip=10.0.0.1", "5", "shorter"}, want: "OK"},
		{args: []any{"RL.CHECKRULES", "/any", "pro", "ip=10.0.0.1"}, want: blocked("ip=10.0.0.1", 5*time.Second)},
		{args: []any{"RL.UNBLOCK", "user=u9"}, want: int64(1)},
		{args: []any{"RL.UNBLOCK", "user=u9"}, want: int64(0)},
		{args: []any{"RL.CHECKRULES", "/any", "pro", "ip=1.1.1.1", "user=u9"}, want: []any{int64(1), int64(10), int64(9), int64(0), int64(1000), "per-ip"}},
	})
	clk.Advance(5 * time.Second)
	run(t, rdb, []step{
		{args: []any{"RL.BLOCKS"}, want: []any{}},
		{args: []any{"RL.UNBLOCK", "ip=10.0.0.1"}, want: int64(0)}, // expired: nothing to lift
	})
	if got := n.Metric(t, "rlserver_blocks_made_total", map[string]string{"source": "manual"}); got != 3 {
		t.Errorf("rlserver_blocks_made_total{source=manual} = %v, want 3", got)
	}
	if got := n.Metric(t, "rlserver_block_denials_total", nil); got != 4 {
		t.Errorf("rlserver_block_denials_total = %v, want 4", got)
	}
}

func TestBlockBadInput(t *testing.T) {
	n := testserver.Start(t, testserver.Options{Clock: clock().Now})
	rdb := dial(t, n, 2)
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'x'
	}
	run(t, rdb, []step{
		{args: []any{"RL.BLOCK", "1.2.3.4", "60"}, wantErr: "ERR invalid block: identifier: must be type=value"},
		{args: []any{"RL.BLOCK", "ip=", "60"}, wantErr: "ERR invalid block: identifier: must be type=value"},
		{args: []any{"RL.BLOCK", "i p=1", "60"}, wantErr: "ERR invalid block: identifier: must be type=value"},
		{args: []any{"RL.BLOCK", "ip=1", "0"}, wantErr: "ERR invalid block: seconds: must be a whole number of seconds from 1"},
		{args: []any{"RL.BLOCK", "ip=1", "99999999999"}, wantErr: "ERR invalid block: seconds: must be a whole number of seconds from 1"},
		{args: []any{"RL.BLOCK", "ip=1", "1.5"}, wantErr: "ERR invalid 'seconds' '1.5': want a whole number"},
		{args: []any{"RL.BLOCK", "ip=1", "60", string(long)}, wantErr: "ERR invalid block: reason: must be at most 256 bytes (got 300 bytes)"},
		{args: []any{"RL.BLOCK", "ip=1", "60", "r", "extra"}, wantErr: "ERR wrong number of arguments for 'rl.block' command; usage: RL.BLOCK identifier seconds [reason]"},
		{args: []any{"RL.BLOCK", "ip=1"}, wantErr: "ERR wrong number of arguments for 'rl.block' command; usage: RL.BLOCK identifier seconds [reason]"},
		{args: []any{"RL.UNBLOCK", "nope"}, wantErr: "ERR invalid block: identifier"},
		{args: []any{"RL.UNBLOCK"}, wantErr: "ERR wrong number of arguments for 'rl.unblock' command; usage: RL.UNBLOCK identifier"},
		{args: []any{"RL.BLOCKS", "x"}, wantErr: "ERR wrong number of arguments for 'rl.blocks' command; usage: RL.BLOCKS"},
		{args: []any{"RL.BLOCKS"}, want: []any{}}, // nothing was blocked
		{args: []any{"RL.RULE.SET", "r", `{"target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1s","block":{"after":0,"within":"1m","for":"1m"}}`},
			wantErr: `ERR invalid rule "r": block.after: must be an integer from 1 to 10000`},
		{args: []any{"RL.RULE.SET", "r", `{"target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1s","block":{"after":1,"within":"0s","for":"1m"}}`},
			wantErr: `ERR invalid rule "r": block.within: must be a duration`},
		{args: []any{"RL.RULE.SET", "r", `{"target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1s","block":{"after":1,"within":"1m","for":"-5s"}}`},
			wantErr: `ERR invalid rule "r": block.for: must be a duration`},
		{args: []any{"RL.RULE.SET", "r", `{"target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1s","block":{"after":1,"within":"1m"}}`},
			wantErr: `ERR invalid rule "r": block.for: must be a duration`},
		{args: []any{"RL.RULE.SET", "r", `{"target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1s","block":{"after":"3"}}`},
			wantErr: `ERR invalid rule: block.after: has the wrong type`},
		{args: []any{"RL.RULE.SET", "r", `{"target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":1,"window":"1s","block":{"afterr":3}}`},
			wantErr: `ERR invalid rule: afterr: is not a rule field`},
		{args: []any{"RL.RULE.LIST"}, want: []any{}},
	})
}

func TestBlockWritesNeedAdmin(t *testing.T) {
	n := testserver.Start(t, testserver.Options{AdminToken: "s3cret"})
	rdb := dial(t, n, 3)
	run(t, rdb, []step{
		{args: []any{"RL.BLOCK", "ip=1.2.3.4", "60"}, wantErr: "NOPERM"},
		{args: []any{"RL.UNBLOCK", "ip=1.2.3.4"}, wantErr: "NOPERM"},
		{args: []any{"RL.BLOCKS"}, want: []any{}},
		{args: []any{"AUTH", "admin", "s3cret"}, want: "OK"},
		{args: []any{"RL.BLOCK", "ip=1.2.3.4", "60"}, want: "OK"},
		{args: []any{"RL.UNBLOCK", "ip=1.2.3.4"}, want: int64(1)},
	})
}
