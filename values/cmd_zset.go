package values

import "math"

// Sorted set commands: ZADD, ZINCRBY, ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK,
// ZREVRANK, ZCOUNT, ZREMRANGEBYSCORE, ZREMRANGEBYRANK. The ZRANGE family
// is in zrange.go.

// zaddFlags are ZADD's options.
type zaddFlags struct {
	nx, xx, gt, lt, ch, incr bool
}

// parseZAddFlags reads the options before the first score, as Redis's
// zaddGenericCommand does (for ZINCRBY too), and returns them with the
// index of the first score.
func parseZAddFlags(args [][]byte, incr bool) (zaddFlags, int) {
	f := zaddFlags{incr: incr}
	i := 2
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case optIs(a, "nx"):
			f.nx = true
		case optIs(a, "xx"):
			f.xx = true
		case optIs(a, "ch"):
			f.ch = true
		case optIs(a, "incr"):
			f.incr = true
		case optIs(a, "gt"):
			f.gt = true
		case optIs(a, "lt"):
			f.lt = true
		default:
			return f, i
		}
	}
	return f, i
}

// check returns the error for options that exclude each other, or for
// INCR with more than one pair.
func (f zaddFlags) check(pairs int) (Reply, bool) {
	switch {
	case f.nx && f.xx:
		return ErrorReply("ERR XX and NX options at the same time are not compatible"), false
	case (f.gt && f.nx) || (f.lt && f.nx) || (f.gt && f.lt):
		return ErrorReply("ERR GT, LT, and/or NX options at the same time are not compatible"), false
	case f.incr && pairs > 1:
		return ErrorReply("ERR INCR option supports a single increment-element pair"), false
	}
	return Reply{}, true
}

// ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]
func cmdZAdd(c call) Reply { return c.zaddGeneric(false) }

// ZINCRBY key increment member
func cmdZIncrBy(c call) Reply { return c.zaddGeneric(true) }

// zaddGeneric is Redis's zaddGenericCommand: options, then every score
// parsed before anything changes, then the pairs applied in order.
func (c call) zaddGeneric(incr bool) Reply {
	f, first := parseZAddFlags(c.args, incr)
	n := len(c.args) - first
	if n == 0 || n%2 != 0 {
		return replySyntax
	}
	if r, ok := f.check(n / 2); !ok {
		return r
	}
	var small [8]float64
	scores := small[:0]
	for i := first; i < len(c.args); i += 2 {
		s, ok := parseFloat(c.args[i])
		if !ok {
			return replyNotFloat
		}
		scores = append(scores, s)
	}
	key := c.args[1]
	e, ok := c.lookup(key, KindZSet)
	if !ok {
		return replyWrongType
	}
	v := e.Value
	if v == nil && f.xx {
		return f.reply(c.resp, 0, 0, 0, 0)
	}
	if v == nil {
		v = newZSet()
	}
	var added, updated, processed int
	var score float64
	for j, s := range scores {
		out, newScore, ok := v.zset.addOne(c.args[first+2*j+1], s, f)
		if !ok {
			return ErrorReply(msgScoreNaN)
		}
		switch out {
		case zAdded:
			added++
		case zUpdated:
			updated++
		}
		if out != zNop {
			processed++
			score = newScore
		}
	}
	if added+updated > 0 {
		c.put(key, e, v)
	}
	return f.reply(c.resp, added, updated, processed, score)
}

// reply is ZADD's reply: with INCR the new score (null if nothing was
// done), else the members added (and with CH, changed).
func (f zaddFlags) reply(resp, added, updated, processed int, score float64) Reply {
	switch {
	case f.incr && processed > 0:
		return DoubleReply(resp, score)
	case f.incr:
		return replyNil
	case f.ch:
		return IntReply(int64(added + updated))
	}
	return IntReply(int64(added))
}

// What addOne did.
const (
	zNop = iota
	zAdded
	zUpdated
	zSame // processed, score unchanged
)

// addOne is Redis's zsetAdd: it adds member with score, or updates an
// existing member's score as the flags allow, and returns what it did and
// the resulting score; ok is false when INCR made the score NaN.
func (z *zset) addOne(member []byte, score float64, f zaddFlags) (out int, newScore float64, ok bool) {
	pos, cur, in := z.locate(member)
	if !in {
		if f.xx {
			return zNop, 0, true
		}
		z.add(member, score)
		return zAdded, score, true
	}
	if f.nx {
		return zNop, 0, true
	}
	if f.incr {
		if score += cur; math.IsNaN(score) {
			return zNop, 0, false
		}
	}
	if (f.lt && score >= cur) || (f.gt && score <= cur) {
		return zNop, 0, true
	}
	if score == cur {
		return zSame, score, true
	}
	z.update(pos, score)
	return zUpdated, score, true
}

// zsetRead returns key's sorted set for a read: nil (ok) when absent.
func (c call) zsetRead(key []byte) (*zset, bool) {
	e, ok := c.lookup(key, KindZSet)
	if !ok || e.Value == nil {
		return nil, ok
	}
	return e.Value.zset, true
}

// ZREM key member [member ...]
func cmdZRem(c call) Reply {
	key := c.args[1]
	e, ok := c.lookup(key, KindZSet)
	switch {
	case !ok:
		return replyWrongType
	case e.Value == nil:
		return replyZero
	}
	z := e.Value.zset
	n := int64(0)
	for _, m := range c.args[2:] {
		if z.remove(m) {
			n++
			if z.len() == 0 {
				break
			}
		}
	}
	if n > 0 {
		c.putOrDelete(key, e)
	}
	return IntReply(n)
}

// ZCARD key
func cmdZCard(c call) Reply {
	z, ok := c.zsetRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case z == nil:
		return replyZero
	}
	return IntReply(int64(z.len()))
}

// ZSCORE key member
func cmdZScore(c call) Reply {
	z, ok := c.zsetRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case z == nil:
		return replyNil
	}
	if score, ok := z.score(c.args[2]); ok {
		return DoubleReply(c.resp, score)
	}
	return replyNil
}

// ZMSCORE key member [member ...]
func cmdZMScore(c call) Reply {
	z, ok := c.zsetRead(c.args[1])
	if !ok {
		return replyWrongType
	}
	out := make([]Reply, len(c.args)-2)
	for i, m := range c.args[2:] {
		out[i] = replyNil
		if z == nil {
			continue
		}
		if score, ok := z.score(m); ok {
			out[i] = DoubleReply(c.resp, score)
		}
	}
	return ArrayReply(out...)
}

// ZRANK key member
func cmdZRank(c call) Reply { return c.zrank(false) }

// ZREVRANK key member
func cmdZRevRank(c call) Reply { return c.zrank(true) }

func (c call) zrank(rev bool) Reply {
	z, ok := c.zsetRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case z == nil:
		return replyNil
	}
	r := z.rank(c.args[2])
	if r == 0 {
		return replyNil
	}
	if rev {
		return IntReply(int64(z.len() - r))
	}
	return IntReply(int64(r - 1))
}

// parseScoreRange reads min and max as zslParseRange does: a float, an
// infinity, or either after '(' for an open end.
func parseScoreRange(min, max []byte) (scoreRange, bool) {
	var r scoreRange
	var ok1, ok2 bool
	r.min, r.minex, ok1 = parseScoreBound(min)
	r.max, r.maxex, ok2 = parseScoreBound(max)
	return r, ok1 && ok2
}

func parseScoreBound(b []byte) (float64, bool, bool) {
	if len(b) > 0 && b[0] == '(' {
		f, ok := parseRangeFloat(b[1:])
		return f, true, ok
	}
	f, ok := parseRangeFloat(b)
	return f, false, ok
}

// ZCOUNT key min max
func cmdZCount(c call) Reply {
	r, ok := parseScoreRange(c.args[2], c.args[3])
	if !ok {
		return replyMinMax
	}
	z, ok := c.zsetRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case z == nil:
		return replyZero
	}
	return IntReply(int64(z.count(&r)))
}

// ZREMRANGEBYSCORE key min max
func cmdZRemRangeByScore(c call) Reply {
	r, ok := parseScoreRange(c.args[2], c.args[3])
	if !ok {
		return replyMinMax
	}
	return c.zremRange(func(z *zset) int { return z.removeRange(&r) })
}

// ZREMRANGEBYRANK key start stop
func cmdZRemRangeByRank(c call) Reply {
	start, end, ok := parseRanks(c.args[2], c.args[3])
	if !ok {
		return replyNotInt
	}
	return c.zremRange(func(z *zset) int {
		s, t, ok := rankRange(start, end, z.len())
		if !ok {
			return 0
		}
		return z.removeRanks(s+1, t+1)
	})
}

// zremRange runs remove on key's sorted set and answers how many members
// it removed.
func (c call) zremRange(remove func(*zset) int) Reply {
	key := c.args[1]
	e, ok := c.lookup(key, KindZSet)
	switch {
	case !ok:
		return replyWrongType
	case e.Value == nil:
		return replyZero
	}
	n := remove(e.Value.zset)
	if n > 0 {
		c.putOrDelete(key, e)
	}
	return IntReply(int64(n))
}
