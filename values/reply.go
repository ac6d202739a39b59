package values

import (
	"strconv"
	"strings"
)

// ReplyKind is the RESP type of a Reply.
type ReplyKind uint8

// The kinds of Reply. A command builds the shapes of the protocol version
// it is run for (Exec's resp argument): Double and Map only for RESP3,
// where RESP2 gets a bulk string and a flat array.
const (
	Nil      ReplyKind = iota // a null bulk string ($-1; RESP3 _)
	Status                    // +OK
	Error                     // -ERR ..., Str holds the text with its code
	Int                       // :n
	Bulk                      // $n, Str holds the bytes
	Array                     // *n, Elems
	NilArray                  // *-1 (RESP3 _)
	Double                    // RESP3 ,n; Float holds it
	Map                       // RESP3 %n; Elems holds key, value, key, value...
	// Kinds only a script's result takes (RESP3 connections only).
	Bool      // RESP3 #t / #f; Int is 1 or 0
	Set       // RESP3 ~n; Elems are its members
	BigNumber // RESP3 (n; Str holds the digits
	Verbatim  // RESP3 =n; Str holds the format, a colon and the text ("txt:hi")
)

// Reply is a command's reply, a tree of RESP values.
type Reply struct {
	Kind  ReplyKind
	Int   int64
	Float float64
	Str   []byte
	Elems []Reply
}

// Reply constructors, for commands here and for the server and the script
// engine, which build replies of their own (TIME, EVAL's conversions).
// Replies are read-only once built: several may share one Str or Elems.

// NilReply returns a null (bulk string) reply.
func NilReply() Reply { return Reply{Kind: Nil} }

// NilArrayReply returns a null array reply.
func NilArrayReply() Reply { return Reply{Kind: NilArray} }

// StatusReply returns the status reply +s.
func StatusReply(s string) Reply { return Reply{Kind: Status, Str: []byte(s)} }

// OKReply returns +OK.
func OKReply() Reply { return Reply{Kind: Status, Str: okBytes} }

var okBytes = []byte("OK")

// ErrorReply returns an error reply whose text msg starts with its code
// ("ERR syntax error", "WRONGTYPE ...").
func ErrorReply(msg string) Reply { return Reply{Kind: Error, Str: []byte(msg)} }

// ErrReply turns err into an error reply as redcon does: a text whose
// first word is upper case (OOM, WRONGTYPE, MOVED, ...) is sent as it is,
// anything else gets the "ERR " prefix.
func ErrReply(err error) Reply {
	msg := err.Error()
	if hasCode(msg) {
		return ErrorReply(msg)
	}
	return ErrorReply("ERR " + msg)
}

// hasCode reports whether msg starts with an upper-case word followed by a
// space or nothing.
func hasCode(msg string) bool {
	i := 0
	for i < len(msg) && msg[i] >= 'A' && msg[i] <= 'Z' {
		i++
	}
	return i > 0 && (i == len(msg) || msg[i] == ' ')
}

// IntReply returns the integer reply :n.
func IntReply(n int64) Reply { return Reply{Kind: Int, Int: n} }

// BulkReply returns a bulk string reply holding b (not copied).
func BulkReply(b []byte) Reply { return Reply{Kind: Bulk, Str: b} }

// BulkString returns a bulk string reply holding s.
func BulkString(s string) Reply { return Reply{Kind: Bulk, Str: []byte(s)} }

// ArrayReply returns an array reply of elems (not copied).
func ArrayReply(elems ...Reply) Reply { return Reply{Kind: Array, Elems: elems} }

// DoubleReply returns f as Redis 7.0 replies with a double: a RESP3
// double, or for RESP2 a bulk string holding its text (see AppendDouble).
func DoubleReply(resp int, f float64) Reply {
	if resp >= 3 {
		return Reply{Kind: Double, Float: f}
	}
	return Reply{Kind: Bulk, Str: formatDouble(nil, f)}
}

// AppendDouble appends the text of a double as Redis 7.0 writes it, in a
// RESP3 double (after the ',') and in RESP2's bulk string: C's "%.17g",
// and "inf" and "-inf" for the infinities.
func AppendDouble(dst []byte, f float64) []byte { return formatDouble(dst, f) }

// IsError reports whether r is an error reply.
func (r Reply) IsError() bool { return r.Kind == Error }

// String renders r for test failures and logs: RESP-like, one line.
func (r Reply) String() string {
	switch r.Kind {
	case Nil:
		return "(nil)"
	case NilArray:
		return "(nil array)"
	case Status:
		return "+" + string(r.Str)
	case Error:
		return "-" + string(r.Str)
	case Int:
		return ":" + strconv.FormatInt(r.Int, 10)
	case Bulk:
		return strconv.Quote(string(r.Str))
	case Double:
		return "," + string(formatDouble(nil, r.Float))
	}
	var b strings.Builder
	b.WriteString(map[ReplyKind]string{Array: "[", Map: "{"}[r.Kind])
	for i, e := range r.Elems {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(e.String())
	}
	b.WriteString(map[ReplyKind]string{Array: "]", Map: "}"}[r.Kind])
	return b.String()
}

// String returns the kind's name.
func (k ReplyKind) String() string {
	switch k {
	case Nil:
		return "nil"
	case Status:
		return "status"
	case Error:
		return "error"
	case Int:
		return "int"
	case Bulk:
		return "bulk"
	case Array:
		return "array"
	case NilArray:
		return "nil-array"
	case Double:
		return "double"
	case Map:
		return "map"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}
