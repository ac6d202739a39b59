package values

// List commands: LPUSH, RPUSH, LPOP, RPOP, LRANGE, LINDEX, LTRIM, LLEN.

// LPUSH key element [element ...]
func cmdLPush(c call) Reply { return c.push(true) }

// RPUSH key element [element ...]
func cmdRPush(c call) Reply { return c.push(false) }

func (c call) push(front bool) Reply {
	key := c.args[1]
	e, ok := c.lookup(key, KindList)
	if !ok {
		return replyWrongType
	}
	v := e.Value
	if v == nil {
		v = newList()
	}
	for _, el := range c.args[2:] {
		if front {
			v.list.pushFront(el)
		} else {
			v.list.pushBack(el)
		}
	}
	c.put(key, e, v)
	return IntReply(int64(v.list.len()))
}

// LPOP key [count]
func cmdLPop(c call) Reply { return c.pop(true) }

// RPOP key [count]
func cmdRPop(c call) Reply { return c.pop(false) }

// pop is Redis's popGenericCommand: one element as a bulk string, or with
// a count up to that many as an array (null when there is no list).
func (c call) pop(front bool) Reply {
	if len(c.args) > 3 {
		return arityError(c.cmd.Name)
	}
	counted := len(c.args) == 3
	count := int64(0)
	if counted {
		n, ok := parseInt(c.args[2])
		if !ok || n < 0 {
			return replyPositive
		}
		count = n
	}
	key := c.args[1]
	e, ok := c.lookup(key, KindList)
	switch {
	case e.Value == nil && e.Other == "" && counted:
		return NilArrayReply()
	case e.Value == nil && e.Other == "":
		return replyNil
	case !ok:
		return replyWrongType
	case counted && count == 0:
		return replyEmpty
	}
	d := e.Value.list
	popOne := func() []byte {
		if front {
			return d.popFront()
		}
		return d.popBack()
	}
	var r Reply
	if !counted {
		r = BulkReply(popOne())
	} else {
		out := make([]Reply, min(count, int64(d.len())))
		for i := range out {
			out[i] = BulkReply(popOne())
		}
		r = ArrayReply(out...)
	}
	c.putOrDelete(key, e)
	return r
}

// putOrDelete stores e's changed value under key, or deletes the key if
// the value (a list, hash or sorted set) is now empty.
func (c call) putOrDelete(key []byte, e Entry) {
	if e.Value.Len() == 0 {
		c.ks.Delete(key)
		return
	}
	c.put(key, e, e.Value)
}

// rankRange clips start and end (negative counting from the end) to a
// sequence of n elements as Redis does, and reports whether the range is
// empty.
func rankRange(start, end int64, n int) (int, int, bool) {
	l := int64(n)
	if start < 0 {
		start += l
	}
	if end < 0 {
		end += l
	}
	start = max(start, 0)
	if start > end || start >= l {
		return 0, 0, false
	}
	end = min(end, l-1)
	return int(start), int(end), true
}

// parseRanks reads two integer arguments (LRANGE's, LTRIM's, ...).
func parseRanks(a, b []byte) (int64, int64, bool) {
	start, ok1 := parseInt(a)
	end, ok2 := parseInt(b)
	return start, end, ok1 && ok2
}

// LRANGE key start stop
func cmdLRange(c call) Reply {
	start, end, ok := parseRanks(c.args[2], c.args[3])
	if !ok {
		return replyNotInt
	}
	e, ok := c.lookup(c.args[1], KindList)
	switch {
	case !ok:
		return replyWrongType
	case e.Value == nil:
		return replyEmpty
	}
	d := e.Value.list
	s, t, ok := rankRange(start, end, d.len())
	if !ok {
		return replyEmpty
	}
	out := make([]Reply, t-s+1)
	for i := range out {
		out[i] = BulkReply(d.at(s + i))
	}
	return ArrayReply(out...)
}

// LINDEX key index (the key is looked up before the index is read)
func cmdLIndex(c call) Reply {
	e, ok := c.lookup(c.args[1], KindList)
	switch {
	case e.Value == nil && e.Other == "":
		return replyNil
	case !ok:
		return replyWrongType
	}
	i, ok := parseInt(c.args[2])
	if !ok {
		return replyNotInt
	}
	d := e.Value.list
	if i < 0 {
		i += int64(d.len())
	}
	if i < 0 || i >= int64(d.len()) {
		return replyNil
	}
	return BulkReply(d.at(int(i)))
}

// LTRIM key start stop
func cmdLTrim(c call) Reply {
	start, end, ok := parseRanks(c.args[2], c.args[3])
	if !ok {
		return replyNotInt
	}
	key := c.args[1]
	e, ok := c.lookup(key, KindList)
	switch {
	case !ok:
		return replyWrongType
	case e.Value == nil:
		return replyOK
	}
	d := e.Value.list
	if s, t, ok := rankRange(start, end, d.len()); ok {
		d.trim(s, t)
	} else {
		d.trim(0, -1)
	}
	c.putOrDelete(key, e)
	return replyOK
}

// LLEN key
func cmdLLen(c call) Reply {
	e, ok := c.lookup(c.args[1], KindList)
	switch {
	case !ok:
		return replyWrongType
	case e.Value == nil:
		return replyZero
	}
	return IntReply(int64(e.Value.list.len()))
}
