package values

import "math"

// String commands: GET, SET and its variants, GETDEL, GETEX, GETSET,
// MGET, MSET, APPEND, STRLEN and the INCR family.

// maxStringLen is Redis's proto-max-bulk-len, the largest string APPEND
// may build.
const maxStringLen = 512 << 20

// GET key
func cmdGet(c call) Reply {
	e, ok := c.lookup(c.args[1], KindString)
	if !ok {
		return replyWrongType
	}
	if e.Value == nil {
		return replyNil
	}
	return BulkReply(e.Value.str.bytes())
}

// Expiry options of SET and GETEX.
const (
	optEX = 1 + iota
	optPX
	optEXAT
	optPXAT
)

// setOpts are SET's (or GETEX's) options.
type setOpts struct {
	nx, xx, get, keepTTL, persist bool
	exp                           int    // optEX...optPXAT, 0 for none
	expArg                        []byte // the expiry's argument
}

// parseSetOpts reads the options from args as Redis's
// parseExtendedStringArgumentsOrReply does, for SET (set) or GETEX. An
// option may repeat, but not be combined with one it excludes.
func parseSetOpts(args [][]byte, set bool) (setOpts, bool) {
	var o setOpts
	for j := 0; j < len(args); j++ {
		a, next := args[j], j+1 < len(args)
		noExp := func(allowed int) bool { return o.exp == 0 || o.exp == allowed }
		switch {
		case set && optIs(a, "nx") && !o.xx:
			o.nx = true
		case set && optIs(a, "xx") && !o.nx:
			o.xx = true
		case set && optIs(a, "get"):
			o.get = true
		case set && optIs(a, "keepttl") && o.exp == 0:
			o.keepTTL = true
		case !set && optIs(a, "persist") && o.exp == 0:
			o.persist = true
		case next && !o.keepTTL && !o.persist && expOpt(a) != 0 && noExp(expOpt(a)):
			o.exp, o.expArg = expOpt(a), args[j+1]
			j++
		default:
			return o, false
		}
	}
	return o, true
}

// expOpt returns which expiry option a is, 0 for none.
func expOpt(a []byte) int {
	switch {
	case optIs(a, "ex"):
		return optEX
	case optIs(a, "px"):
		return optPX
	case optIs(a, "exat"):
		return optEXAT
	case optIs(a, "pxat"):
		return optPXAT
	}
	return 0
}

// expireMs reads an expiry argument as Redis's getExpireMillisecondsOrReply:
// a positive integer of seconds (EX, EXAT) or ms (PX, PXAT), relative to
// now for EX and PX; it returns Redis's expiry time in ms.
func (c call) expireMs(arg []byte, opt int) (int64, Reply, bool) {
	ms, ok := parseInt(arg)
	if !ok {
		return 0, replyNotInt, false
	}
	secs := opt == optEX || opt == optEXAT
	if ms <= 0 || (secs && ms > math.MaxInt64/1000) {
		return 0, expireError(c.cmd.Name), false
	}
	if secs {
		ms *= 1000
	}
	if opt == optEX || opt == optPX {
		ms += c.ms // wraps on overflow, caught below as Redis does
	}
	if ms <= 0 {
		return 0, expireError(c.cmd.Name), false
	}
	return ms, Reply{}, true
}

// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
func cmdSet(c call) Reply {
	o, ok := parseSetOpts(c.args[3:], true)
	if !ok {
		return replySyntax
	}
	return c.setGeneric(o, c.args[1], c.args[2], replyOK, replyNil)
}

// SETNX key value
func cmdSetNX(c call) Reply {
	return c.setGeneric(setOpts{nx: true}, c.args[1], c.args[2], replyOne, replyZero)
}

// SETEX key seconds value
func cmdSetEX(c call) Reply {
	return c.setGeneric(setOpts{exp: optEX, expArg: c.args[2]}, c.args[1], c.args[3], replyOK, replyNil)
}

// PSETEX key ms value
func cmdPSetEX(c call) Reply {
	return c.setGeneric(setOpts{exp: optPX, expArg: c.args[2]}, c.args[1], c.args[3], replyOK, replyNil)
}

// setGeneric is Redis's setGenericCommand: the expiry is checked first,
// then GET's old value, then NX and XX; ok is the reply of a SET done,
// abort that of one NX or XX refused (GET's value replaces both).
func (c call) setGeneric(o setOpts, key, val []byte, ok, abort Reply) Reply {
	var when int64
	if o.exp != 0 {
		var r Reply
		var good bool
		if when, r, good = c.expireMs(o.expArg, o.exp); !good {
			return r
		}
	}
	e := c.ks.Lookup(key)
	if e.Other != "" || (o.get && e.Value != nil && e.Value.kind != KindString) {
		return replyWrongType
	}
	if o.get {
		ok, abort = replyNil, replyNil
		if e.Value != nil {
			ok = BulkReply(e.Value.str.bytes())
			abort = ok
		}
	}
	if (o.nx && e.Exists()) || (o.xx && !e.Exists()) {
		return abort
	}
	exp := int64(0)
	v := e.Value // a string's Value is reused: its old bytes stay as they are
	if v == nil || v.kind != KindString {
		v = &Value{kind: KindString}
	}
	if o.keepTTL {
		exp = keepExpiry(e, v)
	}
	v.str.setBytes(val)
	switch {
	case o.exp != 0:
		c.setExpiry(key, v, when)
	case o.keepTTL:
		c.ks.Put(key, v, exp)
	default:
		v.far = 0
		c.ks.Put(key, v, 0)
	}
	return ok
}

// GETSET key value
func cmdGetSet(c call) Reply {
	return c.setGeneric(setOpts{get: true}, c.args[1], c.args[2], replyOK, replyNil)
}

// GETDEL key
func cmdGetDel(c call) Reply {
	e, ok := c.lookup(c.args[1], KindString)
	if !ok {
		return replyWrongType
	}
	if e.Value == nil {
		return replyNil
	}
	c.ks.Delete(c.args[1])
	return BulkReply(e.Value.str.bytes())
}

// GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]
func cmdGetEX(c call) Reply {
	o, ok := parseSetOpts(c.args[2:], false)
	if !ok {
		return replySyntax
	}
	key := c.args[1]
	e, ok := c.lookup(key, KindString)
	switch {
	case e.Value == nil && e.Other == "":
		return replyNil
	case !ok:
		return replyWrongType
	}
	var when int64
	if o.exp != 0 {
		var r Reply
		if when, r, ok = c.expireMs(o.expArg, o.exp); !ok {
			return r
		}
	}
	reply := BulkReply(e.Value.str.bytes())
	switch {
	case o.exp != 0:
		c.setExpiry(key, e.Value, when)
	case o.persist && e.Expires != 0:
		e.Value.far = 0
		c.ks.Put(key, e.Value, 0)
	}
	return reply
}

// MGET key [key ...]
func cmdMGet(c call) Reply {
	out := make([]Reply, len(c.args)-1)
	for i, key := range c.args[1:] {
		out[i] = replyNil
		if e := c.ks.Lookup(key); e.Value != nil && e.Value.kind == KindString {
			out[i] = BulkReply(e.Value.str.bytes())
		}
	}
	return ArrayReply(out...)
}

// MSET key value [key value ...]
func cmdMSet(c call) Reply {
	if len(c.args)%2 == 0 {
		return arityError(c.cmd.Name)
	}
	for i := 1; i < len(c.args); i += 2 {
		if c.ks.Lookup(c.args[i]).Other != "" {
			return replyWrongType
		}
	}
	for i := 1; i < len(c.args); i += 2 {
		c.ks.Put(c.args[i], NewString(c.args[i+1]), 0)
	}
	return replyOK
}

// APPEND key value
func cmdAppend(c call) Reply {
	key := c.args[1]
	e, ok := c.lookup(key, KindString)
	if !ok {
		return replyWrongType
	}
	if e.Value == nil {
		v := NewString(c.args[2])
		c.ks.Put(key, v, 0)
		return IntReply(int64(len(c.args[2])))
	}
	s := &e.Value.str
	if s.length()+len(c.args[2]) > maxStringLen {
		return ErrorReply(msgStringSize)
	}
	if s.isInt {
		s.setOwned(s.appendTo(nil))
	}
	// Bytes past the old length are not shared with any reply (replies
	// are capped at their length), so appending in place is safe.
	s.b = append(s.b, c.args[2]...)
	c.put(key, e, e.Value)
	return IntReply(int64(len(s.b)))
}

// STRLEN key
func cmdStrLen(c call) Reply {
	e, ok := c.lookup(c.args[1], KindString)
	switch {
	case !ok:
		return replyWrongType
	case e.Value == nil:
		return replyZero
	}
	return IntReply(int64(e.Value.str.length()))
}

// INCR key
func cmdIncr(c call) Reply { return c.incrBy(c.args[1], 1) }

// DECR key
func cmdDecr(c call) Reply { return c.incrBy(c.args[1], -1) }

// INCRBY key increment
func cmdIncrBy(c call) Reply {
	n, ok := parseInt(c.args[2])
	if !ok {
		return replyNotInt
	}
	return c.incrBy(c.args[1], n)
}

// DECRBY key decrement
func cmdDecrBy(c call) Reply {
	n, ok := parseInt(c.args[2])
	switch {
	case !ok:
		return replyNotInt
	case n == math.MinInt64:
		return ErrorReply(msgDecrOverflow)
	}
	return c.incrBy(c.args[1], -n)
}

// addOverflows reports whether a+b overflows an int64.
func addOverflows(a, b int64) bool {
	return (b < 0 && a < 0 && b < math.MinInt64-a) || (b > 0 && a > 0 && b > math.MaxInt64-a)
}

// incrBy adds by to the integer held at key (0 if absent), keeping its
// expiry.
func (c call) incrBy(key []byte, by int64) Reply {
	e, ok := c.lookup(key, KindString)
	if !ok {
		return replyWrongType
	}
	var cur int64
	if e.Value != nil {
		if cur, ok = e.Value.str.asInt(); !ok {
			return replyNotInt
		}
	}
	if addOverflows(cur, by) {
		return replyOverflow
	}
	v := e.Value
	if v == nil {
		v = &Value{kind: KindString}
	}
	v.str.setInt(cur + by)
	c.put(key, e, v)
	return IntReply(cur + by)
}

// INCRBYFLOAT key increment
func cmdIncrByFloat(c call) Reply {
	key := c.args[1]
	e, ok := c.lookup(key, KindString)
	if !ok {
		return replyWrongType
	}
	cur := ldFromInt(0)
	if e.Value != nil {
		if cur, ok = e.Value.str.asLongDouble(); !ok {
			return replyNotFloat
		}
	}
	incr, ok := parseLongDouble(c.args[2])
	if !ok {
		return replyNotFloat
	}
	if !cur.add(incr) {
		return ErrorReply(msgNaNOrInf)
	}
	b := cur.appendHuman(nil)
	v := e.Value
	if v == nil {
		v = &Value{kind: KindString}
	}
	v.str.setOwned(b)
	c.put(key, e, v)
	return BulkReply(b[:len(b):len(b)])
}
