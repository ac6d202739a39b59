package native

import (
	"math"

	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/values"
)

// go-redis/redis_rate v10: allowN and allowAtMost, GCRA over a string
// holding the theoretical arrival time (seconds since 2017-01-01, as a
// float the script formats with %.17g), set with EX the ceiling of the
// time to reset, and answering {allowed, remaining, tostring(retry_after),
// tostring(reset_after)}.

// jan2017 is the script's epoch, seconds since 1970.
const jan2017 = 1483228800

// Lines of the scripts' SET calls, for the errors Exec.Fail shapes.
const (
	allowNSetLine      = 55
	allowAtMostSetLine = 61
)

// rateReply returns {allowed, remaining, tostring(retry),
// tostring(reset)}, in memory the Caller lends (Exec.Elems, Exec.Bytes).
func rateReply(x *script.Exec, allowed, remaining, retry, reset float64) values.Reply {
	b := script.AppendNumber(x.Bytes(2*maxNumberLen), retry)
	n := len(b)
	b = script.AppendNumber(b, reset)
	elems := x.Elems(4)
	elems[0] = numReply(allowed)
	elems[1] = numReply(remaining)
	elems[2] = values.Reply{Kind: values.Bulk, Str: b[:n:n]}
	elems[3] = values.Reply{Kind: values.Bulk, Str: b[n:]}
	return values.Reply{Kind: values.Array, Elems: elems}
}

// maxNumberLen is the longest tostring of a number: "-1.2345678901234e-308".
const maxNumberLen = 24

// rateArgs are the scripts' arguments and state before they decide:
// emission interval, burst offset, cost, now and tat. ok is false when
// the handler must leave the run to the interpreter (arguments that are
// not plain numbers, a key that is not a number string, an error).
func rateArgs(x *script.Exec) (ei, burstOffset, cost, now, tat float64, ok bool) {
	if len(x.Keys) < 1 || len(x.Args) < 4 {
		return
	}
	burst, ok1 := number(x.Args[0])
	rate, ok2 := number(x.Args[1])
	period, ok3 := number(x.Args[2])
	cost, ok4 := number(x.Args[3])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	ei = period / rate
	burstOffset = float64(ei * burst)
	sec, usec, okT := x.Time()
	if !okT {
		return
	}
	now = (float64(sec) - jan2017) + float64(usec)/1000000
	r := x.CallCommand(vGet, x.Argv(cmdGet, x.Keys[0]))
	switch r.Kind {
	case values.Nil:
		tat = now
	case values.Bulk:
		if tat, ok = number(r.Str); !ok {
			return
		}
	default:
		return 0, 0, 0, 0, 0, false
	}
	return ei, burstOffset, cost, now, luaMax(tat, now), true
}

// setTAT stores new_tat with EX math.ceil(resetAfter), as the scripts do.
func setTAT(x *script.Exec, newTAT, resetAfter float64) values.Reply {
	b := script.AppendArg(x.Scratch(), newTAT)
	n := len(b)
	b = script.AppendArg(b, math.Ceil(resetAfter))
	r := x.CallCommand(vSet, x.Argv(cmdSet, x.Keys[0], b[:n], cmdEX, b[n:]))
	x.KeepScratch(b)
	return r
}

// allowN is redis_rate's allowN.
func allowN(x *script.Exec) values.Reply {
	ei, burstOffset, cost, now, tat, ok := rateArgs(x)
	if !ok {
		return x.Interpret()
	}
	increment := float64(ei * cost)
	newTAT := tat + increment
	allowAt := newTAT - burstOffset
	diff := now - allowAt
	remaining := diff / ei
	if remaining < 0 {
		return rateReply(x, 0, 0, diff*-1, tat-now)
	}
	resetAfter := newTAT - now
	if resetAfter > 0 {
		if s := setTAT(x, newTAT, resetAfter); s.Kind == values.Error {
			return x.Fail(s, allowNSetLine)
		}
	}
	return rateReply(x, cost, remaining, -1, resetAfter)
}

// allowAtMost is redis_rate's allowAtMost.
func allowAtMost(x *script.Exec) values.Reply {
	ei, burstOffset, cost, now, tat, ok := rateArgs(x)
	if !ok {
		return x.Interpret()
	}
	diff := now - (tat - burstOffset)
	remaining := diff / ei
	if remaining < 1 {
		return rateReply(x, 0, 0, ei-diff, tat-now)
	}
	if remaining < cost {
		cost = remaining
		remaining = 0
	} else {
		remaining = remaining - cost
	}
	increment := float64(ei * cost)
	newTAT := tat + increment
	resetAfter := newTAT - now
	if resetAfter > 0 {
		if s := setTAT(x, newTAT, resetAfter); s.Kind == values.Error {
			return x.Fail(s, allowAtMostSetLine)
		}
	}
	return rateReply(x, cost, remaining, -1, resetAfter)
}
