package redisfuzz

import "strconv"

// templates are the commands Gen generates, with their weights.
var templates = []template{
	// strings
	{"get", 6, func(g *Gen) []string { return one(g.skey()) }},
	{"set", 8, func(g *Gen) []string {
		return join(one(g.skey(), g.str()), g.opts("NX", "XX", "GET"), g.expiryOpt(), g.opts("NX", "GET"))
	}},
	{"setex", 1, func(g *Gen) []string { return one(g.skey(), g.seconds(), g.str()) }},
	{"psetex", 1, func(g *Gen) []string { return one(g.skey(), g.millis(), g.str()) }},
	{"setnx", 2, func(g *Gen) []string { return one(g.skey(), g.str()) }},
	{"getdel", 1, func(g *Gen) []string { return one(g.skey()) }},
	{"getex", 2, func(g *Gen) []string {
		if g.r.IntN(5) == 0 {
			return join(one(g.skey()), g.opts("PERSIST"), g.expiryOpt())
		}
		return join(one(g.skey()), g.expiryOpt())
	}},
	{"getset", 1, func(g *Gen) []string { return one(g.skey(), g.str()) }},
	{"mget", 2, func(g *Gen) []string { return g.keys(1) }},
	{"mset", 1, func(g *Gen) []string { return one(g.skey(), g.str(), g.skey(), g.str()) }},
	{"append", 2, func(g *Gen) []string { return one(g.skey(), g.str()) }},
	{"strlen", 1, func(g *Gen) []string { return one(g.skey()) }},
	{"incr", 4, func(g *Gen) []string { return one(g.skey()) }},
	{"decr", 2, func(g *Gen) []string { return one(g.skey()) }},
	{"incrby", 5, func(g *Gen) []string { return one(g.skey(), g.intArg()) }},
	{"decrby", 2, func(g *Gen) []string { return one(g.skey(), g.intArg()) }},
	{"incrbyfloat", 5, func(g *Gen) []string { return one(g.skey(), g.floatArg()) }},
	// keys
	{"del", 3, func(g *Gen) []string { return g.keys(1) }},
	{"unlink", 1, func(g *Gen) []string { return g.keys(1) }},
	{"exists", 2, func(g *Gen) []string { return g.keys(1) }},
	{"type", 2, func(g *Gen) []string { return one(g.anyKey()) }},
	{"expire", 3, func(g *Gen) []string { return join(one(g.anyKey(), g.seconds()), g.expireOpts()) }},
	{"pexpire", 3, func(g *Gen) []string { return join(one(g.anyKey(), g.millis()), g.expireOpts()) }},
	{"expireat", 2, func(g *Gen) []string {
		return join(one(g.anyKey(), g.unixSeconds()), g.opts("NX", "XX", "GT", "LT", "FOO"))
	}},
	{"pexpireat", 2, func(g *Gen) []string { return join(one(g.anyKey(), g.unixMillis()), g.expireOpts()) }},
	{"ttl", 3, func(g *Gen) []string { return one(g.anyKey()) }},
	{"pttl", 3, func(g *Gen) []string { return one(g.anyKey()) }},
	{"expiretime", 1, func(g *Gen) []string { return one(g.anyKey()) }},
	{"pexpiretime", 1, func(g *Gen) []string { return one(g.anyKey()) }},
	{"persist", 2, func(g *Gen) []string { return one(g.anyKey()) }},
	{"rename", 1, func(g *Gen) []string { return one(g.anyKey(), g.anyKey()) }},
	{"renamenx", 1, func(g *Gen) []string { return one(g.anyKey(), g.anyKey()) }},
	{"keys", 1, func(g *Gen) []string { return one(g.pattern()) }},
	{"scan", 1, func(g *Gen) []string {
		// Only cursors that are 0 (or invalid): another cursor means
		// something of its own to each implementation.
		out := one(g.oneOf("0", "0", "0", "", "-0", "+0", "00", " 0", "x", "18446744073709551616"))
		if g.r.IntN(2) == 0 {
			out = append(out, "MATCH", g.pattern())
		}
		if g.r.IntN(3) == 0 {
			out = append(out, "COUNT", g.oneOf("1", "2", "100", "0", "-1", "x"))
		}
		if g.r.IntN(3) == 0 {
			// Not "none": Redis 7.0 lists under it the expired keys it has
			// not reclaimed yet, a quirk of its lazy expiry.
			out = append(out, "TYPE", g.oneOf("string", "list", "hash", "zset", "ZSET", "set"))
		}
		return out
	}},
	{"dbsize", 1, func(g *Gen) []string { return nil }},
	// lists
	{"lpush", 4, func(g *Gen) []string { return join(one(g.lkey(), g.str()), g.opts("x", "y")) }},
	{"rpush", 4, func(g *Gen) []string { return join(one(g.lkey(), g.str()), g.opts("x", "y")) }},
	{"rpush", 1, func(g *Gen) []string { return join(one(g.lkey()), g.bulk(g.str, g.str, 100)) }},
	{"lpop", 2, func(g *Gen) []string { return g.popArgs() }},
	{"rpop", 2, func(g *Gen) []string { return g.popArgs() }},
	{"lrange", 3, func(g *Gen) []string { return one(g.lkey(), g.rank(), g.rank()) }},
	{"lindex", 2, func(g *Gen) []string { return one(g.lkey(), g.rank()) }},
	{"ltrim", 2, func(g *Gen) []string { return one(g.lkey(), g.rank(), g.rank()) }},
	{"llen", 2, func(g *Gen) []string { return one(g.lkey()) }},
	// hashes
	{"hset", 5, func(g *Gen) []string { return join(one(g.hkey(), g.field(), g.str()), g.pairs(g.field, g.str)) }},
	{"hset", 1, func(g *Gen) []string { return join(one(g.hkey()), g.bulk(g.bulkName("g", 700), g.str, 600)) }},
	{"hmset", 1, func(g *Gen) []string { return join(one(g.hkey(), g.field(), g.str()), g.pairs(g.field, g.str)) }},
	{"hsetnx", 2, func(g *Gen) []string { return one(g.hkey(), g.field(), g.str()) }},
	{"hget", 4, func(g *Gen) []string { return one(g.hkey(), g.field()) }},
	{"hmget", 2, func(g *Gen) []string { return one(g.hkey(), g.field(), g.field()) }},
	{"hgetall", 3, func(g *Gen) []string { return one(g.hkey()) }},
	{"hkeys", 1, func(g *Gen) []string { return one(g.hkey()) }},
	{"hvals", 1, func(g *Gen) []string { return one(g.hkey()) }},
	{"hdel", 2, func(g *Gen) []string { return one(g.hkey(), g.field(), g.field()) }},
	{"hexists", 1, func(g *Gen) []string { return one(g.hkey(), g.field()) }},
	{"hlen", 1, func(g *Gen) []string { return one(g.hkey()) }},
	{"hstrlen", 1, func(g *Gen) []string { return one(g.hkey(), g.field()) }},
	{"hincrby", 4, func(g *Gen) []string { return one(g.hkey(), g.field(), g.intArg()) }},
	{"hincrbyfloat", 3, func(g *Gen) []string { return one(g.hkey(), g.field(), g.floatArg()) }},
	// sorted sets
	{"zadd", 12, func(g *Gen) []string { return g.zaddArgs() }},
	{"zadd", 1, func(g *Gen) []string { return join(one(g.zkey()), g.bulk(g.score, g.bulkName("b", 300), 200)) }},
	{"zincrby", 2, func(g *Gen) []string { return one(g.zkey(), g.score(), g.member()) }},
	{"zrem", 2, func(g *Gen) []string { return one(g.zkey(), g.member(), g.member()) }},
	{"zcard", 2, func(g *Gen) []string { return one(g.zkey()) }},
	{"zscore", 3, func(g *Gen) []string { return one(g.zkey(), g.member()) }},
	{"zmscore", 1, func(g *Gen) []string { return one(g.zkey(), g.member(), g.member()) }},
	{"zrank", 1, func(g *Gen) []string { return one(g.zkey(), g.member()) }},
	{"zrevrank", 1, func(g *Gen) []string { return one(g.zkey(), g.member()) }},
	{"zcount", 2, func(g *Gen) []string { return one(g.zkey(), g.bound(), g.bound()) }},
	{"zrange", 6, func(g *Gen) []string { return g.zrangeArgs() }},
	{"zrangebyscore", 3, func(g *Gen) []string {
		return join(one(g.zkey(), g.bound(), g.bound()), g.opts("WITHSCORES"), g.limit(), g.opts("REV"))
	}},
	{"zrevrangebyscore", 1, func(g *Gen) []string {
		return join(one(g.zkey(), g.bound(), g.bound()), g.opts("WITHSCORES"), g.limit())
	}},
	{"zrevrange", 1, func(g *Gen) []string { return join(one(g.zkey(), g.rank(), g.rank()), g.opts("WITHSCORES")) }},
	{"zrangebylex", 1, func(g *Gen) []string { return join(one(g.zkey(), g.lexBound(), g.lexBound()), g.limit()) }},
	{"zrevrangebylex", 1, func(g *Gen) []string { return join(one(g.zkey(), g.lexBound(), g.lexBound()), g.limit()) }},
	{"zremrangebyscore", 3, func(g *Gen) []string { return one(g.zkey(), g.bound(), g.bound()) }},
	{"zremrangebyrank", 2, func(g *Gen) []string { return one(g.zkey(), g.rank(), g.rank()) }},
}

// zaddArgs returns ZADD's arguments: mostly no option or compatible
// ones, now and then ones that exclude each other.
func (g *Gen) zaddArgs() []string {
	var opts []string
	switch g.r.IntN(10) {
	case 0:
		opts = g.opts("NX", "XX", "GT", "LT", "CH", "INCR")
	case 1, 2:
		opts = g.opts(g.oneOf("NX", "XX"), "CH")
	case 3, 4:
		opts = g.opts(g.oneOf("GT", "LT"), "XX", "CH")
	case 5:
		return join(one(g.zkey()), g.opts("NX", "XX", "GT", "LT", "CH"), one("INCR", g.score(), g.member()))
	}
	return join(one(g.zkey()), opts, one(g.score(), g.member()), g.pairs(g.score, g.member))
}

func (g *Gen) popArgs() []string {
	if g.r.IntN(2) == 0 {
		return one(g.zkey())
	}
	return one(g.zkey(), g.oneOf("0", "1", "2", "5", "-1", "x", g.smallInt(0, 4)))
}

// bulk returns up to max pairs from a and b: large values.
func (g *Gen) bulk(a, b func() string, max int) []string {
	var out []string
	for range 1 + g.r.IntN(max) {
		out = append(out, a(), b())
	}
	return out
}

// bulkName returns a generator of names prefix0 to prefix(n-1).
func (g *Gen) bulkName(prefix string, n int) func() string {
	return func() string { return prefix + strconv.Itoa(g.r.IntN(n)) }
}

// pairs returns up to two more pairs from a and b.
func (g *Gen) pairs(a, b func() string) []string {
	var out []string
	for range g.r.IntN(3) {
		out = append(out, a(), b())
	}
	return out
}

// expireOpts returns EXPIRE's options: mostly one, now and then several.
func (g *Gen) expireOpts() []string {
	if g.r.IntN(6) == 0 {
		return g.opts("NX", "XX", "GT", "LT")
	}
	if g.r.IntN(2) == 0 {
		return nil
	}
	return one(g.oneOf("NX", "XX", "GT", "LT"))
}

// limit returns a LIMIT option, sometimes.
func (g *Gen) limit() []string {
	if g.r.IntN(3) != 0 {
		return nil
	}
	return one("LIMIT", g.smallInt(-1, 4), g.oneOf("-1", "0", "1", "2", "5", "x"))
}

func (g *Gen) zrangeArgs() []string {
	switch g.r.IntN(3) {
	case 0:
		return join(one(g.zkey(), g.bound(), g.bound(), "BYSCORE"), g.opts("REV", "WITHSCORES"), g.limit())
	case 1:
		return join(one(g.zkey(), g.lexBound(), g.lexBound(), "BYLEX"), g.opts("REV"), g.limit())
	}
	return join(one(g.zkey(), g.rank(), g.rank()), g.opts("REV", "WITHSCORES", "BYSCORE"), g.limit())
}
