package script

import (
	"encoding/binary"
	"math"

	lua "github.com/yuin/gopher-lua"
)

// cmsgpack is lua-cmsgpack 0.4.0 as Redis bundles it: integers in the
// smallest encoding, floats as float 32 when that loses nothing, tables
// as arrays when their keys are exactly 1..n, nesting past 16 levels
// encoded as nil.

const msgpackMaxNesting = 16

func (st *state) openCmsgpack() *lua.LTable {
	L := st.L
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(st.mpPack))
	t.RawSetString("unpack", L.NewFunction(func(L *lua.LState) int { return st.mpUnpack(L, 0, 0) }))
	t.RawSetString("unpack_one", L.NewFunction(func(L *lua.LState) int {
		offset := int64(toInteger(optNumber(L, 2, "unpack_one", 0)))
		L.SetTop(1)
		return st.mpUnpack(L, 1, offset)
	}))
	t.RawSetString("unpack_limit", L.NewFunction(func(L *lua.LState) int {
		limit := toInteger(checkNumber(L, 2, "unpack_limit"))
		offset := toInteger(optNumber(L, 3, "unpack_limit", 0))
		L.SetTop(1)
		return st.mpUnpack(L, limit, offset)
	}))
	t.RawSetString("_NAME", lua.LString("cmsgpack"))
	t.RawSetString("_VERSION", lua.LString("lua-cmsgpack 0.4.0"))
	t.RawSetString("_COPYRIGHT", lua.LString("Copyright (C) 2012, Salvatore Sanfilippo"))
	t.RawSetString("_DESCRIPTION", lua.LString("MessagePack C implementation for Lua"))
	return t
}

func (st *state) mpPack(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		argError(L, 0, "pack", "MessagePack pack needs input.")
	}
	var b []byte
	for i := 1; i <= n; i++ {
		b = st.mpEncode(L, b, L.Get(i), 0)
	}
	L.Push(lua.LString(b))
	return 1
}

// mpEncode is mp_encode_lua_type.
func (st *state) mpEncode(L *lua.LState, b []byte, v lua.LValue, level int) []byte {
	st.raiseMemory(L, len(b))
	switch v := v.(type) {
	case lua.LString:
		st.raiseMemory(L, len(b)+len(v))
		return mpBytes(b, string(v))
	case lua.LBool:
		if v {
			return append(b, 0xc3)
		}
		return append(b, 0xc2)
	case lua.LNumber:
		f := float64(v)
		if !math.IsInf(f, 0) && float64(toInteger(f)) == f {
			return mpInt(b, toInteger(f))
		}
		if float64(float32(f)) == f {
			return binary.BigEndian.AppendUint32(append(b, 0xca), math.Float32bits(float32(f)))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
	case *lua.LTable:
		if level == msgpackMaxNesting {
			return append(b, 0xc0)
		}
		return st.mpTable(L, b, v, level)
	}
	return append(b, 0xc0)
}

// mpTable encodes a table as an array (keys exactly 1..n) or a map.
func (st *state) mpTable(L *lua.LState, b []byte, t *lua.LTable, level int) []byte {
	count, max, array := 0, 0, true
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		n, ok := k.(lua.LNumber)
		if !ok || n <= 0 || float64(int32(n)) != float64(n) {
			array = false
			break
		}
		if int(n) > max {
			max = int(n)
		}
		count++
	}
	if array && max == count {
		n := t.Len()
		b = mpHeader(b, n, 0x90, 0xdc, 0xdd)
		for j := 1; j <= n; j++ {
			b = st.mpEncode(L, b, L.GetTable(t, lua.LNumber(j)), level+1)
		}
		return b
	}
	keys := st.keysInOrder(t)
	b = mpHeader(b, len(keys), 0x80, 0xde, 0xdf)
	for _, k := range keys {
		b = st.mpEncode(L, b, k, level+1)
		b = st.mpEncode(L, b, t.RawGet(k), level+1)
	}
	return b
}

// mpHeader appends an array or map header: fix, 16 or 32 bits.
func mpHeader(b []byte, n int, fix, h16, h32 byte) []byte {
	switch {
	case n <= 15:
		return append(b, fix|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, h16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, h32), uint32(n))
}

// mpBytes is mp_encode_bytes.
func mpBytes(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// mpInt is mp_encode_int.
func mpInt(b []byte, n int64) []byte {
	switch {
	case n >= 0 && n <= 127:
		return append(b, byte(n))
	case n >= 0 && n <= 0xff:
		return append(b, 0xcc, byte(n))
	case n >= 0 && n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n >= 0 && n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	case n >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(n))
	case n >= -32:
		return append(b, byte(int8(n)))
	case n >= -128:
		return append(b, 0xd0, byte(n))
	case n >= -32768:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= -2147483648:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// mpCursor reads a msgpack buffer.
type mpCursor struct {
	s   string
	p   int
	err string
}

const (
	mpEOF    = "Missing bytes in input."
	mpBadFmt = "Bad data format in input."
)

func (c *mpCursor) need(n int) bool {
	if len(c.s)-c.p < n {
		c.err = mpEOF
		return false
	}
	return true
}

// mpUnpack is mp_unpack_full.
func (st *state) mpUnpack(L *lua.LState, limit, offset int64) int {
	s := checkString(L, 1, "unpack")
	all := limit == 0 && offset == 0
	if offset < 0 || limit < 0 {
		L.RaiseError("Invalid request to unpack with offset of %d and limit of %d.", int32(offset), int32(len(s)))
	}
	if offset > int64(len(s)) {
		L.RaiseError("Start offset %d greater than input length %d.", int32(offset), int32(len(s)))
	}
	if all {
		limit = math.MaxInt32
	}
	c := &mpCursor{s: s, p: int(offset)}
	cnt := 0
	for ; c.p < len(s) && int64(cnt) < limit; cnt++ {
		if cnt >= maxUnpack {
			L.RaiseError("stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)")
		}
		v := st.mpDecode(L, c)
		if c.err != "" {
			L.RaiseError("%s", c.err)
		}
		L.Push(v)
	}
	if !all {
		next := lua.LNumber(c.p)
		if c.p == len(s) {
			next = -1
		}
		L.Insert(next, 2)
		cnt++
	}
	return cnt
}

// mpDecode is mp_decode_to_lua_type.
func (st *state) mpDecode(L *lua.LState, c *mpCursor) lua.LValue {
	if !c.need(1) {
		return lua.LNil
	}
	s, p := c.s, c.p
	fixed := func(n int, v lua.LValue) lua.LValue {
		if !c.need(n) {
			return lua.LNil
		}
		c.p += n
		return v
	}
	u16 := func() int { return int(s[p+1])<<8 | int(s[p+2]) }
	u32 := func() int { return int(binary.BigEndian.Uint32([]byte(s[p+1 : p+5]))) }
	switch b := s[p]; {
	case b == 0xcc:
		return fixed(2, mpNum(c, 2, func() float64 { return float64(s[p+1]) }))
	case b == 0xd0:
		return fixed(2, mpNum(c, 2, func() float64 { return float64(int8(s[p+1])) }))
	case b == 0xcd:
		return fixed(3, mpNum(c, 3, func() float64 { return float64(u16()) }))
	case b == 0xd1:
		return fixed(3, mpNum(c, 3, func() float64 { return float64(int16(u16())) }))
	case b == 0xce:
		return fixed(5, mpNum(c, 5, func() float64 { return float64(uint32(u32())) }))
	case b == 0xd2:
		return fixed(5, mpNum(c, 5, func() float64 { return float64(int32(u32())) }))
	case b == 0xcf, b == 0xd3:
		return fixed(9, mpNum(c, 9, func() float64 { return float64(int64(binary.BigEndian.Uint64([]byte(s[p+1 : p+9])))) }))
	case b == 0xc0:
		c.p++
		return lua.LNil
	case b == 0xc3, b == 0xc2:
		c.p++
		return lua.LBool(b == 0xc3)
	case b == 0xca:
		return fixed(5, mpNum(c, 5, func() float64 { return float64(math.Float32frombits(uint32(u32()))) }))
	case b == 0xcb:
		return fixed(9, mpNum(c, 9, func() float64 { return math.Float64frombits(binary.BigEndian.Uint64([]byte(s[p+1 : p+9]))) }))
	case b == 0xd9:
		return c.str(2, func() int { return int(s[p+1]) })
	case b == 0xda:
		return c.str(3, u16)
	case b == 0xdb:
		return c.str(5, u32)
	case b == 0xdc || b == 0xde:
		if !c.need(3) {
			return lua.LNil
		}
		c.p += 3
		return st.mpCollection(L, c, u16(), b == 0xdc)
	case b == 0xdd || b == 0xdf:
		if !c.need(5) {
			return lua.LNil
		}
		c.p += 5
		return st.mpCollection(L, c, u32(), b == 0xdd)
	case b&0x80 == 0:
		c.p++
		return lua.LNumber(b)
	case b&0xe0 == 0xe0:
		c.p++
		return lua.LNumber(int8(b))
	case b&0xe0 == 0xa0:
		return c.str(1, func() int { return int(b & 0x1f) })
	case b&0xf0 == 0x90 || b&0xf0 == 0x80:
		c.p++
		return st.mpCollection(L, c, int(b&0xf), b&0xf0 == 0x90)
	}
	c.err = mpBadFmt
	return lua.LNil
}

// mpNum reads a number of n bytes when they are there.
func mpNum(c *mpCursor, n int, read func() float64) lua.LValue {
	if len(c.s)-c.p < n {
		return lua.LNil
	}
	return lua.LNumber(read())
}

// str reads a string whose header is hdr bytes and whose length size gives.
func (c *mpCursor) str(hdr int, size func() int) lua.LValue {
	if !c.need(hdr) {
		return lua.LNil
	}
	l := size()
	if !c.need(hdr + l) {
		return lua.LNil
	}
	v := lua.LString(c.s[c.p+hdr : c.p+hdr+l])
	c.p += hdr + l
	return v
}

// mpCollection decodes n elements (array) or pairs (map).
func (st *state) mpCollection(L *lua.LState, c *mpCursor, n int, array bool) lua.LValue {
	t := L.NewTable()
	for i := 1; i <= n; i++ {
		if array {
			v := st.mpDecode(L, c)
			if c.err != "" {
				return t
			}
			if v != lua.LNil {
				t.RawSetInt(i, v)
			}
			continue
		}
		k := st.mpDecode(L, c)
		if c.err != "" {
			return t
		}
		v := st.mpDecode(L, c)
		if c.err != "" {
			return t
		}
		if k == lua.LNil {
			runError(L, "table index is nil")
		}
		L.SetTable(t, k, v)
	}
	return t
}
