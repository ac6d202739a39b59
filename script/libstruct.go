package script

import (
	"encoding/binary"
	"math"

	lua "github.com/yuin/gopher-lua"
)

// struct is Roberto Ierusalimschy's struct library as Redis bundles it
// (lua_struct.c), on x86-64: native little-endian, long and size_t of 8
// bytes, int of 4, alignment up to 8, integers up to 32 bytes.

const (
	structMaxInt   = 32
	structMaxAlign = 8
)

// structHeader is a format's endianness and alignment.
type structHeader struct {
	little bool
	align  int
}

func (st *state) openStruct() *lua.LTable {
	L := st.L
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(st.structPack))
	t.RawSetString("unpack", L.NewFunction(structUnpack))
	t.RawSetString("size", L.NewFunction(structSize))
	return t
}

// structFormat walks a format string.
type structFormat struct {
	L   *lua.LState
	fn  string
	f   string
	i   int
	hdr structHeader
}

// getnum reads a size after an option, or returns def.
func (sf *structFormat) getnum(def int) int {
	if sf.i >= len(sf.f) || !isDigit(sf.f[sf.i]) {
		return def
	}
	a := 0
	for sf.i < len(sf.f) && isDigit(sf.f[sf.i]) {
		d := int(sf.f[sf.i] - '0')
		if a > (math.MaxInt32/10) || a*10 > math.MaxInt32-d {
			sf.L.RaiseError("integral size overflow")
		}
		a = a*10 + d
		sf.i++
	}
	return a
}

// optsize is the size of option opt.
func (sf *structFormat) optsize(opt byte) int {
	switch opt {
	case 'B', 'b':
		return 1
	case 'H', 'h':
		return 2
	case 'L', 'l', 'T', 'd':
		return 8
	case 'f':
		return 4
	case 'x':
		return 1
	case 'c':
		return sf.getnum(1)
	case 'i', 'I':
		sz := sf.getnum(4)
		if sz > structMaxInt {
			sf.L.RaiseError("integral size %d is larger than limit of %d", sz, structMaxInt)
		}
		return sz
	}
	return 0
}

// toAlign is the padding before an item of size at offset n.
func (sf *structFormat) toAlign(n int, opt byte, size int) int {
	if size == 0 || opt == 'c' {
		return 0
	}
	if size > sf.hdr.align {
		size = sf.hdr.align
	}
	return (size - (n & (size - 1))) & (size - 1)
}

// control handles the options that are not items.
func (sf *structFormat) control(opt byte) {
	switch opt {
	case ' ':
	case '>':
		sf.hdr.little = false
	case '<':
		sf.hdr.little = true
	case '!':
		a := sf.getnum(structMaxAlign)
		if a <= 0 || a&(a-1) != 0 {
			sf.L.RaiseError("alignment %d is not a power of 2", a)
		}
		sf.hdr.align = a
	default:
		argError(sf.L, 1, sf.fn, "invalid format option '"+string(opt)+"'")
	}
}

func newStructFormat(L *lua.LState, fn string) *structFormat {
	return &structFormat{L: L, fn: fn, f: checkString(L, 1, fn), hdr: structHeader{little: true, align: 1}}
}

func (st *state) structPack(L *lua.LState) int {
	sf := newStructFormat(L, "pack")
	arg := 2
	var b []byte
	for sf.i < len(sf.f) {
		opt := sf.f[sf.i]
		sf.i++
		size := sf.optsize(opt)
		for pad := sf.toAlign(len(b), opt, size); pad > 0; pad-- {
			b = append(b, 0)
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			b = putInteger(b, checkNumber(L, arg, "pack"), sf.hdr.little, size)
			arg++
		case 'x':
			b = append(b, 0)
		case 'f':
			b = putBits(b, uint64(math.Float32bits(float32(checkNumber(L, arg, "pack")))), 4, sf.hdr.little)
			arg++
		case 'd':
			b = putBits(b, math.Float64bits(checkNumber(L, arg, "pack")), 8, sf.hdr.little)
			arg++
		case 'c', 's':
			s := checkString(L, arg, "pack")
			arg++
			if size == 0 {
				size = len(s)
			}
			if len(s) < size {
				argError(L, arg, "pack", "string too short")
			}
			st.raiseMemory(L, len(b)+size+1)
			b = append(b, s[:size]...)
			if opt == 's' {
				b = append(b, 0)
			}
		default:
			sf.control(opt)
		}
		st.raiseMemory(L, len(b))
	}
	L.Push(lua.LString(b))
	return 1
}

// putInteger appends n as an integer of size bytes (Redis casts a negative
// number through long long, a positive one to unsigned long long).
func putInteger(b []byte, n float64, little bool, size int) []byte {
	var v uint64
	if n < 0 {
		v = uint64(toInteger(n))
	} else if n < 18446744073709551616.0 {
		v = uint64(n)
	}
	return putBits(b, v, size, little)
}

// putBits appends the size low bytes of v (zeros past 8 bytes).
func putBits(b []byte, v uint64, size int, little bool) []byte {
	buf := make([]byte, size)
	for i := 0; i < size; i++ {
		k := i
		if !little {
			k = size - 1 - i
		}
		if i < 8 {
			buf[k] = byte(v >> (8 * i))
		}
	}
	return append(b, buf...)
}

// getInteger reads an integer of size bytes.
func getInteger(data string, little, signed bool, size int) float64 {
	var l uint64
	for i := 0; i < size; i++ {
		k := size - 1 - i
		if !little {
			k = i
		}
		l = l<<8 | uint64(data[k])
	}
	if !signed {
		return float64(l)
	}
	mask := ^uint64(0) << ((size*8 - 1) & 63)
	if l&mask != 0 {
		l |= mask
	}
	return float64(int64(l))
}

func structUnpack(L *lua.LState) int {
	sf := newStructFormat(L, "unpack")
	data := checkString(L, 2, "unpack")
	pos := optInt(L, 3, "unpack", 1)
	if pos <= 0 {
		argError(L, 3, "unpack", "offset must be 1 or greater")
	}
	pos--
	n := 0
	for sf.i < len(sf.f) {
		opt := sf.f[sf.i]
		sf.i++
		size := sf.optsize(opt)
		pos += sf.toAlign(pos, opt, size)
		if size > len(data) || pos > len(data)-size {
			argError(L, 2, "unpack", "data string too short")
		}
		if n >= maxUnpack {
			L.RaiseError("stack overflow (too many results)")
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			L.Push(lua.LNumber(getInteger(data[pos:], sf.hdr.little, opt >= 'a', size)))
			n++
		case 'x':
		case 'f':
			L.Push(lua.LNumber(float64(math.Float32frombits(uint32(bitsOf(data[pos:pos+4], sf.hdr.little))))))
			n++
		case 'd':
			L.Push(lua.LNumber(math.Float64frombits(bitsOf(data[pos:pos+8], sf.hdr.little))))
			n++
		case 'c':
			if size == 0 {
				prev, ok := luaToNumber(L.Get(-1))
				if n == 0 || !ok {
					L.RaiseError("format 'c0' needs a previous size")
				}
				size = int(prev)
				L.Pop(1)
				n--
				if size > len(data) || pos > len(data)-size {
					argError(L, 2, "unpack", "data string too short")
				}
			}
			L.Push(lua.LString(data[pos : pos+size]))
			n++
		case 's':
			e := indexByte(data[pos:], 0)
			if e < 0 {
				L.RaiseError("unfinished string in data")
			}
			size = e + 1
			L.Push(lua.LString(data[pos : pos+e]))
			n++
		default:
			sf.control(opt)
		}
		pos += size
	}
	L.Push(lua.LNumber(pos + 1))
	return n + 1
}

// bitsOf reads 4 or 8 bytes as an unsigned number.
func bitsOf(s string, little bool) uint64 {
	b := []byte(s)
	if len(b) == 4 {
		if little {
			return uint64(binary.LittleEndian.Uint32(b))
		}
		return uint64(binary.BigEndian.Uint32(b))
	}
	if little {
		return binary.LittleEndian.Uint64(b)
	}
	return binary.BigEndian.Uint64(b)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func structSize(L *lua.LState) int {
	sf := newStructFormat(L, "size")
	pos := 0
	for sf.i < len(sf.f) {
		opt := sf.f[sf.i]
		sf.i++
		size := sf.optsize(opt)
		pos += sf.toAlign(pos, opt, size)
		if opt == 's' {
			argError(L, 1, "size", "option 's' has no fixed size")
		} else if opt == 'c' && size == 0 {
			argError(L, 1, "size", "option 'c0' has no fixed size")
		}
		if !isAlnum(opt) {
			sf.control(opt)
		}
		pos += size
	}
	L.Push(lua.LNumber(pos))
	return 1
}

func isAlnum(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
