package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulimiter "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/rlserver/rlserver/internal/testutil"
)

// ulule returns an ulule/limiter of 100 an hour on p's Redis store, as its
// users build it (the store runs SCRIPT LOAD when it is made).
func ulule(t *testing.T, p *proc) *ulimiter.Limiter {
	t.Helper()
	store, err := ulredis.NewStore(p.client)
	if err != nil {
		t.Fatal(err)
	}
	return ulimiter.New(store, ulimiter.Rate{Period: time.Hour, Limit: 100})
}

// A limiter script of the shape tutorials teach: a sliding log in a sorted
// set, its time passed in ARGV, every key it touches in KEYS.
const slidingLog = `
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if n >= limit then return {0, n} end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
return {1, n + 1}`

// TestRestartKeepsValues: what scripts (a sliding log, go-redis/redis_rate,
// ulule/limiter) and plain commands wrote to Redis values — strings,
// lists, hashes, sorted sets and their expiries —
// survives SIGTERM in fast mode and kill -9 in strong mode, as limiter
// state does: the data directory's log and snapshots carry them.
func TestRestartKeepsValues(t *testing.T) {
	parallel(t)
	bin, dir := buildBinary(t), t.TempDir()
	ctx := context.Background()
	log := redis.NewScript(slidingLog)
	write := func(p *proc, round int) {
		t.Helper()
		for i := 0; i < 5; i++ {
			v, err := log.Run(ctx, p.client, []string{"log"}, 1e12+round*10+i, 86400000, 100, fmt.Sprint(round, "-", i)).Slice()
			if err != nil || v[0] != int64(1) {
				t.Fatalf("round %d, EVALSHA %d: %v %v", round, i, v, err)
			}
		}
		// go-redis/redis_rate and ulule/limiter as their users call them.
		rl := redis_rate.NewLimiter(p.client)
		for i := 0; i < 2; i++ {
			if res, err := rl.Allow(ctx, "rate", redis_rate.Limit{Rate: 10, Burst: 10, Period: time.Hour}); err != nil || res.Allowed != 1 {
				t.Fatalf("round %d: redis_rate Allow: %+v %v", round, res, err)
			}
		}
		if _, err := ulule(t, p).Get(ctx, "u"); err != nil {
			t.Fatalf("round %d: ulule Get: %v", round, err)
		}
		p.do("INCRBY", "count", 5)
		p.do("RPUSH", "list", round)
		p.do("HINCRBY", "hash", "rounds", 1)
		p.do("SET", "ttl", round, "EX", 3600)
	}
	check := func(p *proc, rounds int) {
		t.Helper()
		if n := p.do("ZCARD", "log"); n != int64(5*rounds) {
			t.Errorf("after %d rounds: ZCARD log = %v", rounds, n)
		}
		if v := p.do("GET", "count"); v != fmt.Sprint(5*rounds) {
			t.Errorf("after %d rounds: GET count = %v", rounds, v)
		}
		if n := p.do("LLEN", "list"); n != int64(rounds) {
			t.Errorf("after %d rounds: LLEN list = %v", rounds, n)
		}
		if v := p.do("HGET", "hash", "rounds"); v != fmt.Sprint(rounds) {
			t.Errorf("after %d rounds: HGET hash rounds = %v", rounds, v)
		}
		if ttl := p.do("TTL", "ttl").(int64); ttl < 3500 || ttl > 3600 {
			t.Errorf("after %d rounds: TTL ttl = %d, want about 3600", rounds, ttl)
		}
		if pttl := p.do("PTTL", "log").(int64); pttl < 86000000 {
			t.Errorf("after %d rounds: PTTL log = %d, want about a day", rounds, pttl)
		}
		res, err := redis_rate.NewLimiter(p.client).AllowN(ctx, "rate", redis_rate.Limit{Rate: 10, Burst: 10, Period: time.Hour}, 0)
		if err != nil || res.Remaining != 10-2*rounds {
			t.Errorf("after %d rounds: redis_rate remaining %+v %v, want %d", rounds, res, err, 10-2*rounds)
		}
		c, err := ulule(t, p).Peek(ctx, "u")
		if err != nil || c.Remaining != 100-int64(rounds) {
			t.Errorf("after %d rounds: ulule Peek %+v %v, want %d remaining", rounds, c, err, 100-rounds)
		}
	}
	p := startProc(t, bin, dir)
	write(p, 1)
	p.stop()
	p = startProc(t, bin, dir)
	check(p, 1)
	p.stop()

	p = startProc(t, bin, dir, "--consistency", "strong")
	write(p, 2)
	// The last acknowledgement before the kill is a script's: in strong
	// mode its reply waited for the commit of what it wrote.
	if v, err := log.Run(ctx, p.client, []string{"last"}, 1e12, 86400000, 100, "x").Slice(); err != nil || v[0] != int64(1) {
		t.Fatalf("EVALSHA before the kill: %v %v", v, err)
	}
	p.kill()
	p = startProc(t, bin, dir, "--consistency", "strong")
	check(p, 2)
	if n := p.do("ZCARD", "last"); n != int64(1) {
		t.Errorf("after kill -9 in strong mode: ZCARD last = %v, want 1: a script's acknowledged write was lost", n)
	}
	if v, err := p.client.EvalSha(ctx, log.Hash(), []string{"log"}, 1, 1, 1, "x").Result(); err == nil ||
		!strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Errorf("EVALSHA of a script loaded before the restart: %v %v, want NOSCRIPT (the cache is the process's, as Redis's)", v, err)
	}
	p.stop()
}

// TestClusterScriptsAndValues: three nodes in strong mode serve scripts
// (go-redis/redis_rate's and a sliding log) and Redis values to a go-redis
// ClusterClient with its default options: keys
// of every slot follow MOVED to their group's leader, keys of different
// slots in one command are CROSSSLOT (hash tags put them together), and
// after kill -9 of the node that leads the most groups nothing a script
// wrote is forgotten.
func TestClusterScriptsAndValues(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	procs := clusterProcs(t, bin, 3, "--consistency", "strong", "--admin-token", "cluster-t0ken")
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.resp)
	}
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Close() })
	log := redis.NewScript(slidingLog)
	// go-redis/redis_rate, as its users call it, on the ClusterClient:
	// 3 of a burst of 5 on each of 30 keys.
	rl := redis_rate.NewLimiter(c)
	limit := redis_rate.Limit{Rate: 5, Burst: 5, Period: time.Hour}
	for i := 0; i < 30; i++ {
		for j := 0; j < 3; j++ {
			res, err := rl.Allow(ctx, fmt.Sprint("rate:", i), limit)
			if err != nil || res.Allowed != 1 || res.Remaining != 4-j {
				t.Fatalf("redis_rate Allow rate:%d, call %d: %+v %v", i, j, res, err)
			}
		}
	}
	const keys = 60
	for i := 0; i < keys; i++ {
		for j := 0; j < 3; j++ {
			v, err := log.Run(ctx, c, []string{fmt.Sprint("log:", i)}, 1e12+j, 86400000, 10, fmt.Sprint(j)).Slice()
			if err != nil || v[0] != int64(1) || v[1] != int64(j+1) {
				t.Fatalf("log:%d, call %d: %v %v", i, j, v, err)
			}
		}
		if err := c.Set(ctx, fmt.Sprint("{u", i, "}:a"), i, time.Hour).Err(); err != nil {
			t.Fatalf("SET: %v", err)
		}
	}
	if v, err := c.MGet(ctx, "{u7}:a", "{u7}:b").Result(); err != nil || v[0] != "7" || v[1] != nil {
		t.Errorf("MGET of one hash tag: %v %v", v, err)
	}
	crossSlot := func(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "CROSSSLOT") }
	// go-redis splits MGET by slot itself; a raw command shows the server's check.
	node, _ := c.MasterForKey(ctx, "a")
	if err := node.Do(ctx, "MGET", "a", "b").Err(); !crossSlot(err) {
		t.Errorf("MGET a b on one node: %v, want CROSSSLOT", err)
	}
	if err := node.Eval(ctx, "return 1", []string{"a", "b"}).Err(); !crossSlot(err) {
		t.Errorf("EVAL with keys a and b: %v, want CROSSSLOT", err)
	}

	victim := mostLeader(t, procs)
	procs[victim].kill()
	// A client cannot learn from a dead node that its slots moved: this
	// one reloads the slots often (see clusterClient).
	c2 := clusterClient(t, without(procs, victim))
	deadline := time.Now().Add(20 * time.Second)
	// reach retries cmd, a read (it charges nothing if retried), while it
	// fails and the deadline has not passed: until the client reaches the
	// key's group.
	reach := func(cmd func() *redis.IntCmd) (int64, error) {
		var n int64
		err := testutil.Poll(time.Until(deadline), func() (err error) {
			n, err = cmd().Result()
			return err
		})
		return n, err
	}
	for i := 0; i < keys; i++ {
		key := fmt.Sprint("log:", i)
		n, err := reach(func() *redis.IntCmd { return c2.ZCard(ctx, key) })
		if err != nil || n != 3 {
			t.Fatalf("after kill -9: ZCARD %s = %d %v, want 3: a script's write was forgotten", key, n, err)
		}
		if v, err := c2.Get(ctx, fmt.Sprint("{u", i, "}:a")).Result(); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("after kill -9: GET {u%d}:a = %q %v", i, v, err)
		}
	}
	v, err := log.Run(ctx, c2, []string{"log:0"}, 1e12+5, 86400000, 10, "after").Slice()
	if err != nil || v[1] != int64(4) {
		t.Errorf("a script after the failover: %v %v, want 4 entries", v, err)
	}
	// redis_rate goes on from what it had: 2 of 5 left on every key, then
	// denied once they are spent. Its keys (redis_rate's "rate:" prefix)
	// may lie in groups the reads above did not touch: first wait until
	// the client reaches each (a read, which charges nothing if retried).
	for i := 0; i < 30; i++ {
		key := fmt.Sprint("rate:rate:", i)
		n, err := reach(func() *redis.IntCmd { return c2.Exists(ctx, key) })
		if err != nil || n != 1 {
			t.Fatalf("after kill -9: EXISTS %s = %d %v, want 1: redis_rate's state was forgotten", key, n, err)
		}
	}
	rl2 := redis_rate.NewLimiter(c2)
	for i := 0; i < 30; i++ {
		for j := 0; j < 3; j++ {
			res, err := rl2.Allow(ctx, fmt.Sprint("rate:", i), limit)
			want := j < 2
			if err != nil || (res.Allowed == 1) != want {
				t.Fatalf("after kill -9: redis_rate Allow rate:%d, call %d: %+v %v (allowed want %v): an admission was forgotten", i, j+4, res, err, want)
			}
		}
	}
}
