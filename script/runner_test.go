package script

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlserver/rlserver/internal/testseed"
	"github.com/rlserver/rlserver/values"
)

// A fixed-window limiter, and a native handler that does what it does,
// call for call: the proof that a Runner registered for a sha and the
// interpreter are interchangeable.
const fixedWindowScript = `local n = redis.call('INCR', KEYS[1])
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local limit = tonumber(ARGV[1])
if not limit then
  return redis.error_reply('ERR limit is not a number')
end
local ttl = redis.call('PTTL', KEYS[1])
if n > limit then
  return {0, 0, ttl > 0}
end
return {1, limit - n, ttl > 0}`

// fixedWindow is the native handler for fixedWindowScript.
type fixedWindow struct{}

var (
	cmdIncr    = []byte("INCR")
	cmdPexpire = []byte("PEXPIRE")
	cmdPttl    = []byte("PTTL")
)

// Name is the name Stats gives the handler.
func (fixedWindow) Name() string { return "fixed-window" }

func (fixedWindow) Run(x *Exec) values.Reply {
	if len(x.Keys) == 0 {
		return x.Fail(errorReply(errBadArgTypes), 1)
	}
	arg := func(i int) []byte {
		if i < len(x.Args) {
			return x.Args[i]
		}
		return nil
	}
	r := x.Call(x.Argv(cmdIncr, x.Keys[0]))
	if r.Kind == values.Error {
		return x.Fail(r, 1)
	}
	n := r.Int
	if n == 1 {
		if arg(1) == nil {
			return x.Fail(errorReply(errBadArgTypes), 3)
		}
		if r := x.Call(x.Argv(cmdPexpire, x.Keys[0], arg(1))); r.Kind == values.Error {
			return x.Fail(r, 3)
		}
	}
	limit, ok := str2number(string(arg(0)))
	if arg(0) == nil || !ok {
		return errorReply([]byte("ERR limit is not a number"))
	}
	ttl := x.Call(x.Argv(cmdPttl, x.Keys[0]))
	if ttl.Kind == values.Error {
		return x.Fail(ttl, 9)
	}
	alive := values.Reply{Kind: values.Int, Int: 1}
	if ttl.Int <= 0 {
		alive = values.Reply{Kind: values.Nil}
	}
	if float64(n) > limit {
		return values.Reply{Kind: values.Array, Elems: []values.Reply{{Kind: values.Int}, {Kind: values.Int}, alive}}
	}
	return values.Reply{Kind: values.Array, Elems: []values.Reply{{Kind: values.Int, Int: 1},
		{Kind: values.Int, Int: toInteger(limit - float64(n))}, alive}}
}

// step is one call of the limiter.
type step struct {
	keys, args []string
}

func randomSteps(t *testing.T, n int) []step {
	rnd := testseed.Rand(t)
	keys := [][]string{{"a"}, {"b"}, {"list"}, {}}
	limits := []string{"3", "10", "2.5", "x", "-1"}
	windows := []string{"60000", "0", "abc"}
	steps := make([]step, n)
	for i := range steps {
		args := []string{limits[rnd.IntN(len(limits))], windows[rnd.IntN(len(windows))]}
		steps[i] = step{keys: keys[rnd.IntN(len(keys))], args: args[:rnd.IntN(3)]}
	}
	return steps
}

// runSteps runs the steps on a fresh keyspace of h's redis-server, by
// EVAL, then by EVALSHA, and returns a transcript: each reply, the
// commands it called, and the keyspace after it.
func runSteps(h *harness, steps []step) string {
	h.reset([][]string{{"LPUSH", "list", "x"}})
	var b strings.Builder
	for i, s := range steps {
		req := Request{Body: []byte(fixedWindowScript)}
		if i%2 == 1 {
			req = Request{SHA: []byte(strings.ToUpper(SHA([]byte(fixedWindowScript))))}
		}
		for _, k := range s.keys {
			req.Keys = append(req.Keys, []byte(k))
		}
		for _, a := range s.args {
			req.Args = append(req.Args, []byte(a))
		}
		h.fwd.log = h.fwd.log[:0]
		r := h.e.Eval(req, h.fwd)
		fmt.Fprintf(&b, "step %d %v %v: %q\n  calls %s\n%s", i, s.keys, s.args, writeReply(nil, r, 2),
			strings.Join(h.fwd.log, " "), h.keyspace())
	}
	return b.String()
}

func TestNativeRunnerIsInterchangeable(t *testing.T) {
	h := newHarness(t, Config{})
	steps := randomSteps(t, 200)
	lua := runSteps(h, steps)

	sha := SHA([]byte(fixedWindowScript))
	h.e.Register(strings.ToUpper(sha), fixedWindow{})
	native := runSteps(h, steps)

	if lua != native {
		l, n := strings.Split(lua, "\n"), strings.Split(native, "\n")
		for i := range l {
			if i >= len(n) || l[i] != n[i] {
				t.Fatalf("the paths differ at line %d:\n  interpreter: %s\n  native:      %s", i, l[i], n[min(i, len(n)-1)])
			}
		}
		t.Fatal("the transcripts differ in length")
	}
	if !strings.Contains(lua, "WRONGTYPE") || !strings.Contains(lua, "limit is not a number") || !strings.Contains(lua, "must be strings or integers") {
		t.Fatalf("the steps did not reach every path:\n%s", lua)
	}
	t.Logf("%d steps, identical transcripts (%d bytes)", len(steps), len(lua))
}

func TestNativeRunnerNeedsTheScriptLoaded(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	mem := newMemCaller()
	sha := SHA([]byte(fixedWindowScript))
	e.Register(sha, fixedWindow{})
	req := Request{SHA: []byte(sha), Keys: [][]byte{[]byte("k")}, Args: [][]byte{[]byte("5"), []byte("1000")}}
	if r := e.Eval(req, mem); !bytes.HasPrefix(r.Str, []byte("NOSCRIPT")) {
		t.Fatalf("EVALSHA before any load: %q", replyText(r))
	}
	if _, errReply := e.Load([]byte(fixedWindowScript)); errReply != nil {
		t.Fatal(errReply)
	}
	if r := e.Eval(req, mem); r.Kind != values.Array || r.Elems[1].Int != 4 {
		t.Fatalf("EVALSHA after SCRIPT LOAD: %q", replyText(r))
	}
	if mem.calls != 3 {
		t.Fatalf("the native run made %d calls, want 3", mem.calls)
	}
	if s := e.Stats(); s.Interpreted != 0 || s.Native["fixed-window"] != 1 {
		t.Fatalf("stats %+v, want one native run", s)
	}
	e.Register(sha, nil)
	if r := e.Eval(req, mem); r.Kind != values.Array || r.Elems[1].Int != 3 {
		t.Fatalf("after unregistering: %q", replyText(r))
	}
	if s := e.Stats(); s.Interpreted != 1 || len(s.Native) != 0 {
		t.Fatalf("stats %+v, want one interpreted run", s)
	}
}

// nativeAllocs checks that the native path allocates nothing of its own
// per call, the Caller aside.
func TestNativeRunAllocatesNothing(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	sha, _ := e.Load([]byte(fixedWindowScript))
	e.Register(sha, fixedWindow{})
	c := &nopCaller{}
	req := Request{SHA: []byte(sha), Keys: [][]byte{[]byte("k")}, Args: [][]byte{[]byte("5"), []byte("1000")}}
	var r values.Reply
	allocs := testing.AllocsPerRun(1000, func() { r = e.Eval(req, c) })
	t.Logf("reply %q, %.1f allocations per run", replyText(r), allocs)
	if allocs > 1 { // the reply's array
		t.Fatalf("%.1f allocations per native run", allocs)
	}
}

// nopCaller answers every command at once, without allocating: it
// measures the engine alone.
type nopCaller struct{ n int64 }

func (c *nopCaller) Command(name []byte) (values.Command, bool) {
	return values.Command{Arity: -2, Flags: values.Write}, true
}

func (c *nopCaller) Call(args [][]byte, resp int) values.Reply {
	c.n++
	return values.Reply{Kind: values.Int, Int: c.n%7 + 1}
}

// TestConcurrentRuns runs one script from many goroutines at once: the
// compiled body is shared, the states are not (go test -race checks).
func TestConcurrentRuns(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	mem := newMemCaller()
	sha, errReply := e.Load([]byte(slidingLogScript))
	if errReply != nil {
		t.Fatal(string(errReply.Str))
	}
	done := make(chan values.Reply, 8)
	for g := 0; g < 8; g++ {
		go func(g int) {
			var last values.Reply
			for i := 0; i < 100; i++ {
				key := []byte(fmt.Sprintf("user:%d", g))
				args := [][]byte{[]byte(fmt.Sprint(1700000000000 + i)), []byte("60000"), []byte("50"), []byte(fmt.Sprint(i))}
				last = e.Eval(Request{SHA: []byte(sha), Keys: [][]byte{key}, Args: args}, mem)
			}
			done <- last
		}(g)
	}
	for g := 0; g < 8; g++ {
		r := <-done
		if r.Kind != values.Array || r.Elems[0].Int != 0 {
			t.Fatalf("the 100th call of a limit of 50 answered %q", replyText(r))
		}
	}
}

// TestArgumentsOfTheLastRun: a state keeps an argument's string when the
// next run passes the same bytes, so each run must still see its own
// arguments, whatever the run before left in KEYS and ARGV.
func TestArgumentsOfTheLastRun(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	sha, errReply := e.Load([]byte("local got = KEYS[1] .. ':' .. table.concat(ARGV, ',') " +
		"KEYS[1], ARGV[1] = 'changed', 'changed' return got"))
	if errReply != nil {
		t.Fatal(string(errReply.Str))
	}
	mem := newMemCaller()
	for i, args := range [][]string{{"100", "60"}, {"100", "60"}, {"100", "61"}, {"100"}, {"100", "60", "1"}, {"changed", "60"}, {"100", "60"}} {
		argv := make([][]byte, len(args))
		for j, a := range args {
			argv[j] = []byte(a)
		}
		r := e.Eval(Request{SHA: []byte(sha), Keys: [][]byte{[]byte("k")}, Args: argv}, mem)
		if want := "k:" + strings.Join(args, ","); r.Kind != values.Bulk || string(r.Str) != want {
			t.Fatalf("run %d: %q, want %q", i, replyText(r), want)
		}
	}
}

// TestCacheFindsEveryScriptLoaded: past snapAtOnce scripts, the cache
// keeps new ones aside between snapshots; every script loaded is found at
// once, in either case of its sha, by readers running meanwhile, and
// SCRIPT FLUSH forgets them all.
func TestCacheFindsEveryScriptLoaded(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	const n = 3 * snapAtOnce
	shas := make([]string, n)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var loaded atomic.Int64
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rng := rand.New(rand.NewPCG(uint64(r), 1)); ; {
				select {
				case <-stop:
					return
				default:
				}
				if k := loaded.Load(); k > 0 {
					if i := rng.IntN(int(k)); !e.Exists([]byte(shaOfReturn(i))) {
						t.Errorf("script %d of %d loaded is not found", i, k)
						return
					}
				}
			}
		}()
	}
	for i := range shas {
		sha, errReply := e.Load([]byte(fmt.Sprintf("return %d", i)))
		if errReply != nil {
			t.Fatal(string(errReply.Str))
		}
		shas[i] = sha
		loaded.Store(int64(i + 1))
		if !e.Exists([]byte(strings.ToUpper(sha))) {
			t.Fatalf("script %d not found right after its load", i)
		}
	}
	close(stop)
	wg.Wait()
	for i, sha := range shas {
		if r := e.Eval(Request{SHA: []byte(sha)}, &nopCaller{}); r.Kind != values.Int || r.Int != int64(i) {
			t.Fatalf("script %d answered %q", i, replyText(r))
		}
	}
	e.Flush()
	for _, sha := range []string{shas[0], shas[n/2], shas[n-1]} {
		if e.Exists([]byte(sha)) {
			t.Fatalf("%s found after Flush", sha)
		}
	}
}

// shaOfReturn is the sha of the body "return i".
func shaOfReturn(i int) string { return SHA([]byte(fmt.Sprintf("return %d", i))) }
