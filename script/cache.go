package script

import (
	"maps"
	"regexp"
	"sync"
	"sync/atomic"

	lua "github.com/yuin/gopher-lua"

	"github.com/rlserver/rlserver/values"
)

// The script cache: every body EVAL or SCRIPT LOAD has compiled, by sha,
// until SCRIPT FLUSH. Like Redis's, it keeps every script it is given.

// Script is a compiled script body.
type Script struct {
	sha   string
	proto *lua.FunctionProto
	flags ScriptFlags
	every bool // names KEYS, SCAN or DBSIZE in a string literal
	e     *Engine
	nat   atomic.Pointer[nativeRef] // see native
}

// SHA returns the script's lower-case hex sha1.
func (s *Script) SHA() string { return s.sha }

// Flags returns the flags of the script's shebang line ("#!lua
// flags=no-writes,allow-oom"); 0 for a script without one.
func (s *Script) Flags() ScriptFlags { return s.flags }

// SeesEveryKey reports whether the body names a command that reads every
// key (KEYS, SCAN, DBSIZE) in a string literal, as redis.call('keys', ...)
// does: the server then runs it with every key locked rather than only
// those in KEYS, so that such a call sees every key, as on Redis.
func (s *Script) SeesEveryKey() bool { return s.every }

// everyKey matches a string literal naming a command on every key.
var everyKey = regexp.MustCompile(`(?i)(["'])(keys|scan|dbsize)["']`)

// Run runs the body in the interpreter: the Runner a native handler
// replaces.
func (s *Script) Run(x *Exec) values.Reply {
	st := s.e.pool.get()
	r := st.run(s.proto, x)
	s.e.pool.put(st)
	return r
}

// scriptCache maps lower-case shas to scripts. An EVALSHA finds its
// script in snap without taking a lock (connections on several cores would
// otherwise contend for one); a script added since the snapshot was made
// waits in added, under mu, until the next snapshot takes it in. A cache
// of up to snapAtOnce scripts makes a new snapshot with every script it
// adds; a larger one when added holds half as many as snap, so that a
// client that EVALs new bodies without end costs a constant per script.
type scriptCache struct {
	e     *Engine
	snap  atomic.Pointer[map[string]*Script] // replaced, never changed
	mu    sync.Mutex
	added map[string]*Script
}

// snapAtOnce is the size up to which every script added is in the next
// EVALSHA's snapshot.
const snapAtOnce = 1024

func (c *scriptCache) init(e *Engine) {
	c.e = e
	c.snap.Store(&map[string]*Script{})
	c.added = map[string]*Script{}
}

// get returns the cached script sha (hex, any case).
func (c *scriptCache) get(sha []byte) (*Script, bool) {
	if len(sha) != 40 {
		return nil, false
	}
	var buf [40]byte
	key := lowerHex(append(buf[:0], sha...))
	if s, ok := (*c.snap.Load())[string(key)]; ok {
		return s, true
	}
	// Under mu, a snapshot made since the one above holds what added held.
	c.mu.Lock()
	s, ok := c.lookup(string(key))
	c.mu.Unlock()
	return s, ok
}

// lookup returns the script of sha (lower-case) under mu.
func (c *scriptCache) lookup(sha string) (*Script, bool) {
	if s, ok := (*c.snap.Load())[sha]; ok {
		return s, true
	}
	s, ok := c.added[sha]
	return s, ok
}

// load returns the script of body, compiling and caching it if needed.
func (c *scriptCache) load(body []byte) (*Script, *values.Reply) {
	sha := SHA(body)
	if s, ok := (*c.snap.Load())[sha]; ok {
		return s, nil
	}
	c.mu.Lock()
	s, ok := c.lookup(sha)
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, errReply := c.e.compile(sha, body)
	if errReply != nil {
		return nil, errReply
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.lookup(sha); ok {
		return old, nil
	}
	c.added[sha] = s
	if snap := *c.snap.Load(); len(snap)+len(c.added) <= snapAtOnce || 2*len(c.added) >= len(snap) {
		m := make(map[string]*Script, len(snap)+len(c.added))
		maps.Copy(m, snap)
		maps.Copy(m, c.added)
		c.snap.Store(&m)
		c.added = map[string]*Script{}
	}
	return s, nil
}

// flush forgets every script.
func (c *scriptCache) flush() {
	c.mu.Lock()
	c.snap.Store(&map[string]*Script{})
	c.added = map[string]*Script{}
	c.mu.Unlock()
}
