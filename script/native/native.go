package native

import (
	"math"
	"strconv"
	"unsafe"

	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/values"
)

// Script is one recognised script: where it comes from, its sha1 and the
// handler that runs it.
type Script struct {
	// Library is the library's name ("go-redis/redis_rate"), Version the
	// version whose text has SHA.
	Library, Version string
	// Name names the script within the library ("allowN").
	Name string
	// SHA is the lower-case hex sha1 of the script's text.
	SHA string
	// Runner is the native handler.
	Runner script.Runner
}

// Label is how INFO, metrics and Engine.Stats name the handler:
// "<library>.<script>" ("redis_rate.allowN", "ulule_limiter.incr",
// "limits.incr_expire").
func (s Script) Label() string { return s.Runner.(named).name }

// named gives a Runner the name Engine.Stats counts it by.
type named struct {
	name string
	run  func(x *script.Exec) values.Reply
}

func (n named) Name() string                    { return n.name }
func (n named) Run(x *script.Exec) values.Reply { return n.run(x) }
func handler(library, name string, run func(x *script.Exec) values.Reply) script.Runner {
	return named{name: library + "." + name, run: run}
}

// Libraries' names and versions.
const (
	libRedisRate = "go-redis/redis_rate"
	verRedisRate = "v10.0.1"
	libUlule     = "ulule/limiter"
	verUlule     = "v3.11.2"
	libLimits    = "limits (Python)"
	verLimits    = "2.8.0 (Debian python3-limits 2.8.0-1)"
)

// scripts is the registry.
var scripts = []Script{
	{libRedisRate, verRedisRate, "allowN", "f52a5b566060d79fd321d695df55bc918339c4aa", handler("redis_rate", "allowN", allowN)},
	{libRedisRate, verRedisRate, "allowAtMost", "054143318f521948424aa25df61d7f7ba835a9d7", handler("redis_rate", "allowAtMost", allowAtMost)},
	{libUlule, verUlule, "incr", "f74233f556d3f99c50b61169cf8aa8d5deb63fb2", handler("ulule_limiter", "incr", ululeIncr)},
	{libUlule, verUlule, "peek", "566f5c6a17e5fddb9a10bf389f754edd0d899c61", handler("ulule_limiter", "peek", ululePeek)},
	{libLimits, verLimits, "incr_expire", "628bd136a573a06b346879695681af12ccef300f", handler("limits", "incr_expire", incrExpire)},
	{libLimits, verLimits, "acquire_moving_window", "d19f37c18768a509dbf1310a257bfc35be65609f", handler("limits", "acquire_moving_window", acquireMovingWindow)},
	{libLimits, verLimits, "moving_window", "3136f0028c572d2959b5cdc5ec15b287fab6a9ff", handler("limits", "moving_window", movingWindow)},
	{libLimits, verLimits, "clear_keys", "f2994557f1daca13bfef97c2a31ca4b174e031ca", handler("limits", "clear_keys", clearKeys)},
}

// Scripts returns the recognised scripts. The caller must not change them.
func Scripts() []Script { return scripts }

// Register registers every handler with e.
func Register(e *script.Engine) {
	for _, s := range scripts {
		e.Register(s.SHA, s.Runner)
	}
}

// Commands the handlers call, named as the scripts name them (case is not
// seen by anything but the journal, which records the command's effect).
var (
	cmdGet     = []byte("GET")
	cmdSet     = []byte("SET")
	cmdEX      = []byte("EX")
	cmdIncrBy  = []byte("incrby")
	cmdPexpire = []byte("pexpire")
	cmdPttl    = []byte("pttl")
	cmdExpire  = []byte("expire")
	cmdLindex  = []byte("lindex")
	cmdLpush   = []byte("lpush")
	cmdLtrim   = []byte("ltrim")
	cmdLrange  = []byte("lrange")
	cmdKeys    = []byte("keys")
	cmdDel     = []byte("del")
	zero       = []byte("0")
)

// The commands the handlers call, looked up once: Exec.CallCommand runs
// them without finding them by name on every call.
var (
	vGet     = mustLookup(cmdGet)
	vSet     = mustLookup(cmdSet)
	vIncrBy  = mustLookup(cmdIncrBy)
	vPexpire = mustLookup(cmdPexpire)
	vPttl    = mustLookup(cmdPttl)
	vExpire  = mustLookup(cmdExpire)
	vLindex  = mustLookup(cmdLindex)
	vLpush   = mustLookup(cmdLpush)
	vLtrim   = mustLookup(cmdLtrim)
	vLrange  = mustLookup(cmdLrange)
)

// mustLookup returns the command of package values named name.
func mustLookup(name []byte) *values.Command {
	c := values.Lookup(name)
	if c == nil {
		panic("native: no command " + string(name))
	}
	return c
}

// number reads b as tonumber (and Lua's string arithmetic) reads a plain
// decimal number: [+-]digits[.digits][e[+-]digits]. Anything else (space,
// hex, inf, nan, a negative zero, an empty string, more than 64 bytes)
// reports false, for
// the handler to leave to the interpreter; on what it accepts, it agrees
// with strtod (correct rounding).
func number(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 64 {
		return 0, false
	}
	i := 0
	if b[0] == '+' || b[0] == '-' {
		i++
	}
	digits, intOnly, n := 0, true, uint64(0)
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		digits++
		n = n*10 + uint64(b[i]-'0')
	}
	if i < len(b) && b[i] == '.' {
		intOnly = false
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		intOnly = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		e := 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			e++
		}
		if e == 0 {
			return 0, false
		}
	}
	if i != len(b) {
		return 0, false
	}
	if intOnly && digits <= 15 {
		if b[0] == '-' {
			return -float64(n), n != 0
		}
		return float64(n), true
	}
	f, err := strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
	if err != nil || f == 0 && math.Signbit(f) {
		return 0, false // -0: gopher-lua's coercion reads it as 0, strtod as -0
	}
	return f, true
}

// integer reads b as Redis reads an integer argument (string2ll): "0" or
// an optional minus and digits without a leading zero, in int64's range.
func integer(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg, i := b[0] == '-', 0
	if neg {
		i++
	}
	if i >= len(b) || b[i] < '1' || b[i] > '9' {
		return 0, false
	}
	var u uint64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), true //nolint:gosec // two's complement of a magnitude up to 2^63
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// luaMax is math.max(a, b) of Lua 5.1: b when b > a, else a.
func luaMax(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}

func intReply(n int64) values.Reply { return values.Reply{Kind: values.Int, Int: n} }

// numReply is the reply of a script that returns the Lua number f.
func numReply(f float64) values.Reply { return intReply(script.ToInteger(f)) }
