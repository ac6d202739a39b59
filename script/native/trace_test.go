package native

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/values"
)

// Randomized traces: each library's scripts called on a few keys with the
// arguments the library sends (and now and then arguments it does not
// send, and values of the wrong type, which the handlers leave to the
// interpreter), the clock moving in between, so that keys expire. After
// each step, the native path, the interpreter and (in
// TestNativeMatchesRedis) redis-server running the original script must
// have answered the same and hold the same values (GET, LRANGE, HGETALL,
// ZRANGE WITHSCORES, PTTL). A failure prints the seed that replays it
// (-seed or RL_SEED).

// step is one thing a trace does.
type step struct {
	kind       int // stepRun, stepJump, stepSpoil, stepExpire
	sha        string
	keys, args []string
	jump       time.Duration
	spoil      []string // a command writing a value the scripts do not expect
}

const (
	stepRun = iota
	stepJump
	stepSpoil
	stepExpire
)

// library draws the steps of one library's traces.
type library struct {
	name string
	keys []string
	// usesTime marks scripts that read TIME: against redis-server, the
	// clock is redis-server's and cannot jump.
	usesTime bool
	// replyTol is how far, token by token, a reply may be from
	// redis-server's, whose clock moves during a step (0: exactly equal).
	replyTol []float64
	// ttlStep is the step, in ms, of the TTLs the scripts set from a time
	// rounded up (redis_rate: EX math.ceil(reset_after)): at the two
	// servers' clocks the rounding may fall on either side of a whole
	// second (reset_after 7200.000008 here, 7199.99999 there), so a stored
	// PTTL may differ from redis-server's by one step.
	ttlStep float64
	draw    func(rng *rand.Rand, now int64) step
}

func shaOf(name string) string {
	for _, s := range scripts {
		if s.Label() == name {
			return s.SHA
		}
	}
	panic("no script " + name)
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

// odd replaces, now and then, an argument by one a library never sends.
func odd(rng *rand.Rand, args []string) []string {
	if rng.IntN(30) == 0 && len(args) > 0 {
		args[rng.IntN(len(args))] = pick(rng, oddArgs...)
	}
	if rng.IntN(100) == 0 {
		args = args[:rng.IntN(len(args)+1)]
	}
	return args
}

// oddArgs are arguments the libraries never send. (The interpreter reads
// "-0" otherwise than Redis's Lua does, see TestNativeMatchesRedis; an
// infinite amount would loop until the memory limit.)
var oddArgs = []string{"abc", "", " 5", "0x10", "1.5", "007", "-0"}

// pyTime is time.time() as redis-py sends it (Python's repr of a float).
func pyTime(now int64) string { return strconv.FormatFloat(float64(now)/1e9, 'f', -1, 64) }

var libraries = []library{
	{name: "redis_rate", keys: []string{"rate:a", "rate:b", "rate:c"}, usesTime: true, replyTol: []float64{0, 1, 0.05, 0.05}, ttlStep: 1000,
		draw: func(rng *rand.Rand, now int64) step {
			name := pick(rng, "redis_rate.allowN", "redis_rate.allowN", "redis_rate.allowAtMost")
			args := []string{pick(rng, "1", "5", "10"), pick(rng, "1", "10", "100"), pick(rng, "1", "60", "0.5", "3600"),
				pick(rng, "0", "1", "1", "1", "2", "7")}
			return step{sha: shaOf(name), keys: []string{pick(rng, "rate:a", "rate:b", "rate:c")}, args: odd(rng, args)}
		}},
	{name: "ulule_limiter", keys: []string{"ul:a", "ul:b", "ul:c"}, replyTol: []float64{0, 250},
		draw: func(rng *rand.Rand, now int64) step {
			key := []string{pick(rng, "ul:a", "ul:b", "ul:c")}
			if rng.IntN(3) == 0 {
				return step{sha: shaOf("ulule_limiter.peek"), keys: key}
			}
			args := []string{pick(rng, "1", "1", "2", "5"), pick(rng, "1000", "60000", "60000", "0", "-1")}
			return step{sha: shaOf("ulule_limiter.incr"), keys: key, args: odd(rng, args)}
		}},
	{name: "limits", keys: []string{"LIMITER/fw/a", "LIMITER/fw/b", "LIMITER/mw/a", "LIMITER/mw/b"},
		draw: func(rng *rand.Rand, now int64) step {
			switch n := rng.IntN(100); {
			case n < 3:
				return step{sha: shaOf("limits.clear_keys"), keys: []string{pick(rng, "LIMITER*", "LIMITER/fw/*", "none*")}}
			case n < 35:
				args := []string{pick(rng, "1", "10", "60"), pick(rng, "1", "1", "2")}
				return step{sha: shaOf("limits.incr_expire"), keys: []string{pick(rng, "LIMITER/fw/a", "LIMITER/fw/b")}, args: odd(rng, args)}
			case n < 75:
				args := []string{pyTime(now), pick(rng, "1", "2", "3", "5"), pick(rng, "1", "5", "60"), pick(rng, "1", "1", "2")}
				return step{sha: shaOf("limits.acquire_moving_window"), keys: []string{pick(rng, "LIMITER/mw/a", "LIMITER/mw/b")}, args: odd(rng, args)}
			default:
				exp := pick[int64](rng, 1, 5, 60)
				args := []string{pyTime(now - exp*1e9), pick(rng, "1", "2", "3", "5")}
				return step{sha: shaOf("limits.moving_window"), keys: []string{pick(rng, "LIMITER/mw/a", "LIMITER/mw/b")}, args: odd(rng, args)}
			}
		}},
}

// drawStep draws the next step of lib's trace: mostly runs, some clock
// jumps (when jumps is set), and now and then a key spoiled or expired.
func drawStep(rng *rand.Rand, lib library, now int64, jumps bool) step {
	switch n := rng.IntN(100); {
	case n < 10 && jumps:
		return step{kind: stepJump, jump: pick(rng, time.Millisecond, 300*time.Millisecond, time.Second, 3*time.Second, 61*time.Second) + 7*time.Millisecond}
	case n < 11:
		key := pick(rng, lib.keys...)
		return step{kind: stepSpoil, spoil: pick(rng, []string{"SET", key, "abc"}, []string{"RPUSH", key, "x"},
			[]string{"SET", key, "12.5"}, []string{"ZADD", key, "1", "m"})}
	case n < 16:
		return step{kind: stepExpire, keys: []string{pick(rng, lib.keys...)}}
	}
	return lib.draw(rng, now)
}

func (s step) String() string {
	switch s.kind {
	case stepJump:
		return "clock +" + s.jump.String()
	case stepSpoil:
		return strings.Join(s.spoil, " ")
	case stepExpire:
		return "expire " + s.keys[0]
	}
	return fmt.Sprintf("EVALSHA %s %d %s %q", s.sha[:8], len(s.keys), strings.Join(s.keys, " "), s.args)
}

// side is one of our engines on its own keyspace.
type side struct {
	e  *script.Engine
	ks *memKeys
}

func newSide(t *testing.T, native bool, now int64, texts map[string]string) *side {
	e := script.New(script.Config{})
	t.Cleanup(e.Close)
	if native {
		Register(e)
	}
	for _, body := range texts {
		if _, bad := e.Load([]byte(body)); bad != nil {
			t.Fatalf("load: %v", bad)
		}
	}
	return &side{e: e, ks: newMemKeys(now)}
}

// clone copies the keyspace.
func (k *memKeys) clone() *memKeys {
	c := newMemKeys(k.now)
	for key, e := range k.m {
		v, _, err := values.DecodeValue(values.AppendValue(nil, e.v))
		if err != nil {
			panic(err)
		}
		c.m[key] = memEntry{v, e.exp}
	}
	return c
}

func bs(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// run runs s: by EVALSHA, or by EVAL of the body when eval is set.
func (sd *side) run(s step, body string, eval bool) string {
	req := script.Request{SHA: []byte(s.sha), Keys: bs(s.keys), Args: bs(s.args), RESP: 2}
	if eval {
		req.Body, req.SHA = []byte(body), nil
	}
	return sd.e.Eval(req, memCaller{sd.ks}).String()
}

func (sd *side) do(args ...string) values.Reply {
	return values.Exec(sd.ks, sd.ks.now, 2, bs(args))
}

// dump renders what key holds, and its PTTL.
func (sd *side) dump(key string) string {
	return dumpWith(key, func(args ...string) string { return sd.do(args...).String() })
}

func dumpWith(key string, do func(args ...string) string) string {
	typ := do("TYPE", key)
	var v string
	switch typ {
	case "+string":
		v = do("GET", key)
	case "+list":
		v = do("LRANGE", key, "0", "-1")
	case "+hash":
		v = do("HGETALL", key)
	case "+zset":
		v = do("ZRANGE", key, "0", "-1", "WITHSCORES")
	}
	return fmt.Sprintf("%s %s %s pttl %s", key, typ, v, do("PTTL", key))
}

// texts reads the scripts' bodies from the installed libraries.
func texts(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, s := range scripts {
		out[s.SHA] = libraryText(t, s)
	}
	return out
}

const startNow = int64(1_700_000_000_123_456_789)

// TestNativeMatchesInterpreter runs long traces on both paths, at the same
// fake clock, and requires identical replies and values after each step.
func TestNativeMatchesInterpreter(t *testing.T) {
	body := texts(t)
	rng := testseed.Rand(t)
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			nat, interp := newSide(t, true, startNow, body), newSide(t, false, startNow, body)
			for i := range 3000 {
				s := drawStep(rng, lib, nat.ks.now, true)
				var rn, ri string
				switch s.kind {
				case stepJump:
					nat.ks.now += int64(s.jump)
					interp.ks.now = nat.ks.now
				case stepSpoil:
					rn, ri = nat.do(s.spoil...).String(), interp.do(s.spoil...).String()
				case stepExpire:
					nat.ks.Delete([]byte(s.keys[0]))
					interp.ks.Delete([]byte(s.keys[0]))
				default:
					eval := rng.IntN(4) == 0
					rn, ri = nat.run(s, body[s.sha], eval), interp.run(s, body[s.sha], eval)
				}
				if rn != ri {
					t.Fatalf("step %d, %s: native %s, interpreter %s", i, s, rn, ri)
				}
				for _, k := range lib.keys {
					if dn, di := nat.dump(k), interp.dump(k); dn != di {
						t.Fatalf("step %d, %s (replied %s): native holds %s, interpreter %s", i, s, rn, dn, di)
					}
				}
			}
			st := nat.e.Stats()
			var native uint64
			for _, n := range st.Native {
				native += n
			}
			t.Logf("native runs %d, handed to the interpreter %d; %v", native, st.Interpreted, st.Native)
			if native == 0 || native < 2*st.Interpreted {
				t.Fatalf("the native path served %d runs and the interpreter %d: the handlers decline too much", native, st.Interpreted)
			}
			if n := interp.e.Stats(); len(n.Native) != 0 || n.Interpreted == 0 {
				t.Fatalf("the engine without handlers counted %+v", n)
			}
		})
	}
}

// TestNativeMatchesRedis runs traces on the native path, the interpreter
// and redis-server running the original scripts. The two paths must agree
// exactly; redis-server, whose clock is its own, within what its clock
// moves during a step: PTTLs within 250 ms, and for redis_rate (which
// reads TIME) the times it replies and stores within 50 ms. Clock jumps
// are played on redis-server by setting its keys' TTLs to ours. For
// redis_rate, redis-server's TIME runs a little ahead of the one our side
// read before the step: where a decision differs, the step is run again
// natively on the keyspace before it at redis-server's clock after it,
// which must give redis-server's reply; and after each step redis-server
// takes our values, so that its lead does not add up.
func TestNativeMatchesRedis(t *testing.T) {
	body := texts(t)
	addr := redistest.Start(t)
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { rc.Close() })
	rng := testseed.Rand(t)
	oddArgs = oddArgs[:len(oddArgs)-1] // where the interpreter and Redis's Lua differ (issue 28's engine, not the handlers)
	for _, lib := range libraries {
		t.Run(lib.name, func(t *testing.T) {
			if err := rc.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for sha, b := range body {
				if got, err := rc.ScriptLoad(ctx, b).Result(); err != nil || got != sha {
					t.Fatalf("SCRIPT LOAD: %s %v, want %s", got, err, sha)
				}
			}
			now := startNow
			if lib.usesTime {
				now = redisNow(t, rc)
			}
			nat, interp := newSide(t, true, now, body), newSide(t, false, now, body)
			rdo := func(args ...string) string { return goRedisString(rc.Do(ctx, anys(args)...).Result()) }
			lateStep := false // redis-server answered as we would have at its later clock
			// takeTTLs gives redis-server's keys our TTLs: after a jump of
			// our clock, and after each step of a library that does not
			// read the time, whose clock stands still on our side while
			// redis-server's runs (on a loaded machine, a key left alone
			// for a few hundred steps drifted past pttlTol).
			takeTTLs := func() {
				for _, k := range lib.keys {
					switch p := nat.do("PTTL", k).Int; {
					case p == 0: // expiring within the ms: expired everywhere
						nat.ks.Delete([]byte(k))
						interp.ks.Delete([]byte(k))
						rdo("DEL", k)
					case p == -2:
						rdo("DEL", k)
					case p > 0:
						rdo("PEXPIRE", k, strconv.FormatInt(p, 10))
					}
				}
			}
			for i := range 400 {
				s := drawStep(rng, lib, nat.ks.now, !lib.usesTime)
				if lib.usesTime {
					nat.ks.now = max(nat.ks.now, redisNow(t, rc))
					interp.ks.now = nat.ks.now
				}
				var rn, ri, rr string
				switch s.kind {
				case stepJump:
					nat.ks.now += int64(s.jump)
					interp.ks.now = nat.ks.now
					takeTTLs()
				case stepSpoil:
					rn, ri, rr = nat.do(s.spoil...).String(), interp.do(s.spoil...).String(), rdo(s.spoil...)
				case stepExpire:
					nat.ks.Delete([]byte(s.keys[0]))
					interp.ks.Delete([]byte(s.keys[0]))
					rdo("DEL", s.keys[0])
				default:
					eval := rng.IntN(4) == 0
					before := nat.ks.clone()
					rn, ri = nat.run(s, body[s.sha], eval), interp.run(s, body[s.sha], eval)
					cmd := append([]string{"EVALSHA", s.sha, strconv.Itoa(len(s.keys))}, s.keys...)
					if eval {
						cmd[0], cmd[1] = "EVAL", body[s.sha]
					}
					rr = rdo(append(cmd, s.args...)...)
					if lib.usesTime && !near(rn, rr, lib.replyTol) {
						// redis-server's TIME was later than ours: what would we
						// have answered at its clock after the step?
						late := &side{e: nat.e, ks: before}
						late.ks.now = redisNow(t, rc)
						if rl := late.run(s, body[s.sha], false); near(rl, rr, lib.replyTol) {
							rr, lateStep = rn, true
						}
					}
				}
				if rn != ri {
					t.Fatalf("step %d, %s: native %s, interpreter %s", i, s, rn, ri)
				}
				if !near(rn, rr, lib.replyTol) {
					t.Fatalf("step %d, %s: native %s, redis-server %s", i, s, rn, rr)
				}
				for _, k := range lib.keys {
					dn, di, dr := nat.dump(k), interp.dump(k), dumpWith(k, rdo)
					if dn != di {
						t.Fatalf("step %d, %s: native holds %s, interpreter %s", i, s, dn, di)
					}
					if !lateStep && !nearPTTL(dn, dr, nil, pttlTol+lib.ttlStep) {
						t.Fatalf("step %d, %s (replied %s): native holds %s, redis-server %s", i, s, rn, dn, dr)
					}
				}
				if !lib.usesTime {
					takeTTLs()
				} else { // redis-server takes our values, so that its clock's lead does not add up
					for _, k := range lib.keys { // the tats: keys of other types stay as they are
						v := nat.do("GET", k)
						if _, isNum := number(v.Str); v.Kind != values.Bulk || !isNum {
							continue
						}
						if p := nat.do("PTTL", k).Int; p > 0 {
							rdo("SET", k, string(v.Str), "PX", strconv.FormatInt(p, 10))
						} else {
							rdo("SET", k, string(v.Str))
						}
					}
				}
				lateStep = false
			}
		})
	}
}

// redisNow reads redis-server's TIME in ns.
func redisNow(t *testing.T, rc *redis.Client) int64 {
	tm, err := rc.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixNano() / 1e3 * 1e3
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// goRedisString renders a go-redis result as values.Reply.String does.
func goRedisString(v any, err error) string {
	if errors.Is(err, redis.Nil) {
		return "(nil)"
	}
	if err != nil {
		return "-" + err.Error()
	}
	switch v := v.(type) {
	case int64:
		return ":" + strconv.FormatInt(v, 10)
	case string:
		switch v {
		case "string", "list", "hash", "zset", "none", "OK", "set":
			return "+" + v // TYPE's and SET's status replies
		}
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = goRedisString(e, nil)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case nil:
		return "(nil)"
	}
	return fmt.Sprintf("?%T %v", v, v)
}

// near compares two renderings token by token: equal, or within tol[i]
// for the i-th token, or, for the number after "pttl" and a stored number
// with a fraction (redis_rate's time), within pttlTol (250 ms) and 50 ms.
func near(a, b string, tol []float64) bool { return nearPTTL(a, b, tol, pttlTol) }

// pttlTol is how far, in ms, a PTTL in a dump may be from redis-server's.
const pttlTol = 250

// nearPTTL is near with pttl the tolerance of a PTTL in a dump.
func nearPTTL(a, b string, tol []float64, pttl float64) bool {
	if a == b {
		return true
	}
	ta, tb := strings.Fields(a), strings.Fields(b)
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] == tb[i] {
			continue
		}
		x, y := strings.Trim(ta[i], `[]":`), strings.Trim(tb[i], `[]":`)
		fx, errX := strconv.ParseFloat(x, 64)
		fy, errY := strconv.ParseFloat(y, 64)
		if errX != nil || errY != nil {
			return false
		}
		d := math.Abs(fx - fy)
		switch {
		case i < len(tol) && d <= tol[i]:
		case i > 0 && ta[i-1] == "pttl" && d <= pttl:
		case tol == nil && strings.Contains(x, ".") && d <= 0.05:
		default:
			return false
		}
	}
	return true
}
