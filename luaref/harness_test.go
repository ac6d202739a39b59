package luaref_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/luaref"
)

// gcraEpochUS is the origin of gcra.lua's stored times, in µs since the Unix
// epoch (2024-01-01T00:00:00Z); TestScriptsDocumentTheirContract checks the
// script says so.
const gcraEpochUS = 1704067200000000

// holdMS is the TTL the differential test gives every key after each step,
// so that Redis's own clock, which the simulated trace does not follow,
// never expires a key early. The scripts' own TTLs are checked first.
const holdMS = 24 * 3600 * 1000

// luaReply is a script's reply; durations are µs.
type luaReply struct {
	Allowed    bool
	Remaining  int64
	RetryAfter int64
	ResetAfter int64
}

func (r luaReply) String() string {
	return fmt.Sprintf("{allowed=%v remaining=%d retry=%dus reset=%dus}", r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter)
}

// scripts runs the reference scripts on one redis-server.
type scripts struct {
	rdb *redis.Client
	sha map[string]string // script name → SHA1, loaded
}

// startScripts starts a redis-server for t and loads every script into it.
func startScripts(t testing.TB) *scripts {
	t.Helper()
	// No retries: a retried MULTI would run a script twice. A long read
	// timeout: a loaded machine is slow, not wrong.
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t), Protocol: 2,
		MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	t.Cleanup(func() { _ = rdb.Close() })
	s := &scripts{rdb: rdb, sha: make(map[string]string)}
	for name, src := range luaref.Scripts() {
		sha, err := rdb.ScriptLoad(context.Background(), src).Result()
		if err != nil {
			t.Fatalf("SCRIPT LOAD %s.lua: %v", name, err)
		}
		s.sha[name] = sha
	}
	return s
}

// args returns the scripts' ARGV for p (in engine units, ns) at nowUS.
func args(a engine.Algo, p engine.Params, cost, nowUS int64) []any {
	argv := []any{p.Limit, p.Window / 1000, nowUS, cost}
	if a.Bucket() {
		argv = append(argv, p.Burst)
	}
	return argv
}

// call runs the script of algorithm a once, outside any transaction.
func (s *scripts) call(ctx context.Context, a engine.Algo, key string, p engine.Params, cost, nowUS int64) (luaReply, error) {
	v, err := s.rdb.EvalSha(ctx, s.sha[a.String()], []string{key}, args(a, p, cost, nowUS)...).Result()
	if err != nil {
		return luaReply{}, err
	}
	return parseReply(v)
}

// callWatched runs the script and then, in the same MULTI/EXEC, reads the
// PTTL of each watched key and extends its TTL to holdMS (keys without a
// TTL are left without one, so a missing TTL shows on every step).
func (s *scripts) callWatched(ctx context.Context, a engine.Algo, key string, p engine.Params, cost, nowUS int64, watch []string) (luaReply, []int64, error) {
	var eval *redis.Cmd
	pttl := make([]*redis.Cmd, len(watch))
	_, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		eval = pipe.EvalSha(ctx, s.sha[a.String()], []string{key}, args(a, p, cost, nowUS)...)
		for i, k := range watch {
			pttl[i] = pipe.Do(ctx, "PTTL", k)
			pipe.Do(ctx, "PEXPIRE", k, holdMS, "XX")
		}
		return nil
	})
	if err != nil {
		return luaReply{}, nil, err
	}
	r, err := parseReply(eval.Val())
	if err != nil {
		return r, nil, err
	}
	ttls := make([]int64, len(watch))
	for i, c := range pttl {
		if ttls[i], err = c.Int64(); err != nil {
			return r, nil, err
		}
	}
	return r, ttls, nil
}

func parseReply(v any) (luaReply, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return luaReply{}, fmt.Errorf("script replied %#v, want 4 integers", v)
	}
	var n [4]int64
	for i, x := range a {
		if n[i], ok = x.(int64); !ok {
			return luaReply{}, fmt.Errorf("script replied %#v: element %d is not an integer", v, i)
		}
	}
	if n[0] != 0 && n[0] != 1 {
		return luaReply{}, fmt.Errorf("script replied allowed=%d", n[0])
	}
	return luaReply{Allowed: n[0] == 1, Remaining: n[1], RetryAfter: n[2], ResetAfter: n[3]}, nil
}

// set writes one key as the scripts store it (a string, or a hash when
// fields are given; an empty value deletes the key) with the holdMS TTL.
func (s *scripts) set(ctx context.Context, key, value string, fields ...string) error {
	_, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Del(ctx, key)
		switch {
		case len(fields) > 0:
			pipe.HSet(ctx, key, fields)
		case value != "":
			pipe.Set(ctx, key, value, 0)
		default:
			return nil
		}
		pipe.PExpire(ctx, key, holdMS*time.Millisecond)
		return nil
	})
	return err
}

// windowKey is the counter key fixed.lua and sliding.lua derive for a
// window index.
func windowKey(key string, index int64) string { return key + ":" + strconv.FormatInt(index, 10) }

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// floorDiv returns floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilUS rounds engine nanoseconds up to the scripts' microseconds; -1
// (never) stays -1.
func ceilUS(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	return (ns + 999) / 1000
}
