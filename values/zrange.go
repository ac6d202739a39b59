package values

import "bytes"

// The ZRANGE family: ZRANGE (by rank, BYSCORE or BYLEX, REV, LIMIT,
// WITHSCORES), ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZREVRANGE, ZRANGEBYLEX
// and ZREVRANGEBYLEX, all Redis's zrangeGenericCommand.

// How a ZRANGE ranges, and in which direction.
const (
	zAuto = iota // not given (yet): ZRANGE's options may set it
	zByRank
	zByScore
	zByLex
	zForward
	zReverse
)

// zrangeOpts are a range command's options.
type zrangeOpts struct {
	by, dir        int
	withScores     bool
	offset, limit  int64
	minArg, maxArg []byte
}

// parseZRangeOpts reads the options after key min max.
func parseZRangeOpts(args [][]byte, by, dir int) (zrangeOpts, Reply, bool) {
	o := zrangeOpts{by: by, dir: dir, limit: -1, minArg: args[2], maxArg: args[3]}
	for j := 4; j < len(args); j++ {
		a := args[j]
		switch {
		case optIs(a, "withscores"):
			o.withScores = true
		case optIs(a, "limit") && len(args)-j-1 >= 2:
			off, ok1 := parseInt(args[j+1])
			if !ok1 {
				return o, replyNotInt, false
			}
			lim, ok2 := parseInt(args[j+2])
			if !ok2 {
				return o, replyNotInt, false
			}
			o.offset, o.limit = off, lim
			j += 2
		case o.dir == zAuto && optIs(a, "rev"):
			o.dir = zReverse
		case o.by == zAuto && optIs(a, "bylex"):
			o.by = zByLex
		case o.by == zAuto && optIs(a, "byscore"):
			o.by = zByScore
		default:
			return o, replySyntax, false
		}
	}
	if o.dir == zAuto {
		o.dir = zForward
	}
	if o.by == zAuto {
		o.by = zByRank
	}
	switch {
	case o.limit != -1 && o.by == zByRank:
		return o, ErrorReply(msgLimitRank), false
	case o.withScores && o.by == zByLex:
		return o, ErrorReply(msgScoresLex), false
	}
	if o.dir == zReverse && o.by != zByRank {
		o.minArg, o.maxArg = o.maxArg, o.minArg // given as max min
	}
	return o, Reply{}, true
}

// ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
func cmdZRange(c call) Reply { return c.zrangeGeneric(zAuto, zAuto) }

// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
func cmdZRangeByScore(c call) Reply { return c.zrangeGeneric(zByScore, zForward) }

// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
func cmdZRevRangeByScore(c call) Reply { return c.zrangeGeneric(zByScore, zReverse) }

// ZREVRANGE key start stop [WITHSCORES]
func cmdZRevRange(c call) Reply { return c.zrangeGeneric(zByRank, zReverse) }

// ZRANGEBYLEX key min max [LIMIT offset count]
func cmdZRangeByLex(c call) Reply { return c.zrangeGeneric(zByLex, zForward) }

// ZREVRANGEBYLEX key max min [LIMIT offset count]
func cmdZRevRangeByLex(c call) Reply { return c.zrangeGeneric(zByLex, zReverse) }

// zrangeGeneric parses the options, then the range, then looks the key
// up, in Redis's order (so that an error in the arguments wins over
// WRONGTYPE).
func (c call) zrangeGeneric(by, dir int) Reply {
	o, r, ok := parseZRangeOpts(c.args, by, dir)
	if !ok {
		return r
	}
	var start, end int64
	var sr scoreRange
	var lr lexRange
	switch o.by {
	case zByRank:
		if start, end, ok = parseRanks(o.minArg, o.maxArg); !ok {
			return replyNotInt
		}
	case zByScore:
		if sr, ok = parseScoreRange(o.minArg, o.maxArg); !ok {
			return replyMinMax
		}
	default:
		if lr, ok = parseLexRange(o.minArg, o.maxArg); !ok {
			return ErrorReply(msgMinMaxLex)
		}
	}
	z, ok := c.zsetRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case z == nil:
		return replyEmpty
	}
	var ents []zent
	switch o.by {
	case zByRank:
		ents = z.byRanks(start, end, o.dir == zReverse)
	case zByScore:
		ents = z.byScores(&sr, o)
	default:
		ents = z.byLex(&lr, o)
	}
	return rangeReply(ents, o.withScores, c.resp)
}

// byRanks returns the members of ranks start to end (0-based, negative
// from the end, counted from the top when rev).
func (z *zset) byRanks(start, end int64, rev bool) []zent {
	s, t, ok := rankRange(start, end, z.len())
	if !ok {
		return nil
	}
	if z.lp && !rev {
		return z.ents[s : t+1]
	}
	ents := make([]zent, 0, t-s+1)
	if rev {
		for c := z.cursor(z.len() - s); len(ents) < cap(ents); c.step(true) {
			ents = append(ents, c.ent())
		}
		return ents
	}
	for c := z.cursor(s + 1); len(ents) < cap(ents); c.step(false) {
		ents = append(ents, c.ent())
	}
	return ents
}

// zcursor is a position in a set, by 1-based rank (0 or len+1 past its
// ends), with the skiplist form's node of that rank.
type zcursor struct {
	z    *zset
	rank int
	x    *znode
}

// cursor returns a cursor at rank.
func (z *zset) cursor(rank int) zcursor {
	c := zcursor{z: z, rank: rank}
	if !z.lp && c.ok() {
		c.x = z.sl.byRank(rank)
	}
	return c
}

func (c *zcursor) ok() bool { return c.rank >= 1 && c.rank <= c.z.len() }

func (c *zcursor) ent() zent {
	if c.z.lp {
		return c.z.ents[c.rank-1]
	}
	return zent{c.x.member, c.x.score}
}

// step moves to the next member (the previous one when rev).
func (c *zcursor) step(rev bool) {
	if rev {
		c.rank--
	} else {
		c.rank++
	}
	if c.x != nil {
		if rev {
			c.x = c.x.backward
		} else {
			c.x = c.x.lv[0].next
		}
	}
}

// walk collects members from c on (backward if rev), first skipping
// offset of them, at most limit (negative for all) and while in says so.
func walk(c zcursor, rev bool, offset, limit int64, in func(zent) bool) []zent {
	if offset < 0 || !c.ok() {
		return nil // Redis skips "offset" nodes counting down: to the end
	}
	for ; c.ok() && offset > 0; offset-- {
		c.step(rev)
	}
	var ents []zent
	for ; c.ok() && limit != 0; c.step(rev) {
		e := c.ent()
		if !in(e) {
			break
		}
		ents = append(ents, e)
		limit--
	}
	return ents
}

// byScores returns the members in r, in o's direction, offset and limit.
func (z *zset) byScores(r *scoreRange, o zrangeOpts) []zent {
	if o.offset > 0 && o.offset >= int64(z.len()) {
		return nil
	}
	if o.dir == zReverse {
		return walk(z.lastIn(r), true, o.offset, o.limit, func(e zent) bool { return r.aboveMin(e.score) })
	}
	return walk(z.firstIn(r), false, o.offset, o.limit, func(e zent) bool { return r.belowMax(e.score) })
}

// lexBound is one end of a lex range: a member, or (inf -1) "-" below
// every member, or (inf 1) "+" above every member.
type lexBound struct {
	b   []byte
	inf int
}

// lexRange is a range of members, each end open or closed.
type lexRange struct {
	min, max     lexBound
	minex, maxex bool
}

// parseLexRange reads min and max as zslParseLexRange does.
func parseLexRange(min, max []byte) (lexRange, bool) {
	var r lexRange
	var ok1, ok2 bool
	r.min, r.minex, ok1 = parseLexBound(min)
	r.max, r.maxex, ok2 = parseLexBound(max)
	return r, ok1 && ok2
}

// parseLexBound reads "+", "-", "(member" or "[member".
func parseLexBound(a []byte) (lexBound, bool, bool) {
	if len(a) == 0 {
		return lexBound{}, false, false
	}
	switch a[0] {
	case '+', '-':
		if len(a) > 1 && a[1] != 0 {
			return lexBound{}, false, false
		}
		if a[0] == '+' {
			return lexBound{inf: 1}, true, true
		}
		return lexBound{inf: -1}, true, true
	case '(':
		return lexBound{b: a[1:]}, true, true
	case '[':
		return lexBound{b: a[1:]}, false, true
	}
	return lexBound{}, false, false
}

// cmpLex compares a member with a bound.
func cmpLex(m string, b lexBound) int {
	if b.inf != 0 {
		return -b.inf
	}
	switch s := string(b.b); {
	case m < s:
		return -1
	case m > s:
		return 1
	}
	return 0
}

// cmpBounds compares two bounds as sdscmplex does ("-" and "+" equal
// themselves).
func cmpBounds(a, b lexBound) int {
	switch {
	case a.inf != 0 && a.inf == b.inf:
		return 0
	case a.inf == -1 || b.inf == 1:
		return -1
	case a.inf == 1 || b.inf == -1:
		return 1
	}
	return bytes.Compare(a.b, b.b)
}

func (r *lexRange) aboveMin(m string) bool {
	if r.minex {
		return cmpLex(m, r.min) > 0
	}
	return cmpLex(m, r.min) >= 0
}

func (r *lexRange) belowMax(m string) bool {
	if r.maxex {
		return cmpLex(m, r.max) < 0
	}
	return cmpLex(m, r.max) <= 0
}

// byLex returns the members in r, in o's direction, offset and limit.
// Ranges by lex are meant for members of one score, where the members are
// in lex order and the edges of the range are found in O(log n). Over
// members of different scores Redis leaves the answer undefined: here the
// members are scanned in order for the first one past the range's edge,
// as Redis scans a listpack (its answer for a larger set depends on its
// skiplist's random shape). Either way the answer is deterministic.
func (z *zset) byLex(r *lexRange, o zrangeOpts) []zent {
	if o.offset > 0 && o.offset >= int64(z.len()) {
		return nil
	}
	cmp := cmpBounds(r.min, r.max)
	if cmp > 0 || (cmp == 0 && (r.minex || r.maxex)) || z.len() == 0 ||
		!r.aboveMin(z.at(z.len()).member) || !r.belowMax(z.at(1).member) {
		return nil
	}
	above := func(e zent) bool { return r.aboveMin(e.member) }
	below := func(e zent) bool { return r.belowMax(e.member) }
	if o.dir == zReverse {
		c := z.lexEdge(below, true)
		if !c.ok() || !above(c.ent()) {
			return nil
		}
		return walk(c, true, o.offset, o.limit, above)
	}
	c := z.lexEdge(above, false)
	if !c.ok() || !below(c.ent()) {
		return nil
	}
	return walk(c, false, o.offset, o.limit, below)
}

// lexEdge returns a cursor at the first member for which ok holds (the
// last, from the top, when rev); its rank is 0 if there is none.
func (z *zset) lexEdge(ok func(zent) bool, rev bool) zcursor {
	if !z.lp && z.sl.first().score == z.sl.tail.score { // one score: lex order, found in O(log n)
		node := func(x *znode) zent { return zent{x.member, x.score} }
		if rev {
			if x := z.sl.lastWhile(func(x *znode) bool { return ok(node(x)) }); x != nil {
				return zcursor{z: z, rank: z.sl.rank(x), x: x}
			}
			return zcursor{z: z}
		}
		if x, rank := z.sl.firstFrom(func(x *znode) bool { return !ok(node(x)) }); x != nil {
			return zcursor{z: z, rank: rank, x: x}
		}
		return zcursor{z: z}
	}
	c := z.cursor(1)
	if rev {
		c = z.cursor(z.len())
	}
	for ; c.ok(); c.step(rev) {
		if ok(c.ent()) {
			return c
		}
	}
	return zcursor{z: z}
}

// rangeReply lists nodes' members, each followed by its score with
// withScores: flat in RESP2, as [member, score] pairs in RESP3. The
// members' bytes are copied into one buffer.
func rangeReply(nodes []zent, withScores bool, resp int) Reply {
	if len(nodes) == 0 {
		return replyEmpty
	}
	size := 0
	for _, x := range nodes {
		size += len(x.member)
	}
	buf := make([]byte, 0, size)
	member := func(x zent) Reply {
		start := len(buf)
		buf = append(buf, x.member...)
		return BulkReply(buf[start:len(buf):len(buf)])
	}
	if !withScores {
		out := make([]Reply, len(nodes))
		for i, x := range nodes {
			out[i] = member(x)
		}
		return ArrayReply(out...)
	}
	flat := make([]Reply, 2*len(nodes))
	var scores []byte
	for i, x := range nodes {
		flat[2*i] = member(x)
		if resp >= 3 {
			flat[2*i+1] = Reply{Kind: Double, Float: x.score}
			continue
		}
		start := len(scores)
		scores = formatDouble(scores, x.score)
		flat[2*i+1] = BulkReply(scores[start:len(scores):len(scores)])
	}
	if resp < 3 {
		return ArrayReply(flat...)
	}
	pairs := make([]Reply, len(nodes))
	for i := range pairs {
		pairs[i] = ArrayReply(flat[2*i : 2*i+2 : 2*i+2]...)
	}
	return ArrayReply(pairs...)
}
