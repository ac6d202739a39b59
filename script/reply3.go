package script

import "github.com/rlserver/rlserver/values"

// RESP3 reply kinds a script's result can take that values.ReplyKind does
// not define yet. They belong in package values (Reply.Kind, written by
// the server's reply writer); until they move there, the engine uses these
// numbers, which no values kind uses, and only for a RESP3 connection:
// for a RESP2 connection a result is always made of values' own kinds.
const (
	// KindBool is a RESP3 boolean (#t, #f); Reply.Int is 1 or 0.
	KindBool values.ReplyKind = 200 + iota
	// KindSet is a RESP3 set (~n); Reply.Elems are its members.
	KindSet
	// KindBigNumber is a RESP3 big number ((n); Reply.Str is its digits.
	KindBigNumber
	// KindVerbatim is a RESP3 verbatim string (=n); Reply.Str is the
	// three-letter format, a colon and the text ("txt:hello").
	KindVerbatim
)
