package script

import (
	"crypto/sha1"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/values"
)

// Config configures an Engine. The zero value of a field picks its default.
type Config struct {
	// TimeLimit is how long a run may go before it is busy (Redis's
	// lua-time-limit / busy-reply-threshold): other clients then get BUSY
	// for what would wait for it, and SCRIPT KILL may stop it. Default 5 s.
	TimeLimit time.Duration
	// MemoryLimit bounds the memory a run's Lua values may hold, in bytes:
	// a run that goes past it stops with an error. Default 64 MiB. See
	// DESIGN.md for how it is measured and its limits.
	MemoryLimit int64
	// Logger receives redis.log; nil discards it.
	Logger *slog.Logger
	// Now is a monotonic clock, read to tell when a run turns busy.
	// Default: the time since New.
	Now func() time.Duration
	// OnBusy, if set, is called when a run turns busy (busy true) and when
	// a busy run ends (busy false), with the run's Request.Tag, from the
	// run's goroutine and without the engine's locks held.
	OnBusy func(tag any, busy bool)
	// LongRun is how long an interpreted run goes on before its
	// Request.OnLong is called. Default 5 ms.
	LongRun time.Duration
	// IdleStates is how many interpreter states are kept for reuse.
	// Default 2 × GOMAXPROCS.
	IdleStates int
}

// Defaults.
const (
	DefaultTimeLimit   = 5 * time.Second
	DefaultMemoryLimit = 64 << 20
	DefaultLongRun     = 5 * time.Millisecond
)

// Engine runs scripts. It is safe for concurrent use: runs proceed in
// parallel, each on the goroutine that called Eval, and the server makes
// each atomic with respect to the keys it touches.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	rand  lrand48 // math.random, shared by every run as Redis's is
	pool  statePool
	cache scriptCache
	execs sync.Pool // *Exec
	watch watchdog

	hookless bool // states without the hook: for measuring its cost only

	natMu       sync.Mutex                              // serialises Register
	native      atomic.Pointer[map[string]*nativeEntry] // by lower-case sha; replaced, never changed, by Register
	interpreted atomic.Uint64

	mu        sync.Mutex
	busy      map[*run]struct{}
	busyCount atomic.Int32
}

// New returns an Engine configured by cfg.
func New(cfg Config) *Engine {
	if cfg.TimeLimit <= 0 {
		cfg.TimeLimit = DefaultTimeLimit
	}
	if cfg.LongRun <= 0 {
		cfg.LongRun = DefaultLongRun
	}
	if cfg.MemoryLimit <= 0 {
		cfg.MemoryLimit = DefaultMemoryLimit
	}
	if cfg.Now == nil {
		start := time.Now()
		cfg.Now = func() time.Duration { return time.Since(start) }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, log: log, busy: map[*run]struct{}{}}
	e.native.Store(&map[string]*nativeEntry{})
	e.rand.reset()
	e.watch.init()
	e.pool.init(e, cfg.IdleStates)
	e.cache.init(e)
	return e
}

// Close stops the engine's watchdog goroutine. Runs in progress finish;
// no run may start after Close.
func (e *Engine) Close() { e.watch.close() }

// SHA returns the lower-case hex sha1 of body, the name EVALSHA uses.
func SHA(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

// Load compiles body and caches it under its sha, as SCRIPT LOAD does, and
// returns the sha. A body already cached is not compiled again. A body
// that does not compile returns the error reply Redis gives ("ERR Error
// compiling script (new function): user_script:1: ...").
func (e *Engine) Load(body []byte) (string, *values.Reply) {
	s, errReply := e.cache.load(body)
	if errReply != nil {
		return "", errReply
	}
	return s.sha, nil
}

// Exists reports whether the script sha (hex, any case) is cached.
func (e *Engine) Exists(sha []byte) bool {
	_, ok := e.cache.get(sha)
	return ok
}

// Flush empties the script cache (SCRIPT FLUSH). Runs in progress finish;
// registered native handlers stay registered.
func (e *Engine) Flush() { e.cache.flush() }

// nativeEntry is a registered native handler and the runs it served.
type nativeEntry struct {
	r    Runner
	name string
	runs atomic.Uint64
}

// Register makes r run the script whose sha is sha (hex, any case) instead
// of the interpreter, once the script is cached (EVAL of its body, or
// SCRIPT LOAD): an EVALSHA of a sha never loaded still answers NOSCRIPT,
// as it would without r. r must do exactly what the script does. Stats
// names r by its Name method if it has one, else by the sha. A nil r
// removes the registration.
func (e *Engine) Register(sha string, r Runner) {
	key := string(lowerHex([]byte(sha)))
	e.natMu.Lock()
	defer e.natMu.Unlock()
	m := make(map[string]*nativeEntry, len(*e.native.Load())+1)
	for k, v := range *e.native.Load() {
		m[k] = v
	}
	if r == nil {
		delete(m, key)
	} else {
		name := key
		if n, ok := r.(interface{ Name() string }); ok {
			name = n.Name()
		}
		m[key] = &nativeEntry{r: r, name: name}
	}
	e.native.Store(&m)
}

// nativeRef is a script's native handler, found in registry m.
type nativeRef struct {
	m *map[string]*nativeEntry
	n *nativeEntry
}

// native returns the native handler registered for s, if any, looking it
// up once for each registry Register makes rather than at every run.
func (s *Script) native() *nativeEntry {
	m := s.e.native.Load()
	if r := s.nat.Load(); r != nil && r.m == m {
		return r.n
	}
	r := &nativeRef{m: m, n: (*m)[s.sha]}
	s.nat.Store(r)
	return r.n
}

// HasNative reports whether a native handler runs s (Engine.Register).
func (s *Script) HasNative() bool { return s.native() != nil }

// HasNative reports whether a native handler is registered for sha, the
// lower-case hex sha1 of a script (an EVALSHA's argument as the libraries
// send it; another case reports false).
func (e *Engine) HasNative(sha []byte) bool { return (*e.native.Load())[string(sha)] != nil }

// Stats counts the runs each path served since New: the interpreter, and
// each native handler registered now, by name. For INFO and metrics.
type Stats struct {
	Interpreted uint64
	Native      map[string]uint64
}

// Stats returns the counts of runs by path.
func (e *Engine) Stats() Stats {
	s := Stats{Interpreted: e.interpreted.Load(), Native: map[string]uint64{}}
	for _, n := range *e.native.Load() {
		s.Native[n.name] += n.runs.Load()
	}
	return s
}

// Busy reports whether some run has gone past the time limit and not yet
// ended.
func (e *Engine) Busy() bool { return e.busyCount.Load() > 0 }

// BusyTags appends to dst the Request.Tag of every busy run and returns
// it.
func (e *Engine) BusyTags(dst []any) []any {
	if !e.Busy() {
		return dst
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for r := range e.busy {
		dst = append(dst, r.tag)
	}
	return dst
}

// Replies of SCRIPT KILL, as Redis 7.0 words them.
var (
	replyNotBusy    = []byte("NOTBUSY No scripts in execution right now.")
	replyUnkillable = []byte("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.")
)

// Kill stops every busy run that has not written (SCRIPT KILL): OK if it
// stopped one, NOTBUSY if no run is busy, UNKILLABLE if every busy run has
// written. A stopped run answers its caller "ERR Script killed by user with
// SCRIPT KILL..." at its next instruction or command.
func (e *Engine) Kill() values.Reply {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.busy) == 0 {
		return errorReply(replyNotBusy)
	}
	killed := false
	for r := range e.busy {
		if r.state.CompareAndSwap(runClean, runKilled) || r.state.Load() == runKilled {
			killed = true
		}
	}
	if !killed {
		return errorReply(replyUnkillable)
	}
	return values.Reply{Kind: values.Status, Str: []byte("OK")}
}

// markBusy records r as busy; it is called once, from r's goroutine.
func (e *Engine) markBusy(r *run) {
	e.mu.Lock()
	r.busy = true
	e.busy[r] = struct{}{}
	e.busyCount.Add(1)
	e.mu.Unlock()
	e.log.Warn("slow script: still running past the time limit", "script", r.sha, "limit", e.cfg.TimeLimit)
	if e.cfg.OnBusy != nil {
		e.cfg.OnBusy(r.tag, true)
	}
}

// endRun forgets r when it was busy.
func (e *Engine) endRun(r *run) {
	e.mu.Lock()
	wasBusy := r.busy
	if wasBusy {
		delete(e.busy, r)
		e.busyCount.Add(-1)
		r.busy = false
	}
	e.mu.Unlock()
	if wasBusy && e.cfg.OnBusy != nil {
		e.cfg.OnBusy(r.tag, false)
	}
}

// lowerHex lower-cases the ASCII letters of a hex sha in place.
func lowerHex(b []byte) []byte {
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}
