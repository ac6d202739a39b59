package luaref_test

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/rlproc"
	"github.com/rlserver/rlserver/internal/testutil"
)

// TestRESPAgainstLua sends the same real-time traces to RL.CHECK on a real
// rlserver process, over RESP with go-redis, and to fixed.lua and log.lua on
// a real redis-server, with the test's clock reading as the scripts' now.
//
// The servers read the clock at slightly different instants: rlserver
// stamps a request somewhere between the moment the test sends it (t0, the
// scripts' now) and the moment the reply arrives (t1). That is the one
// allowed disagreement, and it is kept away from the decisions: a request
// is sent only when no window edge (fixed) and no logged entry's expiry
// (log) lies within e2eMargin of the clock, and a request whose [t0, t1]
// still met one is not compared (both sides then move to fresh keys). On
// every other step the decision, the limit and remaining must be equal, and
// retry-after and reset-after must be equal up to the measured [t0, t1]
// spreads and rounding (rlserver replies ms rounded up, the scripts µs).
func TestRESPAgainstLua(t *testing.T) {
	seed := envUint(t, seedEnv, uint64(time.Now().UnixNano()))
	t.Logf("seed %d (replay the same choices with %s=%d; the clock differs on every run)", seed, seedEnv, seed)
	s := startScripts(t)
	rl := redis.NewClient(&redis.Options{Addr: startRLServer(t, buildRLServer(t)), MaxRetries: -1,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	t.Cleanup(func() { _ = rl.Close() })
	for _, a := range []engine.Algo{engine.Fixed, engine.Log} {
		t.Run(a.String(), func(t *testing.T) {
			t.Parallel()
			e := &e2e{t: t, s: s, rl: rl, a: a, seed: seed, rng: rand.New(rand.NewPCG(seed, uint64(a)))}
			for i := range e2eSteps {
				e.step(i)
			}
			e.report()
		})
	}
}

const (
	e2eSteps  = 400
	e2eKeys   = 4
	e2eMargin = 25 * time.Millisecond // no edge or expiry this close to a request
)

// e2e is one algorithm's real-time run.
type e2e struct {
	t     *testing.T
	s     *scripts
	rl    *redis.Client
	a     engine.Algo
	seed  uint64
	rng   *rand.Rand
	keys  []*e2eKey
	stats struct{ steps, compared, agreed, resynced, allowed, denied int }
}

type e2eKey struct {
	id, gen  int
	limit    int64
	window   time.Duration
	admitted []e2eEntry // log: requests both sides admitted, oldest first
}

// e2eEntry is an admitted request: sent at t0, answered at t1 (ns).
type e2eEntry struct{ t0, t1 int64 }

func (k *e2eKey) name(a engine.Algo) string { return fmt.Sprintf("{e2e:%s:%d:%d}", a, k.id, k.gen) }

func (e *e2e) key() *e2eKey {
	if e.keys == nil {
		windows := []time.Duration{300 * time.Millisecond, 500 * time.Millisecond, 700 * time.Millisecond, time.Second}
		for i := range e2eKeys {
			e.keys = append(e.keys, &e2eKey{id: i, limit: 2 + e.rng.Int64N(9), window: windows[i%len(windows)]})
		}
	}
	return e.keys[e.rng.IntN(len(e.keys))]
}

func (e *e2e) step(i int) {
	k := e.key()
	switch r := e.rng.IntN(100); {
	case r < 45:
	case r < 85:
		time.Sleep(time.Duration(e.rng.Int64N(int64(20 * time.Millisecond))))
	default:
		time.Sleep(time.Duration(e.rng.Int64N(int64(150 * time.Millisecond))))
	}
	if e.rng.IntN(30) == 0 {
		k.limit = 2 + e.rng.Int64N(9) // both sides keep their state
	}
	cost := int64(1)
	switch r := e.rng.IntN(100); {
	case r < 10:
		cost = 0
	case r < 25:
		cost = 2 + e.rng.Int64N(k.limit-1)
	case r < 30:
		cost = k.limit + 1
	}
	e.waitClear(k)
	t0 := time.Now().UnixNano()
	v, err := e.rl.Do(e.t.Context(), "RL.CHECK", k.name(e.a), e.a.String(), k.limit,
		strconv.FormatInt(k.window.Milliseconds(), 10)+"ms", "COST", cost).Int64Slice()
	t1 := time.Now().UnixNano()
	if err != nil {
		e.t.Fatalf("step %d: RL.CHECK: %v", i, err)
	}
	p := engine.Params{Limit: k.limit, Window: int64(k.window)}
	lua, err := e.s.call(e.t.Context(), e.a, k.name(e.a), p, cost, t0/1000)
	if err != nil {
		e.t.Fatalf("step %d: script: %v", i, err)
	}
	e.stats.steps++
	if e.ambiguous(k, t0, t1) {
		e.stats.resynced++
		k.gen++
		k.admitted = nil
		return
	}
	e.compare(i, k, cost, t0, t1, v, lua)
	if lua.Allowed && cost > 0 {
		k.admitted = append(k.admitted, e2eEntry{t0, t1})
	}
}

// waitClear sleeps until no window edge (fixed) or logged expiry (log) of k
// lies within e2eMargin of the clock.
func (e *e2e) waitClear(k *e2eKey) {
	margin, w := int64(e2eMargin), int64(k.window)
	for {
		now := time.Now().UnixNano()
		wait := int64(0)
		if e.a == engine.Fixed {
			if pos := now % w; pos < margin {
				wait = margin - pos
			} else if w-pos < margin {
				wait = w - pos + margin
			}
		}
		for _, x := range k.admitted {
			if now >= x.t0+w-margin && now <= x.t1+w+margin {
				wait = max(wait, x.t1+w+margin-now)
			}
		}
		if wait == 0 {
			return
		}
		time.Sleep(time.Duration(wait))
	}
}

// ambiguous reports whether a window edge or an entry's expiry fell inside
// [t0, t1], so that the two servers may rightly disagree; it also drops the
// entries that have left the window on both sides.
func (e *e2e) ambiguous(k *e2eKey, t0, t1 int64) bool {
	// The scripts read t0 truncated to the µs: start a µs early.
	w := int64(k.window)
	if e.a == engine.Fixed && (t0-1000)/w != t1/w {
		return true
	}
	live := k.admitted[:0]
	amb := false
	for _, x := range k.admitted {
		if x.t1+w < t0 {
			continue
		}
		if x.t0+w-1000 <= t1 {
			amb = true
		}
		live = append(live, x)
	}
	k.admitted = live
	return amb
}

func (e *e2e) compare(i int, k *e2eKey, cost, t0, t1 int64, v []int64, lua luaReply) {
	e.stats.compared++
	fail := func(why string) {
		e.t.Helper()
		e.t.Fatalf("%s step %d (seed %d): key %s limit %d window %v cost %d sent at %d, answered after %v: RL.CHECK %v, script %v: %s",
			e.a, i, e.seed, k.name(e.a), k.limit, k.window, cost, t0, time.Duration(t1-t0), v, lua, why)
	}
	if len(v) != 5 {
		fail("RL.CHECK replied " + strconv.Itoa(len(v)) + " integers, want 5")
	}
	if (v[0] == 1) != lua.Allowed || v[1] != k.limit || v[2] != lua.Remaining {
		fail("allowed, limit or remaining differ")
	}
	// rlserver's clock read r lies in [t0, t1]; the scripts' now is t0
	// truncated to the µs, and so are the logged times they keep.
	spread := t1 - t0 + 1000
	older := int64(1000)
	for _, x := range k.admitted {
		older = max(older, x.t1-x.t0+1000)
	}
	if !withinMS(v[3], lua.RetryAfter, spread, older) || !withinMS(v[4], lua.ResetAfter, spread, older) {
		fail(fmt.Sprintf("retry-after or reset-after differ by more than the clock spread (%v now, %v for logged entries)",
			time.Duration(spread), time.Duration(older)))
	}
	e.stats.agreed++
	if lua.Allowed {
		e.stats.allowed++
	} else {
		e.stats.denied++
	}
}

// withinMS reports whether rlserver's ms (rounded up) can be the script's
// µs measured from an instant up to late ns later (now) and entries up to
// early ns later; 0 and -1 must match exactly.
func withinMS(ms, us, late, early int64) bool {
	if us <= 0 || ms <= 0 {
		return ms == us
	}
	ns := us * 1000
	return ms >= ceilMS(ns-late) && ms <= ceilMS(ns+early)
}

func ceilMS(ns int64) int64 { return (max(ns, 0) + 999_999) / 1_000_000 }

func (e *e2e) report() {
	st := e.stats
	e.t.Logf("%s over RESP: %d steps, %d compared, %d agreed (%d allowed, %d denied), %d not compared (a window edge or expiry fell between send and reply)",
		e.a, st.steps, st.compared, st.agreed, st.allowed, st.denied, st.resynced)
	if st.compared < st.steps*9/10 || st.allowed == 0 || st.denied == 0 {
		e.t.Errorf("too little compared to mean anything: %+v", st)
	}
}

// buildRLServer builds cmd/rlserver into a temporary directory.
func buildRLServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rlserver")
	cmd := exec.Command(testutil.GoCommand(t), "build", "-o", bin, "github.com/rlserver/rlserver/cmd/rlserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rlserver: %v\n%s", err, out)
	}
	return bin
}

// startRLServer runs the rlserver binary on a free 127.0.0.1 port with a
// temporary data directory (started again on another port, Attempts times
// in all, should another process take it: rlproc.OnFreeAddrs), waits until
// it answers PING (15 s; an exit is noticed, with the log) and stops it
// with SIGTERM when the test ends, failing the test if it does not exit
// with status 0 within 10 s.
func startRLServer(t *testing.T, bin string) string {
	t.Helper()
	var addr string
	p, err := rlproc.OnFreeAddrs(1, func(addrs []string) (*rlproc.Proc, error) {
		addr = addrs[0]
		p, err := rlproc.Start("rlserver", bin, []string{"--listen", addr, "--http", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "warn"}, nil)
		if err != nil {
			return nil, err
		}
		return p, p.WaitPing(addr, 15*time.Second, func() error { return rlproc.Ping(addr) })
	})
	if err != nil {
		if p != nil {
			p.Kill()
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("%v\n%s", err, p.Log())
		}
	})
	return addr
}
