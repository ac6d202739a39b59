package script

import (
	"math"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// cjson is lua-cjson 2.1.0 as Redis bundles it: numbers printed "%.14g"
// (encode_number_precision), an empty table encoded as {}, a table with
// only positive integer keys as an array (null in its holes) unless it is
// excessively sparse, "/" escaped, cjson.null for JSON null. Its settings
// are reset before every run, so that a script cannot change them for the
// next one (Redis keeps them for the life of the server).

// jsonConfig is a cjson module's settings.
type jsonConfig struct {
	sparseConvert   bool
	sparseRatio     int
	sparseSafe      int
	encodeMaxDepth  int
	decodeMaxDepth  int
	encodeInvalid   int // 0 off, 1 on, 2 null
	decodeInvalid   bool
	keepBuffer      bool
	numberPrecision int
}

var defaultJSONConfig = jsonConfig{sparseRatio: 2, sparseSafe: 10, encodeMaxDepth: 1000,
	decodeMaxDepth: 1000, decodeInvalid: true, keepBuffer: true, numberPrecision: 14}

// jsonModule is one cjson table's functions and settings.
type jsonModule struct {
	st  *state
	cfg *jsonConfig
}

func (st *state) openCjson() *lua.LTable {
	st.jsonNull = st.L.NewUserData()
	return st.newCjson(&st.json)
}

// newCjson builds a cjson table over cfg.
func (st *state) newCjson(cfg *jsonConfig) *lua.LTable {
	L := st.L
	m := &jsonModule{st: st, cfg: cfg}
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"encode": m.encode, "decode": m.decode,
		"encode_sparse_array": m.cfgSparse, "encode_max_depth": m.intOption("encode_max_depth", &cfg.encodeMaxDepth, 1, math.MaxInt32),
		"decode_max_depth":        m.intOption("decode_max_depth", &cfg.decodeMaxDepth, 1, math.MaxInt32),
		"encode_number_precision": m.intOption("encode_number_precision", &cfg.numberPrecision, 1, 14),
		"encode_keep_buffer":      m.boolOption("encode_keep_buffer", &cfg.keepBuffer),
		"decode_invalid_numbers":  m.boolOption("decode_invalid_numbers", &cfg.decodeInvalid),
		"encode_invalid_numbers":  m.cfgEncodeInvalid,
		"new": func(L *lua.LState) int {
			c := defaultJSONConfig
			L.Push(st.newCjson(&c))
			return 1
		},
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	t.RawSetString("null", st.jsonNull)
	t.RawSetString("_NAME", lua.LString("cjson"))
	t.RawSetString("_VERSION", lua.LString("2.1.0"))
	return t
}

// argInit is json_arg_init: at most n arguments.
func argInit(L *lua.LState, n int, fn string) {
	if L.GetTop() > n {
		argError(L, n+1, fn, "found too many arguments")
	}
	L.SetTop(n)
}

func (m *jsonModule) intOption(fn string, setting *int, min, max int) lua.LGFunction {
	return func(L *lua.LState) int {
		argInit(L, 1, fn)
		m.setInt(L, 1, fn, setting, min, max)
		return 1
	}
}

// setInt is json_integer_option.
func (m *jsonModule) setInt(L *lua.LState, i int, fn string, setting *int, min, max int) {
	if L.Get(i) != lua.LNil {
		v := int(toInteger(checkNumber(L, i, fn)))
		if v < min || v > max {
			argError(L, 1, fn, "expected integer between "+strconv.Itoa(min)+" and "+strconv.Itoa(max))
		}
		*setting = v
	}
	L.Push(lua.LNumber(*setting))
}

func (m *jsonModule) boolOption(fn string, setting *bool) lua.LGFunction {
	return func(L *lua.LState) int {
		argInit(L, 1, fn)
		m.setBool(L, 1, fn, setting)
		return 1
	}
}

// setBool is json_enum_option over off/on.
func (m *jsonModule) setBool(L *lua.LState, i int, fn string, setting *bool) {
	switch v := L.Get(i).(type) {
	case *lua.LNilType:
	case lua.LBool:
		*setting = bool(v)
	default:
		switch checkString(L, i, fn) {
		case "off":
			*setting = false
		case "on":
			*setting = true
		default:
			argError(L, i, fn, "invalid option '"+checkString(L, i, fn)+"'")
		}
	}
	L.Push(lua.LBool(*setting))
}

func (m *jsonModule) cfgSparse(L *lua.LState) int {
	const fn = "encode_sparse_array"
	argInit(L, 3, fn)
	m.setBool(L, 1, fn, &m.cfg.sparseConvert)
	m.setInt(L, 2, fn, &m.cfg.sparseRatio, 0, math.MaxInt32)
	m.setInt(L, 3, fn, &m.cfg.sparseSafe, 0, math.MaxInt32)
	return 3
}

func (m *jsonModule) cfgEncodeInvalid(L *lua.LState) int {
	const fn = "encode_invalid_numbers"
	argInit(L, 1, fn)
	switch v := L.Get(1).(type) {
	case *lua.LNilType:
	case lua.LBool:
		m.cfg.encodeInvalid = 0
		if v {
			m.cfg.encodeInvalid = 1
		}
	default:
		switch s := checkString(L, 1, fn); s {
		case "off":
			m.cfg.encodeInvalid = 0
		case "on":
			m.cfg.encodeInvalid = 1
		case "null":
			m.cfg.encodeInvalid = 2
		default:
			argError(L, 1, fn, "invalid option '"+s+"'")
		}
	}
	if m.cfg.encodeInvalid == 2 {
		L.Push(lua.LString("null"))
	} else {
		L.Push(lua.LBool(m.cfg.encodeInvalid == 1))
	}
	return 1
}

// jsonEncoder is one cjson.encode.
type jsonEncoder struct {
	m *jsonModule
	L *lua.LState
	b []byte
}

func (m *jsonModule) encode(L *lua.LState) int {
	if L.GetTop() != 1 {
		argError(L, 1, "encode", "expected 1 argument")
	}
	e := &jsonEncoder{m: m, L: L}
	e.value(L.Get(1), 0)
	L.Push(lua.LString(e.b))
	return 1
}

// fail is json_encode_exception.
func (e *jsonEncoder) fail(v lua.LValue, reason string) {
	e.L.RaiseError("Cannot serialise %s: %s", v.Type().String(), reason)
}

func (e *jsonEncoder) value(v lua.LValue, depth int) {
	switch v := v.(type) {
	case lua.LString:
		e.str(string(v))
	case lua.LNumber:
		e.number(v)
	case lua.LBool:
		if v {
			e.b = append(e.b, "true"...)
		} else {
			e.b = append(e.b, "false"...)
		}
	case *lua.LNilType:
		e.b = append(e.b, "null"...)
	case *lua.LTable:
		depth++
		if depth > e.m.cfg.encodeMaxDepth {
			e.L.RaiseError("Cannot serialise, excessive nesting (%d)", depth)
		}
		if n := e.arrayLength(v); n > 0 {
			e.array(v, n, depth)
		} else {
			e.object(v, depth)
		}
	default:
		if v == e.m.st.jsonNull {
			e.b = append(e.b, "null"...)
			return
		}
		e.fail(v, "type not supported")
	}
	e.m.st.raiseMemory(e.L, len(e.b))
}

// str appends a JSON string with cjson's escapes.
func (e *jsonEncoder) str(s string) {
	e.m.st.raiseMemory(e.L, len(e.b)+len(s))
	e.b = append(e.b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			e.b = append(e.b, '\\', '"')
		case c == '\\':
			e.b = append(e.b, '\\', '\\')
		case c == '/':
			e.b = append(e.b, '\\', '/')
		case c == '\b':
			e.b = append(e.b, '\\', 'b')
		case c == '\t':
			e.b = append(e.b, '\\', 't')
		case c == '\n':
			e.b = append(e.b, '\\', 'n')
		case c == '\f':
			e.b = append(e.b, '\\', 'f')
		case c == '\r':
			e.b = append(e.b, '\\', 'r')
		case c < 0x20 || c == 0x7f:
			e.b = append(e.b, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			e.b = append(e.b, c)
		}
	}
	e.b = append(e.b, '"')
}

// number is json_append_number.
func (e *jsonEncoder) number(v lua.LNumber) {
	f := float64(v)
	bad := math.IsInf(f, 0) || math.IsNaN(f)
	switch {
	case bad && e.m.cfg.encodeInvalid == 0:
		e.fail(v, "must not be NaN or Inf")
	case math.IsNaN(f) && e.m.cfg.encodeInvalid == 1:
		e.b = append(e.b, "nan"...)
		return
	case bad && e.m.cfg.encodeInvalid == 2:
		e.b = append(e.b, "null"...)
		return
	}
	e.b = appendG(e.b, f, e.m.cfg.numberPrecision, false, false)
}

// arrayLength is lua_array_length: the array's length, or -1 (0 for an
// empty table) when the table must be an object.
func (e *jsonEncoder) arrayLength(t *lua.LTable) int {
	max, items := 0, 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		n, ok := k.(lua.LNumber)
		if !ok || n == 0 || math.Floor(float64(n)) != float64(n) || n < 1 {
			return -1
		}
		if float64(n) > float64(max) {
			max = int(n)
		}
		items++
	}
	cfg := e.m.cfg
	if cfg.sparseRatio > 0 && max > items*cfg.sparseRatio && max > cfg.sparseSafe {
		if !cfg.sparseConvert {
			e.fail(t, "excessively sparse array")
		}
		return -1
	}
	return max
}

func (e *jsonEncoder) array(t *lua.LTable, n, depth int) {
	e.b = append(e.b, '[')
	for i := 1; i <= n; i++ {
		if i > 1 {
			e.b = append(e.b, ',')
		}
		e.value(t.RawGetInt(i), depth)
	}
	e.b = append(e.b, ']')
}

func (e *jsonEncoder) object(t *lua.LTable, depth int) {
	e.b = append(e.b, '{')
	first := true
	for _, k := range e.m.st.keysInOrder(t) {
		v := t.RawGet(k)
		if !first {
			e.b = append(e.b, ',')
		}
		first = false
		switch k := k.(type) {
		case lua.LNumber:
			e.b = append(e.b, '"')
			e.number(k)
			e.b = append(e.b, '"', ':')
		case lua.LString:
			e.str(string(k))
			e.b = append(e.b, ':')
		default:
			e.fail(k, "table key must be a number or string")
		}
		e.value(v, depth)
	}
	e.b = append(e.b, '}')
}

// JSON tokens, named as cjson names them in its errors.
const (
	tObjBegin = iota
	tObjEnd
	tArrBegin
	tArrEnd
	tString
	tNumber
	tBoolean
	tNull
	tColon
	tComma
	tEnd
	tWhitespace
	tError
	tUnknown
)

var jsonTokenNames = []string{"T_OBJ_BEGIN", "T_OBJ_END", "T_ARR_BEGIN", "T_ARR_END", "T_STRING",
	"T_NUMBER", "T_BOOLEAN", "T_NULL", "T_COLON", "T_COMMA", "T_END", "T_WHITESPACE", "T_ERROR", "T_UNKNOWN"}

// jsonToken is one token of the input.
type jsonToken struct {
	typ   int
	index int
	str   string
	num   float64
	b     bool
	err   string
}

// jsonDecoder is one cjson.decode.
type jsonDecoder struct {
	m     *jsonModule
	L     *lua.LState
	data  string
	pos   int
	depth int
	made  int // values created, to bound the memory
}

func (m *jsonModule) decode(L *lua.LState) int {
	if L.GetTop() != 1 {
		argError(L, 1, "decode", "expected 1 argument")
	}
	data := checkString(L, 1, "decode")
	if i := indexByte(data, 0); i >= 0 {
		if len(data) >= 2 && (data[0] == 0 || data[1] == 0) {
			L.RaiseError("JSON parser does not support UTF-16 or UTF-32")
		}
		data = data[:i] // the C parser stops at a NUL
	}
	d := &jsonDecoder{m: m, L: L, data: data}
	tok := d.next()
	v := d.value(tok)
	if tok = d.next(); tok.typ != tEnd {
		d.fail("the end", tok)
	}
	L.Push(v)
	return 1
}

// fail is json_throw_parse_error.
func (d *jsonDecoder) fail(expected string, tok jsonToken) {
	found := tok.err
	if tok.typ != tError {
		found = jsonTokenNames[tok.typ]
	}
	d.L.RaiseError("Expected %s but found %s at character %d", expected, found, tok.index+1)
}

func (d *jsonDecoder) at(i int) byte {
	if i < len(d.data) {
		return d.data[i]
	}
	return 0
}

// next is json_next_token.
func (d *jsonDecoder) next() jsonToken {
	for {
		c := d.at(d.pos)
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			break
		}
		d.pos++
	}
	tok := jsonToken{index: d.pos}
	c := d.at(d.pos)
	if t := singleToken(c); t >= 0 {
		d.pos++
		tok.typ = t
		return tok
	}
	rest := d.data[min(d.pos, len(d.data)):]
	switch {
	case c == 0:
		tok.typ = tEnd
	case c == '"':
		d.stringToken(&tok)
	case c == '-' || isDigit(c):
		if !d.m.cfg.decodeInvalid && d.invalidNumber() {
			return d.tokenError(tok, "invalid number")
		}
		d.numberToken(&tok)
	case hasPrefix(rest, "true"):
		tok.typ, tok.b = tBoolean, true
		d.pos += 4
	case hasPrefix(rest, "false"):
		tok.typ = tBoolean
		d.pos += 5
	case hasPrefix(rest, "null"):
		tok.typ = tNull
		d.pos += 4
	case (c == '+' || c == 'i' || c == 'I' || c == 'n' || c == 'N') && d.m.cfg.decodeInvalid && d.invalidNumber():
		d.numberToken(&tok)
	default:
		return d.tokenError(tok, "invalid token")
	}
	return tok
}

// singleToken is the token of a one-character token, -1 for others.
func singleToken(c byte) int {
	switch c {
	case '{':
		return tObjBegin
	case '}':
		return tObjEnd
	case '[':
		return tArrBegin
	case ']':
		return tArrEnd
	case ',':
		return tComma
	case ':':
		return tColon
	}
	return -1
}

// jsonEscape is what a backslash and c stand for in a JSON string, 0 for
// an invalid escape.
func jsonEscape(c byte) byte {
	switch c {
	case '"', '\\', '/':
		return c
	case 'b':
		return '\b'
	case 't':
		return '\t'
	case 'n':
		return '\n'
	case 'f':
		return '\f'
	case 'r':
		return '\r'
	}
	return 0
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func (d *jsonDecoder) tokenError(tok jsonToken, msg string) jsonToken {
	tok.typ, tok.index, tok.err = tError, d.pos, msg
	return tok
}

// invalidNumber is json_is_invalid_number.
func (d *jsonDecoder) invalidNumber() bool {
	p := d.pos
	if d.at(p) == '+' {
		return true
	}
	if d.at(p) == '-' {
		p++
	}
	if d.at(p) == '0' {
		c2 := d.at(p + 1)
		return c2|0x20 == 'x' || isDigit(c2)
	}
	if d.at(p) <= '9' {
		return false
	}
	rest := d.data[min(p, len(d.data)):]
	return len(rest) >= 3 && (equalFoldASCII(rest[:3], "inf") || equalFoldASCII(rest[:3], "nan"))
}

func equalFoldASCII(a, b string) bool {
	for i := 0; i < len(a); i++ {
		if a[i]|0x20 != b[i]|0x20 {
			return false
		}
	}
	return true
}

func (d *jsonDecoder) numberToken(tok *jsonToken) {
	f, n := strtod(d.data[d.pos:])
	if n == 0 {
		*tok = d.tokenError(*tok, "invalid number")
		return
	}
	tok.typ, tok.num = tNumber, f
	d.pos += n
}

// stringToken is json_next_string_token.
func (d *jsonDecoder) stringToken(tok *jsonToken) {
	d.pos++
	var b []byte
	for {
		c := d.at(d.pos)
		if c == '"' {
			break
		}
		if c == 0 {
			*tok = d.tokenError(*tok, "unexpected end of string")
			return
		}
		if c == '\\' {
			esc := d.at(d.pos + 1)
			if esc == 'u' {
				var ok bool
				if b, ok = d.unicodeEscape(b); !ok {
					*tok = d.tokenError(*tok, "invalid unicode escape code")
					return
				}
				continue
			}
			r := jsonEscape(esc)
			if r == 0 {
				*tok = d.tokenError(*tok, "invalid escape code")
				return
			}
			c = r
			d.pos++
		}
		b = append(b, c)
		d.pos++
	}
	d.pos++
	tok.typ, tok.str = tString, string(b)
}

// unicodeEscape decodes \uXXXX (and a surrogate pair) at d.pos as UTF-8.
func (d *jsonDecoder) unicodeEscape(b []byte) ([]byte, bool) {
	cp := d.hex4(d.pos + 2)
	if cp < 0 {
		return b, false
	}
	n := 6
	if cp&0xF800 == 0xD800 {
		if cp&0x400 != 0 || d.at(d.pos+6) != '\\' || d.at(d.pos+7) != 'u' {
			return b, false
		}
		low := d.hex4(d.pos + 8)
		if low < 0 || low&0xFC00 != 0xDC00 {
			return b, false
		}
		cp = ((cp&0x3FF)<<10 | low&0x3FF) + 0x10000
		n = 12
	}
	switch {
	case cp <= 0x7F:
		b = append(b, byte(cp))
	case cp <= 0x7FF:
		b = append(b, byte(cp>>6|0xC0), byte(cp&0x3F|0x80))
	case cp <= 0xFFFF:
		b = append(b, byte(cp>>12|0xE0), byte(cp>>6&0x3F|0x80), byte(cp&0x3F|0x80))
	default:
		b = append(b, byte(cp>>18|0xF0), byte(cp>>12&0x3F|0x80), byte(cp>>6&0x3F|0x80), byte(cp&0x3F|0x80))
	}
	d.pos += n
	return b, true
}

func (d *jsonDecoder) hex4(i int) int {
	v := 0
	for k := 0; k < 4; k++ {
		h := hexDigit(d.at(i + k))
		if h < 0 {
			return -1
		}
		v = v<<4 | h
	}
	return v
}

// value is json_process_value.
func (d *jsonDecoder) value(tok jsonToken) lua.LValue {
	d.made++
	if d.made%1024 == 0 {
		d.m.st.raiseMemory(d.L, d.made*sizeEntry)
	}
	switch tok.typ {
	case tString:
		return lua.LString(tok.str)
	case tNumber:
		return lua.LNumber(tok.num)
	case tBoolean:
		return lua.LBool(tok.b)
	case tNull:
		return d.m.st.jsonNull
	case tObjBegin:
		return d.object()
	case tArrBegin:
		return d.array()
	}
	d.fail("value", tok)
	return lua.LNil
}

// descend is json_decode_descend.
func (d *jsonDecoder) descend() {
	d.depth++
	if d.depth > d.m.cfg.decodeMaxDepth {
		d.L.RaiseError("Found too many nested data structures (%d) at character %d", d.depth, d.pos)
	}
}

func (d *jsonDecoder) object() lua.LValue {
	d.descend()
	t := d.L.NewTable()
	tok := d.next()
	if tok.typ == tObjEnd {
		d.depth--
		return t
	}
	for {
		if tok.typ != tString {
			d.fail("object key string", tok)
		}
		key := tok.str
		if tok = d.next(); tok.typ != tColon {
			d.fail("colon", tok)
		}
		t.RawSetString(key, d.value(d.next()))
		tok = d.next()
		if tok.typ == tObjEnd {
			d.depth--
			return t
		}
		if tok.typ != tComma {
			d.fail("comma or object end", tok)
		}
		tok = d.next()
	}
}

func (d *jsonDecoder) array() lua.LValue {
	d.descend()
	t := d.L.NewTable()
	tok := d.next()
	if tok.typ == tArrEnd {
		d.depth--
		return t
	}
	for i := 1; ; i++ {
		t.RawSetInt(i, d.value(tok))
		tok = d.next()
		if tok.typ == tArrEnd {
			d.depth--
			return t
		}
		if tok.typ != tComma {
			d.fail("comma or array end", tok)
		}
		tok = d.next()
	}
}
