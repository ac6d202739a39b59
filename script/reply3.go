package script

import "github.com/rlserver/rlserver/values"

// RESP3 reply kinds a script's result can take, beside those commands
// reply with; for a RESP2 connection a result is always made of the
// others. They are package values' kinds, named here as the engine has
// always named them.
const (
	// KindBool is a RESP3 boolean (#t, #f); Reply.Int is 1 or 0.
	KindBool = values.Bool
	// KindSet is a RESP3 set (~n); Reply.Elems are its members.
	KindSet = values.Set
	// KindBigNumber is a RESP3 big number ((n); Reply.Str is its digits.
	KindBigNumber = values.BigNumber
	// KindVerbatim is a RESP3 verbatim string (=n); Reply.Str is the
	// three-letter format, a colon and the text ("txt:hello").
	KindVerbatim = values.Verbatim
)
