package values

import (
	"bytes"
	"math"
	"strconv"
)

// Commands on keys of any type: DEL, UNLINK, EXISTS, TYPE, the EXPIRE
// family, TTL and PTTL, EXPIRETIME and PEXPIRETIME, PERSIST, RENAME and
// RENAMENX, KEYS, SCAN and DBSIZE. A key holding limiter state is a key
// like any other to DEL, UNLINK, EXISTS, TYPE, TTL and its kin, KEYS,
// SCAN and DBSIZE, and answers WRONGTYPE to those that would change its
// expiry or move it (its expiry belongs to its algorithm).

// DEL key [key ...] and UNLINK key [key ...]
func cmdDel(c call) Reply {
	n := int64(0)
	for _, key := range c.args[1:] {
		if c.ks.Delete(key) {
			n++
		}
	}
	return IntReply(n)
}

// EXISTS key [key ...]
func cmdExists(c call) Reply {
	n := int64(0)
	for _, key := range c.args[1:] {
		if c.ks.Lookup(key).Exists() {
			n++
		}
	}
	return IntReply(n)
}

var typeReplies = [...]Reply{
	0:          StatusReply("none"),
	KindString: StatusReply("string"),
	KindList:   StatusReply("list"),
	KindHash:   StatusReply("hash"),
	KindZSet:   StatusReply("zset"),
}

// TYPE key
func cmdType(c call) Reply {
	e := c.ks.Lookup(c.args[1])
	switch {
	case e.Other != "":
		return StatusReply(e.Other)
	case e.Value == nil:
		return typeReplies[0]
	}
	return typeReplies[e.Value.kind]
}

// Flags of the EXPIRE family.
const (
	expNX = 1 << iota
	expXX
	expGT
	expLT
)

// parseExpireFlags reads NX, XX, GT and LT as Redis's
// parseExtendedExpireArgumentsOrReply does.
func parseExpireFlags(args [][]byte) (int, Reply, bool) {
	flags := 0
	for _, a := range args {
		switch {
		case optIs(a, "nx"):
			flags |= expNX
		case optIs(a, "xx"):
			flags |= expXX
		case optIs(a, "gt"):
			flags |= expGT
		case optIs(a, "lt"):
			flags |= expLT
		default:
			return 0, ErrorReply("ERR Unsupported option " + string(cString(a))), false
		}
	}
	if flags&expNX != 0 && flags&(expXX|expGT|expLT) != 0 {
		return 0, ErrorReply("ERR NX and XX, GT or LT options at the same time are not compatible"), false
	}
	if flags&expGT != 0 && flags&expLT != 0 {
		return 0, ErrorReply("ERR GT and LT options at the same time are not compatible"), false
	}
	return flags, Reply{}, true
}

// EXPIRE key seconds [NX | XX | GT | LT]
func cmdExpire(c call) Reply { return c.expireGeneric(c.ms, true) }

// PEXPIRE key ms [NX | XX | GT | LT]
func cmdPExpire(c call) Reply { return c.expireGeneric(c.ms, false) }

// EXPIREAT key unix-seconds [NX | XX | GT | LT]
func cmdExpireAt(c call) Reply { return c.expireGeneric(0, true) }

// PEXPIREAT key unix-ms [NX | XX | GT | LT]
func cmdPExpireAt(c call) Reply { return c.expireGeneric(0, false) }

// expireGeneric is Redis's expireGenericCommand: base is added to the
// time given (now for the relative forms), in seconds if secs.
func (c call) expireGeneric(base int64, secs bool) Reply {
	flags, r, ok := parseExpireFlags(c.args[3:])
	if !ok {
		return r
	}
	when, ok := parseInt(c.args[2])
	if !ok {
		return replyNotInt
	}
	if secs {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			return expireError(c.cmd.Name)
		}
		when *= 1000
	}
	if when > math.MaxInt64-base {
		return expireError(c.cmd.Name)
	}
	when += base
	key := c.args[1]
	e := c.ks.Lookup(key)
	switch {
	case !e.Exists():
		return replyZero
	case e.Other != "":
		return replyWrongType
	case !expireAllowed(flags, when, whenMs(e)):
		return replyZero
	}
	c.setExpiry(key, e.Value, when)
	return replyOne
}

// expireAllowed applies NX, XX, GT and LT to a new expiry time when and
// the current one cur (-1 for none, which GT and LT take as infinite).
func expireAllowed(flags int, when, cur int64) bool {
	switch {
	case flags&expNX != 0 && cur != -1:
		return false
	case flags&expXX != 0 && cur == -1:
		return false
	case flags&expGT != 0 && (when <= cur || cur == -1):
		return false
	case flags&expLT != 0 && cur != -1 && when >= cur:
		return false
	}
	return true
}

// TTL key
func cmdTTL(c call) Reply { return c.ttlGeneric(false, false) }

// PTTL key
func cmdPTTL(c call) Reply { return c.ttlGeneric(true, false) }

// EXPIRETIME key
func cmdExpireTime(c call) Reply { return c.ttlGeneric(false, true) }

// PEXPIRETIME key
func cmdPExpireTime(c call) Reply { return c.ttlGeneric(true, true) }

// ttlGeneric answers the time left (or, abs, the expiry time) in ms or
// seconds: -2 for no key, -1 for no expiry. Seconds are rounded from ms,
// without overflow (Redis's compiler does that sum unsigned).
func (c call) ttlGeneric(ms, abs bool) Reply {
	e := c.ks.Lookup(c.args[1])
	if !e.Exists() {
		return IntReply(-2)
	}
	when := whenMs(e)
	switch {
	case when == -1:
		return IntReply(-1)
	case abs && ms:
		return IntReply(when)
	case abs:
		return IntReply(roundSeconds(when))
	}
	ttl := max(when-c.ms, 0)
	if ms {
		return IntReply(ttl)
	}
	return IntReply(roundSeconds(ttl))
}

// roundSeconds rounds ms >= 0 to seconds.
func roundSeconds(ms int64) int64 {
	return int64((uint64(ms) + 500) / 1000)
}

// PERSIST key
func cmdPersist(c call) Reply {
	e := c.ks.Lookup(c.args[1])
	switch {
	case !e.Exists():
		return replyZero
	case e.Other != "":
		return replyWrongType
	case e.Expires == 0:
		return replyZero
	}
	e.Value.far = 0
	c.ks.Put(c.args[1], e.Value, 0)
	return replyOne
}

// RENAME key newkey
func cmdRename(c call) Reply { return c.renameGeneric(false) }

// RENAMENX key newkey
func cmdRenameNX(c call) Reply { return c.renameGeneric(true) }

// renameGeneric moves key's value and expiry to newkey, replacing what
// newkey held (nx: unless it held something).
func (c call) renameGeneric(nx bool) Reply {
	src, dst := c.args[1], c.args[2]
	e := c.ks.Lookup(src)
	switch {
	case !e.Exists():
		return ErrorReply(msgNoKey)
	case e.Other != "":
		return replyWrongType
	case bytes.Equal(src, dst) && nx:
		return replyZero
	case bytes.Equal(src, dst):
		return replyOK
	case nx && c.ks.Lookup(dst).Exists():
		return replyZero
	}
	c.ks.Delete(src)
	c.ks.Put(dst, e.Value, e.Expires)
	if nx {
		return replyOne
	}
	return replyOK
}

// scanAll calls fn with every key live now.
func (c call) scanAll(fn func(key []byte, kind string)) {
	cursor := uint64(0)
	for {
		cursor = c.ks.Scan(cursor, 1024, func(key []byte, kind string) bool {
			fn(key, kind)
			return true
		})
		if cursor == 0 {
			return
		}
	}
}

// KEYS pattern
func cmdKeys(c call) Reply {
	pat := c.args[1]
	all := len(pat) == 1 && pat[0] == '*'
	out := []Reply{}
	c.scanAll(func(key []byte, _ string) {
		if all || globMatch(pat, key) {
			out = append(out, BulkReply(bytes.Clone(key)))
		}
	})
	return ArrayReply(out...)
}

// parseCursor reads a SCAN cursor as Redis does, with strtoul: a C
// string of decimal digits after an optional sign (a '-' negates it
// modulo 2^64), no leading space; the empty string is cursor 0.
func parseCursor(b []byte) (uint64, bool) {
	s := cString(b)
	if len(s) == 0 {
		return 0, true
	}
	neg := s[0] == '-'
	if s[0] == '+' || s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// scanOpts are SCAN's options.
type scanOpts struct {
	count   int
	pattern []byte // nil for every key
	typ     []byte // nil for every type
}

// parseScanOpts reads MATCH, COUNT and TYPE as Redis's
// scanGenericCommand does.
func parseScanOpts(args [][]byte) (scanOpts, Reply, bool) {
	o := scanOpts{count: 10}
	for i := 0; i < len(args); i += 2 {
		if len(args)-i < 2 {
			return o, replySyntax, false
		}
		switch a, v := args[i], args[i+1]; {
		case optIs(a, "count"):
			n, ok := parseInt(v)
			if !ok {
				return o, replyNotInt, false
			}
			if n < 1 {
				return o, replySyntax, false
			}
			o.count = int(min(n, math.MaxInt32))
		case optIs(a, "match"):
			o.pattern = v
			if len(v) == 1 && v[0] == '*' {
				o.pattern = nil
			}
		case optIs(a, "type"):
			o.typ = v
		default:
			return o, replySyntax, false
		}
	}
	return o, Reply{}, true
}

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
func cmdScan(c call) Reply {
	cursor, ok := parseCursor(c.args[1])
	if !ok {
		return ErrorReply(msgInvalidCursor)
	}
	o, r, ok := parseScanOpts(c.args[2:])
	if !ok {
		return r
	}
	keys := []Reply{}
	next := c.ks.Scan(cursor, o.count, func(key []byte, kind string) bool {
		if (o.pattern == nil || globMatch(o.pattern, key)) && (o.typ == nil || optIs(o.typ, lowerASCII(kind))) {
			keys = append(keys, BulkReply(bytes.Clone(key)))
		}
		return true
	})
	return ArrayReply(BulkReply(strconv.AppendUint(nil, next, 10)), ArrayReply(keys...))
}

// lowerASCII returns s in lower case (the type names are already).
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			return string(bytes.ToLower([]byte(s)))
		}
	}
	return s
}

// DBSIZE
func cmdDBSize(c call) Reply { return IntReply(int64(c.ks.Len())) }
