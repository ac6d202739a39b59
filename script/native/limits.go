package native

import (
	"math"

	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/values"
)

// Python limits 2.8 (as Debian ships it; Flask-Limiter runs on it):
// incr_expire (the fixed window), acquire_moving_window and
// moving_window (a list of timestamps, newest first) and clear_keys.

// Lines of the scripts' calls, for the errors Exec.Fail shapes.
const (
	incrExpireExpireLine = 6
	acquireLpushLine     = 14
	acquireLtrimLine     = 15
	acquireExpireLine    = 16
	clearDelLine         = 5
)

// maxAmount is the largest amount acquire_moving_window is run natively
// for (its LPUSH has one argument per unit).
const maxAmount = 16

// incrExpire is incr_expire.lua.
func incrExpire(x *script.Exec) values.Reply {
	if len(x.Keys) < 1 || len(x.Args) < 2 {
		return x.Interpret()
	}
	amount, ok := number(x.Args[1])
	if _, okE := integer(x.Args[0]); !ok || !okE {
		return x.Interpret()
	}
	b := script.AppendArg(x.Scratch(), amount)
	r := x.CallCommand(vIncrBy, x.Argv(cmdIncrBy, x.Keys[0], b))
	x.KeepScratch(b)
	if r.Kind != values.Int {
		return x.Interpret() // an error: nothing was written
	}
	if float64(r.Int) == amount {
		if e := x.CallCommand(vExpire, x.Argv(cmdExpire, x.Keys[0], x.Args[0])); e.Kind == values.Error {
			return x.Fail(e, incrExpireExpireLine)
		}
	}
	return intReply(r.Int)
}

// whole reports whether f is an integer that %.17g prints as one.
func whole(f float64) bool { return f == math.Trunc(f) && math.Abs(f) < 1e15 }

// acquireMovingWindow is acquire_moving_window.lua.
func acquireMovingWindow(x *script.Exec) values.Reply {
	if len(x.Keys) < 1 || len(x.Args) < 4 {
		return x.Interpret()
	}
	timestamp, ok1 := number(x.Args[0])
	limit, ok2 := number(x.Args[1])
	expiry, ok3 := number(x.Args[2])
	amount, ok4 := number(x.Args[3])
	if !ok1 || !ok2 || !ok3 || !ok4 || !whole(limit) || !whole(expiry) || !whole(amount) || amount < 1 || amount > maxAmount {
		return x.Interpret()
	}
	b := script.AppendArg(x.Scratch(), limit-amount)
	e := x.CallCommand(vLindex, x.Argv(cmdLindex, x.Keys[0], b))
	switch e.Kind {
	case values.Nil:
	case values.Bulk:
		f, ok := number(e.Str)
		if !ok {
			x.KeepScratch(b)
			return x.Interpret()
		}
		if f >= timestamp-expiry {
			x.KeepScratch(b)
			return x.BoolReply(false)
		}
	default:
		x.KeepScratch(b)
		return x.Interpret()
	}
	b = script.AppendArg(b[:0], timestamp)
	ts := len(b)
	b = script.AppendArg(b, limit-1)
	stop := len(b)
	b = script.AppendArg(b, expiry)
	var argv [2 + maxAmount][]byte
	argv[0], argv[1] = cmdLpush, x.Keys[0]
	n := int(amount)
	for i := range n {
		argv[2+i] = b[:ts:ts]
	}
	r := x.CallCommand(vLpush, x.Argv(argv[:2+n]...))
	if r.Kind == values.Error {
		x.KeepScratch(b)
		return x.Fail(r, acquireLpushLine)
	}
	if r := x.CallCommand(vLtrim, x.Argv(cmdLtrim, x.Keys[0], zero, b[ts:stop])); r.Kind == values.Error {
		x.KeepScratch(b)
		return x.Fail(r, acquireLtrimLine)
	}
	r = x.CallCommand(vExpire, x.Argv(cmdExpire, x.Keys[0], b[stop:]))
	x.KeepScratch(b)
	if r.Kind == values.Error {
		return x.Fail(r, acquireExpireLine)
	}
	return x.BoolReply(true)
}

// movingWindow is moving_window.lua: {oldest, count} of the entries at or
// after ARGV[1] among the first ARGV[2]+1, an empty array when there is
// none (a table whose first element is nil).
func movingWindow(x *script.Exec) values.Reply {
	if len(x.Keys) < 1 || len(x.Args) < 2 {
		return x.Interpret()
	}
	expiry, ok1 := number(x.Args[0])
	stop, ok2 := number(x.Args[1])
	if !ok1 || !ok2 || !whole(stop) {
		return x.Interpret()
	}
	b := script.AppendArg(x.Scratch(), stop)
	r := x.CallCommand(vLrange, x.Argv(cmdLrange, x.Keys[0], zero, b))
	x.KeepScratch(b)
	if r.Kind != values.Array {
		return x.Interpret()
	}
	a, oldest, found := int64(0), 0.0, false
	for _, it := range r.Elems {
		f, ok := number(it.Str)
		if it.Kind != values.Bulk || !ok {
			return x.Interpret()
		}
		if !(f >= expiry) {
			break
		}
		a++
		if !found {
			oldest, found = f, true
		}
	}
	if !found {
		return values.Reply{Kind: values.Array, Elems: []values.Reply{}}
	}
	return pair(x, numReply(oldest), intReply(a))
}

// clearKeys is clear_keys.lua: DEL, 5000 at a time, the keys KEYS[1]
// matches.
func clearKeys(x *script.Exec) values.Reply {
	if len(x.Keys) < 1 {
		return x.Interpret()
	}
	r := x.Call(x.Argv(cmdKeys, x.Keys[0]))
	if r.Kind != values.Array {
		return x.Interpret()
	}
	keys := make([][]byte, len(r.Elems))
	for i, k := range r.Elems {
		keys[i] = k.Str
	}
	var res int64
	argv := make([][]byte, 0, 1+min(len(keys), 5000))
	for i := 0; i < len(keys); i += 5000 {
		argv = append(argv[:0], cmdDel)
		argv = append(argv, keys[i:min(i+5000, len(keys))]...)
		d := x.Call(argv)
		if d.Kind != values.Int {
			if i == 0 {
				return x.Interpret() // nothing deleted yet
			}
			return x.Fail(d, clearDelLine)
		}
		res += d.Int
	}
	return intReply(res)
}
