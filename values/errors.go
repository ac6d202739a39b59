package values

import "errors"

// ErrWrongType is Redis's answer to a command on a key of another type. A
// command here answers it for a key holding limiter state, and the server
// answers it to a limiter command on a key holding a Value.
var ErrWrongType = errors.New(msgWrongType)

// The texts of the errors the commands answer, as Redis 7.0 words them.
const (
	msgWrongType     = "WRONGTYPE Operation against a key holding the wrong kind of value"
	msgNotInt        = "ERR value is not an integer or out of range"
	msgNotFloat      = "ERR value is not a valid float"
	msgSyntax        = "ERR syntax error"
	msgOverflow      = "ERR increment or decrement would overflow"
	msgDecrOverflow  = "ERR decrement would overflow"
	msgNoKey         = "ERR no such key"
	msgNaNOrInf      = "ERR increment would produce NaN or Infinity"
	msgIncrNaNOrInf  = "ERR value is NaN or Infinity"
	msgHashNotInt    = "ERR hash value is not an integer"
	msgHashNotFloat  = "ERR hash value is not a float"
	msgMinMaxFloat   = "ERR min or max is not a float"
	msgMinMaxLex     = "ERR min or max not valid string range item"
	msgScoreNaN      = "ERR resulting score is not a number (NaN)"
	msgPositive      = "ERR value is out of range, must be positive"
	msgInvalidCursor = "ERR invalid cursor"
	msgLimitRank     = "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
	msgScoresLex     = "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
	msgStringSize    = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
)

// Replies shared by the commands (read-only).
var (
	replyWrongType = ErrorReply(msgWrongType)
	replyNotInt    = ErrorReply(msgNotInt)
	replyNotFloat  = ErrorReply(msgNotFloat)
	replySyntax    = ErrorReply(msgSyntax)
	replyOverflow  = ErrorReply(msgOverflow)
	replyMinMax    = ErrorReply(msgMinMaxFloat)
	replyPositive  = ErrorReply(msgPositive)
	replyOK        = OKReply()
	replyNil       = NilReply()
	replyZero      = IntReply(0)
	replyOne       = IntReply(1)
	replyEmpty     = Reply{Kind: Array, Elems: []Reply{}}
)

// expireError is "invalid expire time" for the command named name.
func expireError(name string) Reply {
	return ErrorReply("ERR invalid expire time in '" + name + "' command")
}

// arityError is "wrong number of arguments" for the command named name.
func arityError(name string) Reply {
	return ErrorReply("ERR wrong number of arguments for '" + name + "' command")
}

// unknownCommand is Redis's answer to a command it does not know: the
// name and the first arguments, each cut to what fits in 128 bytes.
func unknownCommand(args [][]byte) Reply {
	name := cString(args[0])
	if len(name) > 128 {
		name = name[:128]
	}
	var list []byte
	for _, a := range args[1:] {
		if len(list) >= 128 {
			break
		}
		a = cString(a)
		if room := 128 - len(list); len(a) > room {
			a = a[:room]
		}
		list = append(append(append(list, '\''), a...), '\'', ' ')
	}
	return ErrorReply("ERR unknown command '" + string(name) + "', with args beginning with: " + string(list))
}
