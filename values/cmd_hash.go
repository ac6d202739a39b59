package values

// Hash commands: HSET, HMSET, HSETNX, HGET, HMGET, HGETALL, HKEYS, HVALS,
// HDEL, HEXISTS, HLEN, HSTRLEN, HINCRBY, HINCRBYFLOAT.

// hashFor returns key's hash, creating an empty one (not yet stored) if
// the key is absent.
func (c call) hashFor(key []byte) (Entry, *Value, bool) {
	e, ok := c.lookup(key, KindHash)
	if !ok {
		return e, nil, false
	}
	if e.Value == nil {
		return e, newHash(), true
	}
	return e, e.Value, true
}

// HSET key field value [field value ...]
func cmdHSet(c call) Reply {
	n, r, ok := c.hsetGeneric()
	if !ok {
		return r
	}
	return IntReply(n)
}

// HMSET key field value [field value ...]
func cmdHMSet(c call) Reply {
	if _, r, ok := c.hsetGeneric(); !ok {
		return r
	}
	return replyOK
}

// hsetGeneric sets the field-value pairs and returns how many fields are
// new.
func (c call) hsetGeneric() (int64, Reply, bool) {
	if len(c.args)%2 == 1 {
		return 0, arityError(c.cmd.Name), false
	}
	key := c.args[1]
	e, v, ok := c.hashFor(key)
	if !ok {
		return 0, replyWrongType, false
	}
	for _, a := range c.args[2:] {
		v.hash.noteLength(len(a))
	}
	n := int64(0)
	for i := 2; i < len(c.args); i += 2 {
		if v.hash.set(c.args[i], c.args[i+1]) {
			n++
		}
	}
	c.put(key, e, v)
	return n, Reply{}, true
}

// HSETNX key field value
func cmdHSetNX(c call) Reply {
	key := c.args[1]
	e, v, ok := c.hashFor(key)
	if !ok {
		return replyWrongType
	}
	if v.hash.find(c.args[2]) >= 0 {
		return replyZero
	}
	v.hash.set(c.args[2], c.args[3])
	c.put(key, e, v)
	return replyOne
}

// hashRead returns key's hash for a read: nil (ok) when absent.
func (c call) hashRead(key []byte) (*hashVal, bool) {
	e, ok := c.lookup(key, KindHash)
	if !ok || e.Value == nil {
		return nil, ok
	}
	return e.Value.hash, true
}

// HGET key field
func cmdHGet(c call) Reply {
	h, ok := c.hashRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case h == nil:
		return replyNil
	}
	if i := h.find(c.args[2]); i >= 0 {
		return BulkReply(h.ents[i].val.bytes())
	}
	return replyNil
}

// HMGET key field [field ...]
func cmdHMGet(c call) Reply {
	h, ok := c.hashRead(c.args[1])
	if !ok {
		return replyWrongType
	}
	out := make([]Reply, len(c.args)-2)
	for j, f := range c.args[2:] {
		out[j] = replyNil
		if h == nil {
			continue
		}
		if i := h.find(f); i >= 0 {
			out[j] = BulkReply(h.ents[i].val.bytes())
		}
	}
	return ArrayReply(out...)
}

// HGETALL key: a map in RESP3, field, value, ... in RESP2.
func cmdHGetAll(c call) Reply {
	r := c.hashList(true, true)
	if r.Kind == Array && c.resp >= 3 {
		r.Kind = Map
	}
	return r
}

// HKEYS key
func cmdHKeys(c call) Reply { return c.hashList(true, false) }

// HVALS key
func cmdHVals(c call) Reply { return c.hashList(false, true) }

// hashList lists the fields, the values or both, in the hash's order.
func (c call) hashList(fields, vals bool) Reply {
	h, ok := c.hashRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case h == nil:
		return replyEmpty
	}
	out := make([]Reply, 0, 2*h.len())
	var buf []byte
	for i := range h.ents {
		if fields {
			start := len(buf)
			buf = append(buf, h.ents[i].field...)
			out = append(out, BulkReply(buf[start:len(buf):len(buf)]))
		}
		if vals {
			out = append(out, BulkReply(h.ents[i].val.bytes()))
		}
	}
	return ArrayReply(out...)
}

// HDEL key field [field ...]
func cmdHDel(c call) Reply {
	key := c.args[1]
	e, ok := c.lookup(key, KindHash)
	switch {
	case !ok:
		return replyWrongType
	case e.Value == nil:
		return replyZero
	}
	n := int64(0)
	for _, f := range c.args[2:] {
		if e.Value.hash.del(f) {
			n++
			if e.Value.hash.len() == 0 {
				break
			}
		}
	}
	if n > 0 {
		c.putOrDelete(key, e)
	}
	return IntReply(n)
}

// HEXISTS key field
func cmdHExists(c call) Reply {
	h, ok := c.hashRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case h != nil && h.find(c.args[2]) >= 0:
		return replyOne
	}
	return replyZero
}

// HLEN key
func cmdHLen(c call) Reply {
	h, ok := c.hashRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case h == nil:
		return replyZero
	}
	return IntReply(int64(h.len()))
}

// HSTRLEN key field
func cmdHStrLen(c call) Reply {
	h, ok := c.hashRead(c.args[1])
	switch {
	case !ok:
		return replyWrongType
	case h == nil:
		return replyZero
	}
	if i := h.find(c.args[2]); i >= 0 {
		return IntReply(int64(h.ents[i].val.length()))
	}
	return replyZero
}

// HINCRBY key field increment
func cmdHIncrBy(c call) Reply {
	by, ok := parseInt(c.args[3])
	if !ok {
		return replyNotInt
	}
	key, field := c.args[1], c.args[2]
	e, v, ok := c.hashFor(key)
	if !ok {
		return replyWrongType
	}
	cur := int64(0)
	if i := v.hash.find(field); i >= 0 {
		if cur, ok = v.hash.ents[i].val.asInt(); !ok {
			return ErrorReply(msgHashNotInt)
		}
	}
	if addOverflows(cur, by) {
		return replyOverflow
	}
	v.hash.setInt(field, cur+by)
	c.put(key, e, v)
	return IntReply(cur + by)
}

// HINCRBYFLOAT key field increment
func cmdHIncrByFloat(c call) Reply {
	by, ok := parseLongDouble(c.args[3])
	switch {
	case !ok:
		return replyNotFloat
	case by.inf != 0:
		return ErrorReply(msgIncrNaNOrInf)
	}
	key, field := c.args[1], c.args[2]
	e, v, ok := c.hashFor(key)
	if !ok {
		return replyWrongType
	}
	cur := ldFromInt(0)
	if i := v.hash.find(field); i >= 0 {
		if cur, ok = v.hash.ents[i].val.asLongDouble(); !ok {
			return ErrorReply(msgHashNotFloat)
		}
	}
	if !cur.add(by) {
		return ErrorReply(msgNaNOrInf)
	}
	b := cur.appendHuman(nil)
	v.hash.setOwned(field, b)
	c.put(key, e, v)
	return BulkReply(b[:len(b):len(b)])
}
