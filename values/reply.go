package values

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
)

// Reply is a command's reply, a tree of RESP values.
type Reply struct {
	Kind  ReplyKind
	Int   int64
	Float float64
	Str   []byte
	Elems []Reply
}
