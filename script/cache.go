package script

import (
	"regexp"
	"sync"

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

// scriptCache maps lower-case shas to scripts.
type scriptCache struct {
	e  *Engine
	mu sync.RWMutex
	m  map[string]*Script
}

func (c *scriptCache) init(e *Engine) {
	c.e = e
	c.m = map[string]*Script{}
}

// get returns the cached script sha (hex, any case).
func (c *scriptCache) get(sha []byte) (*Script, bool) {
	if len(sha) != 40 {
		return nil, false
	}
	var buf [40]byte
	key := lowerHex(append(buf[:0], sha...))
	c.mu.RLock()
	s, ok := c.m[string(key)]
	c.mu.RUnlock()
	return s, ok
}

// load returns the script of body, compiling and caching it if needed.
func (c *scriptCache) load(body []byte) (*Script, *values.Reply) {
	sha := SHA(body)
	c.mu.RLock()
	s, ok := c.m[sha]
	c.mu.RUnlock()
	if ok {
		return s, nil
	}
	s, errReply := c.e.compile(sha, body)
	if errReply != nil {
		return nil, errReply
	}
	c.mu.Lock()
	if old, ok := c.m[sha]; ok {
		s = old
	} else {
		c.m[sha] = s
	}
	c.mu.Unlock()
	return s, nil
}

// flush forgets every script.
func (c *scriptCache) flush() {
	c.mu.Lock()
	c.m = map[string]*Script{}
	c.mu.Unlock()
}
