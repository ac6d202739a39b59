package script

import (
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/values"
)

// fakeClock is Config.Now for tests: time moves when the test says.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Duration      { return time.Duration(c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// evalAsync runs a script in a goroutine and returns where its reply comes.
func evalAsync(e *Engine, c Caller, body string, tag any) <-chan values.Reply {
	done := make(chan values.Reply, 1)
	go func() { done <- e.Eval(Request{Body: []byte(body), Tag: tag}, c) }()
	return done
}

func replyText(r values.Reply) string {
	switch r.Kind {
	case values.Error:
		return "-" + string(r.Str)
	case values.Int:
		return ":" + string(appendG(nil, float64(r.Int), 17, false, false))
	}
	return string(writeReply(nil, r, 2))
}

// busyLog records OnBusy calls.
type busyLog struct {
	mu    sync.Mutex
	calls []string
}

func (b *busyLog) onBusy(tag any, busy bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	state := "idle"
	if busy {
		state = "busy"
	}
	b.calls = append(b.calls, tag.(string)+" "+state)
}

func (b *busyLog) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.calls, ", ")
}

func TestEndlessLoopTurnsBusyAndIsKilled(t *testing.T) {
	clock := &fakeClock{}
	log := &busyLog{}
	e := New(Config{Now: clock.Now, OnBusy: log.onBusy})
	mem := newMemCaller()
	body := "local i = 0\nwhile true do\n  i = i + 1\nend"
	done := evalAsync(e, mem, "redis.call('PING')\n"+body, "slot-7")
	testutil.WaitFor(t, 10*time.Second, "the run to start", func() bool { mem.mu.Lock(); defer mem.mu.Unlock(); return mem.calls > 0 })

	if r := e.Kill(); replyText(r) != "-NOTBUSY No scripts in execution right now." {
		t.Fatalf("kill before the time limit: %q", replyText(r))
	}
	time.Sleep(5 * time.Millisecond)
	if e.Busy() {
		t.Fatal("busy before the time limit")
	}
	clock.Advance(DefaultTimeLimit + time.Millisecond)
	testutil.WaitFor(t, 10*time.Second, "the run to turn busy", e.Busy)
	if tags := e.BusyTags(nil); len(tags) != 1 || tags[0] != "slot-7" {
		t.Fatalf("busy tags %v", tags)
	}
	if r := e.Kill(); replyText(r) != "+OK\r\n" {
		t.Fatalf("kill: %q", replyText(r))
	}
	r := <-done
	want := "-ERR Script killed by user with SCRIPT KILL... script: " + SHA([]byte("redis.call('PING')\n"+body)) + ", on @user_script:"
	if got := replyText(r); !strings.HasPrefix(got, want) || (!strings.HasSuffix(got, ":4.") && !strings.HasSuffix(got, ":5.")) {
		t.Fatalf("killed run answered %q, want %q and line 4 or 5 (the loop's)", got, want)
	}
	if e.Busy() || len(e.BusyTags(nil)) != 0 {
		t.Fatal("still busy after the run ended")
	}
	if got := log.String(); got != "slot-7 busy, slot-7 idle" {
		t.Fatalf("OnBusy calls: %s", got)
	}
	if r := e.Kill(); replyText(r) != "-NOTBUSY No scripts in execution right now." {
		t.Fatalf("kill after: %q", replyText(r))
	}
	if r := e.Eval(Request{Body: []byte("return 42")}, mem); r.Kind != values.Int || r.Int != 42 {
		t.Fatalf("next script: %q", replyText(r))
	}
}

func TestBusyScriptThatWroteIsUnkillable(t *testing.T) {
	clock := &fakeClock{}
	e := New(Config{Now: clock.Now})
	mem := newMemCaller()
	done := evalAsync(e, mem, `
redis.call('SET', 'written', '1')
while redis.call('GET', 'stop') == false do end
return 'stopped'`, "t")
	testutil.WaitFor(t, 10*time.Second, "the write", func() bool { mem.mu.Lock(); defer mem.mu.Unlock(); return mem.str["written"] == "1" })
	clock.Advance(DefaultTimeLimit)
	testutil.WaitFor(t, 10*time.Second, "busy", e.Busy)
	want := "-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
	if r := e.Kill(); replyText(r) != want {
		t.Fatalf("kill: %q", replyText(r))
	}
	mem.set("stop", "1")
	if r := <-done; string(r.Str) != "stopped" {
		t.Fatalf("run answered %q", replyText(r))
	}
}

func TestKillReachesPcallAndCoroutines(t *testing.T) {
	for name, body := range map[string]string{
		"pcall":        "local ok, e = pcall(function() while true do end end)\nreturn 'survived: ' .. tostring(e)",
		"nested pcall": "while true do pcall(function() while true do pcall(error, 'x') end end) end",
		"coroutine":    "local co = coroutine.create(function() while true do end end)\nreturn {coroutine.resume(co)}",
		"wrap":         "local f = coroutine.wrap(function() while true do end end)\nreturn f()",
		"xpcall":       "local r = {xpcall(function() while true do end end, function(m) return m end)}\nreturn r",
	} {
		t.Run(name, func(t *testing.T) {
			clock := &fakeClock{}
			e := New(Config{Now: clock.Now})
			mem := newMemCaller()
			done := evalAsync(e, mem, "redis.call('PING')\n"+body, "t")
			testutil.WaitFor(t, 10*time.Second, "the run to start", func() bool { mem.mu.Lock(); defer mem.mu.Unlock(); return mem.calls > 0 })
			clock.Advance(DefaultTimeLimit)
			testutil.WaitFor(t, 10*time.Second, "busy", e.Busy)
			if r := e.Kill(); r.Kind != values.Status {
				t.Fatalf("kill: %q", replyText(r))
			}
			r := <-done
			if r.Kind != values.Error || !strings.HasPrefix(string(r.Str), "ERR Script killed by user with SCRIPT KILL...") {
				t.Fatalf("run answered %q", replyText(r))
			}
		})
	}
}

// heapSampler records the peak of the heap while a test runs.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	peak atomic.Uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(h.done)
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	return h
}

func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

func heapNow() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestMemoryHogsAreStoppedAtTheCap(t *testing.T) {
	const limit = 4 << 20
	hogs := map[string]string{
		"table of strings": "local t = {} while true do t[#t+1] = string.rep('x', 1000) end",
		"doubling concat":  "local s = 'x' while true do s = s .. s end",
		"concat chain":     "local s = string.rep('x', 4000000) return s .. s .. s .. s .. s .. s",
		"string.rep":       "return string.rep('x', 1e12)",
		"rep of a rep":     "local s = string.rep('x', 1e6) return string.rep(s, 1e6)",
		"table.concat":     "local s = string.rep('x', 1e6) local t = {} for i = 1, 100 do t[i] = s end return table.concat(t)",
		"string.format":    "local s = string.rep('x', 4e6) return string.format(string.rep('%s', 20), s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s)",
		"gsub":             "local s = string.rep('x', 1e5) return (s:gsub('x', string.rep('y', 1000)))",
		"cjson.encode":     "local s = string.rep('x', 1e6) local t = {} for i = 1, 100 do t[i] = s end return cjson.encode(t)",
		"cmsgpack.pack":    "local s = string.rep('x', 1e6) local t = {} for i = 1, 100 do t[i] = s end return cmsgpack.pack(t)",
		"struct.pack":      "local s = string.rep('x', 1e6) return struct.pack(string.rep('c0', 100), " + strings.Repeat("s, ", 99) + "s)",
		"coroutines":       "local t = {} while true do t[#t+1] = coroutine.create(function() end) end",
		"nested tables":    "local t = {} while true do t = {t, {}, {}} end",
		"closures":         "local t = {} while true do local x = {} t[#t+1] = function() return x end end",
		"sparse arrays":    "local all = {} while true do local t = {} t[1048575] = 1 all[#all+1] = t end",
		"pcall swallows":   "local t = {} while true do pcall(function() for i = 1, 100 do t[#t+1] = string.rep('x', 1000) end end) end",
		"string.char":      "local t = {} while true do t[#t+1] = string.char(65, 66, 67) .. #t end",
		"table.insert":     "local t = {} while true do table.insert(t, {}) end",
		"cjson.decode":     "local t = {} while true do t[#t+1] = cjson.decode('[1,2,3,4,5,6,7,8,9,10]') end",
		"gmatch strings":   "local t = {} local s = string.rep('a', 1e6) while true do for w in s:gmatch('a') do t[#t+1] = w .. #t end end",
	}
	for name, body := range hogs {
		t.Run(name, func(t *testing.T) {
			e := New(Config{MemoryLimit: limit})
			base := heapNow()
			peak := sampleHeap()
			start := time.Now()
			r := e.Eval(Request{Body: []byte(body)}, newMemCaller())
			top := peak.Stop()
			if r.Kind != values.Error || !strings.Contains(string(r.Str), "memory limit") {
				t.Fatalf("hog answered %.200q", replyText(r))
			}
			grew := int64(top) - int64(base)
			t.Logf("%s: %.120s in %v, heap grew %d MiB at most (limit %d MiB)", name, r.Str, time.Since(start).Round(time.Millisecond), grew>>20, limit>>20)
			// One instruction t[n] = v fills an array part of n slots
			// (here 16 MiB, growing it by doubling: about 48 MiB
			// allocated; at most maxArrayIndex slots) before the hook
			// can look.
			// Garbage counts until the collector runs: a slack of 64 MiB.
			bound := int64(8*limit + 64<<20)
			if name == "sparse arrays" {
				bound += 8 * (1 << 20) * sizeValue
			}
			if grew > bound {
				t.Errorf("the heap grew %d MiB, more than %d MiB", grew>>20, bound>>20)
			}
			if r := e.Eval(Request{Body: []byte("return 'fine'")}, newMemCaller()); string(r.Str) != "fine" {
				t.Fatalf("the next run answered %q", replyText(r))
			}
		})
	}
}

func TestMemoryHogDoesNotDisturbOtherRuns(t *testing.T) {
	e := New(Config{MemoryLimit: 16 << 20})
	mem := newMemCaller()
	hog := evalAsync(e, mem, "local t = {} while true do t[#t+1] = string.rep('x', 1000) end", "hog")
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := e.Eval(Request{Body: []byte("local t = {} for i = 1, 100 do t[i] = i end redis.call('INCR', 'n') return #t"), Keys: nil}, mem)
				if r.Kind == values.Int && r.Int == 100 {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	r := <-hog
	close(stop)
	wg.Wait()
	if r.Kind != values.Error || !strings.Contains(string(r.Str), "memory limit") {
		t.Fatalf("hog answered %.200q", replyText(r))
	}
	if failed.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("bystanders: %d ok, %d failed", ok.Load(), failed.Load())
	}
	t.Logf("bystander runs while the hog ran: %d, all fine", ok.Load())
}

func TestSandboxRefusesTheHost(t *testing.T) {
	e := New(Config{})
	for _, body := range []string{
		"os.execute('touch /tmp/rlserver-script-pwned')", "io.open('/etc/passwd')", "loadfile('/etc/passwd')",
		"dofile('/etc/passwd')", "require('os')", "debug.getinfo(1)", "package.loadlib('x', 'y')",
		"setfenv(1, {})", "getfenv(1)", "newproxy()", "module('m')", "print('x')",
		"loadstring('return os')().execute('true')", "load(function() return nil end)() os.exit()",
	} {
		r := e.Eval(Request{Body: []byte(body)}, newMemCaller())
		if r.Kind != values.Error || !strings.Contains(string(r.Str), "Script attempted to access nonexistent global variable") {
			t.Errorf("%s: %q", body, replyText(r))
		}
	}
}

// TestRunsDoNotLeak runs a script that tries to leave something behind,
// then one that looks for it, on an engine with a single state so that
// the second run reuses the first one's interpreter.
func TestRunsDoNotLeak(t *testing.T) {
	for _, c := range []struct{ name, first, second, want string }{
		{"new global", "x = 1", "return type(rawget(_G, 'x'))", "nil"},
		{"rawset global", "rawset(_G, 'x', 1)", "return type(rawget(_G, 'x'))", "nil"},
		{"replace a library function", "pcall(function() string.len = function() return 7 end end) return 1", "return string.len('ab')", "2"},
		{"library table via rawset", "pcall(rawset, string, 'len', nil) return 1", "return string.len('ab')", "2"},
		{"string metatable", "pcall(function() getmetatable('').__index = {len = function() return 7 end} end) return 1", "return ('ab'):len()", "2"},
		{"string metatable rawset", "pcall(rawset, getmetatable(''), '__index', {}) return 1", "return ('ab'):upper()", "AB"},
		{"globals metatable", "pcall(setmetatable, _G, {}) return 1", "return pcall(function() return undefined_global end) and 'leak' or 'refused'", "refused"},
		{"KEYS fields", "KEYS.extra = 'x' setmetatable(KEYS, {__index = function() return 'meta' end}) return 1", "return tostring(KEYS.extra) .. tostring(KEYS[5]) .. #KEYS", "nilnil1"},
		{"ARGV grown", "for i = 1, 100 do ARGV[i] = i end return 1", "return #ARGV", "0"},
		{"cjson settings", "cjson.encode_number_precision(3) cjson.encode_sparse_array(true) return 1", "local t = {} t[20] = 1 return {cjson.encode(1/3), pcall(cjson.encode, t)}", ""},
		{"redis table", "pcall(function() redis.call = function() return 'fake' end end) return 1", "return redis.call('PING').ok", "PONG"},
		{"math.huge", "pcall(function() math.huge = 1 end) return 1", "return tostring(math.huge)", "inf"},
		{"setresp", "redis.setresp(3) return 1", "return redis.call('GET', 'nope') == false and 'resp2' or 'resp3'", "resp2"},
		{"suspended coroutine", "co = nil local c = coroutine.create(function() coroutine.yield() end) coroutine.resume(c) return 1", "return 1", "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := New(Config{IdleStates: 1})
			mem := newMemCaller()
			e.Eval(Request{Body: []byte(c.first), Keys: [][]byte{[]byte("k")}, Args: [][]byte{[]byte("a")}}, mem)
			r := e.Eval(Request{Body: []byte(c.second), Keys: [][]byte{[]byte("k")}}, mem)
			got := replyText(r)
			switch {
			case c.want == "" && r.Kind == values.Array:
				if string(r.Elems[0].Str) != "0.33333333333333" || r.Elems[1].Kind != values.Nil {
					t.Fatalf("cjson settings leaked: %q", got)
				}
			case r.Kind == values.Bulk || r.Kind == values.Status:
				if string(r.Str) != c.want {
					t.Fatalf("second run saw %q, want %q", r.Str, c.want)
				}
			case r.Kind == values.Int:
				if got != ":"+c.want {
					t.Fatalf("second run saw %q, want %q", got, c.want)
				}
			default:
				t.Fatalf("second run answered %q", got)
			}
		})
	}
}

func TestLargeBodies(t *testing.T) {
	// 4 MiB: the refused bodies exceed the token limit (DefaultMemoryLimit
	// / bytesPerToken, 262,144) five to sixteen times over.
	const size = 4 << 20
	e := New(Config{})
	mem := newMemCaller()
	for _, c := range []struct {
		name, body string
		refused    bool
	}{
		{"comment", "return 1 --" + strings.Repeat("x", size), false},
		{"long string", "return #[[" + strings.Repeat("y", size) + "]]", false},
		{"statements", strings.Repeat("redis.call('PING')\n", size/19), true},
		{"table", "return #{" + strings.Repeat("1,", size/2) + "}", true},
		{"concat chain", "return 'a'" + strings.Repeat("..'a'", size/5), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := heapNow()
			peak := sampleHeap()
			start := time.Now()
			sha, errReply := e.Load([]byte(c.body))
			took := time.Since(start)
			top := peak.Stop()
			t.Logf("%d bytes: loaded in %v, heap grew %d MiB at most", len(c.body), took.Round(time.Millisecond), (int64(top)-int64(base))>>20)
			if c.refused {
				if errReply == nil || !strings.Contains(string(errReply.Str), "Error compiling script") {
					t.Fatalf("not refused: sha %s, %v", sha, errReply)
				}
				t.Logf("refused: %.160s", errReply.Str)
				return
			}
			if errReply != nil {
				t.Fatalf("refused: %.200s", errReply.Str)
			}
			r := e.Eval(Request{SHA: []byte(sha)}, mem)
			if r.Kind != values.Int {
				t.Fatalf("run: %.200q", replyText(r))
			}
		})
	}
}
