package native

import (
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/values"
)

// ulule/limiter v3: incr (INCRBY the count, PEXPIRE on the first hit,
// {count, ttl}) and peek ({value, pttl} or {0, 0}).

// Lines of incr's calls, for the errors Exec.Fail shapes.
const (
	ululePexpireLine = 8
	ululePttlLine    = 12
)

// pair returns the reply {a, b}, in memory the Caller lends.
func pair(x *script.Exec, a, b values.Reply) values.Reply {
	elems := x.Elems(2)
	elems[0], elems[1] = a, b
	return values.Reply{Kind: values.Array, Elems: elems}
}

// ululeIncr is the incr script.
func ululeIncr(x *script.Exec) values.Reply {
	if len(x.Keys) < 1 || len(x.Args) < 2 {
		return x.Interpret()
	}
	count, ok := integer(x.Args[0])
	ttl, ok2 := number(x.Args[1])
	if !ok || !ok2 {
		return x.Interpret()
	}
	if _, isInt := integer(x.Args[1]); ttl > 0 && !isInt {
		return x.Interpret() // PEXPIRE would refuse it after INCRBY wrote
	}
	r := x.CallCommand(vIncrBy, x.Argv(cmdIncrBy, x.Keys[0], x.Args[0]))
	if r.Kind != values.Int {
		return x.Interpret() // an error: nothing was written
	}
	ret := r.Int
	if float64(ret) == float64(count) {
		if ttl > 0 {
			if e := x.CallCommand(vPexpire, x.Argv(cmdPexpire, x.Keys[0], x.Args[1])); e.Kind == values.Error {
				return x.Fail(e, ululePexpireLine)
			}
		}
		return pair(x, intReply(ret), numReply(ttl))
	}
	t := x.CallCommand(vPttl, x.Argv(cmdPttl, x.Keys[0]))
	if t.Kind == values.Error {
		return x.Fail(t, ululePttlLine)
	}
	return pair(x, intReply(ret), t)
}

// ululePeek is the peek script.
func ululePeek(x *script.Exec) values.Reply {
	if len(x.Keys) < 1 {
		return x.Interpret()
	}
	r := x.CallCommand(vGet, x.Argv(cmdGet, x.Keys[0]))
	var v float64
	switch r.Kind {
	case values.Nil:
		return pair(x, intReply(0), intReply(0))
	case values.Bulk:
		var ok bool
		if v, ok = number(r.Str); !ok {
			return x.Interpret()
		}
	default:
		return x.Interpret()
	}
	t := x.CallCommand(vPttl, x.Argv(cmdPttl, x.Keys[0]))
	if t.Kind != values.Int {
		return x.Interpret()
	}
	return pair(x, numReply(v), t)
}
