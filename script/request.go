package script

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/values"
)

// Parsing the commands, for a server that hands them over as they came.

// Errors of the commands' arguments, as Redis 7.0 words them.
var (
	replyNotInt      = []byte("ERR value is not an integer or out of range")
	replyTooManyKeys = []byte("ERR Number of keys can't be greater than number of args")
	replyNegKeys     = []byte("ERR Number of keys can't be negative")
)

// ParseEval parses EVAL, EVALSHA, EVAL_RO or EVALSHA_RO (args[0] is the
// command's name, any case): script or sha, numkeys, keys, arguments. It
// returns the error reply Redis gives for bad arguments: an EVALSHA whose
// sha is not 40 characters long answers NOSCRIPT at once. The Request's
// slices point into args. The server checks the arity (at least 3
// arguments) and sets RESP and Tag.
func ParseEval(args [][]byte) (Request, *values.Reply) {
	name := args[0]
	sha := bytes.EqualFold(name, []byte("evalsha")) || bytes.EqualFold(name, []byte("evalsha_ro"))
	var req Request
	req.ReadOnly = len(name) > 3 && bytes.EqualFold(name[len(name)-3:], []byte("_ro"))
	if sha {
		if len(args[1]) != 40 {
			r := errorReply(replyNoScript)
			return req, &r
		}
		req.SHA = args[1]
	} else {
		req.Body = args[1]
	}
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		r := errorReply(replyNotInt)
		return req, &r
	case n > int64(len(args)-3):
		r := errorReply(replyTooManyKeys)
		return req, &r
	case n < 0:
		r := errorReply(replyNegKeys)
		return req, &r
	}
	req.Keys, req.Args = args[3:3+n], args[3+n:]
	return req, nil
}

// The help of SCRIPT HELP (Redis's, without SCRIPT DEBUG, which the engine
// does not have).
var scriptHelp = []string{
	"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"EXISTS <sha1> [<sha1> ...]",
	"    Return information about the existence of the scripts in the script cache.",
	"FLUSH [ASYNC|SYNC]",
	"    Flush the Lua scripts cache. Very dangerous on replicas.",
	"    When called without the optional mode argument, the behavior is determined by the",
	"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	"    * ASYNC: Asynchronously flush the scripts cache.",
	"    * SYNC: Synchronously flush the scripts cache.",
	"KILL",
	"    Kill the currently executing Lua script.",
	"LOAD <script>",
	"    Load a script into the scripts cache without executing it.",
	"HELP",
	"    Prints this help.",
}

// ScriptCommand runs SCRIPT HELP | EXISTS | FLUSH | KILL | LOAD (args[0]
// is "SCRIPT") and returns Redis's reply.
func (e *Engine) ScriptCommand(args [][]byte) values.Reply {
	if len(args) < 2 {
		return errorReply([]byte("ERR wrong number of arguments for 'script' command"))
	}
	sub := strings.ToLower(string(args[1]))
	arity := map[string]int{"help": 2, "exists": -3, "flush": -2, "kill": 2, "load": 3}[sub]
	switch {
	case arity == 0:
		return errorReply([]byte("ERR unknown subcommand '" + truncate(string(args[1]), 128) + "'. Try SCRIPT HELP."))
	case (arity > 0 && len(args) != arity) || len(args) < -arity:
		return errorReply([]byte("ERR wrong number of arguments for 'script|" + sub + "' command"))
	}
	switch sub {
	case "help":
		elems := make([]values.Reply, len(scriptHelp))
		for i, s := range scriptHelp {
			elems[i] = values.Reply{Kind: values.Status, Str: []byte(s)}
		}
		return values.Reply{Kind: values.Array, Elems: elems}
	case "exists":
		elems := make([]values.Reply, len(args)-2)
		for i, sha := range args[2:] {
			if e.Exists(sha) {
				elems[i].Int = 1
			}
			elems[i].Kind = values.Int
		}
		return values.Reply{Kind: values.Array, Elems: elems}
	case "flush":
		if len(args) > 3 || (len(args) == 3 && !strings.EqualFold(string(args[2]), "sync") && !strings.EqualFold(string(args[2]), "async")) {
			return errorReply([]byte("ERR SCRIPT FLUSH only support SYNC|ASYNC option"))
		}
		e.Flush()
		return values.Reply{Kind: values.Status, Str: []byte("OK")}
	case "kill":
		return e.Kill()
	}
	sha, errReply := e.Load(args[2])
	if errReply != nil {
		return *errReply
	}
	return values.Reply{Kind: values.Bulk, Str: []byte(sha)}
}

// parseInt is Redis's string2ll: an optional minus sign and digits, no
// leading zero, no plus sign, no space, within int64.
func parseInt(b []byte) (int64, bool) {
	s := string(b)
	if s == "0" {
		return 0, true
	}
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || digits[0] < '1' || digits[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// splitArgs splits a line as Redis's sdssplitargs does: words separated by
// spaces, "double quotes" with \n \r \t \b \a \\ \" and \xHH escapes,
// 'single quotes' with \' — a closing quote must be followed by a space or
// the end. ok is false for an unbalanced or badly closed quote.
func splitArgs(line string) (words []string, ok bool) {
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return words, true
		}
		var w bytes.Buffer
		var quote byte
		for done := false; !done; {
			if i == len(line) {
				if quote != 0 {
					return nil, false
				}
				break
			}
			c := line[i]
			switch {
			case quote == '"' && c == '\\' && i+3 < len(line) && line[i+1] == 'x' && hexDigit(line[i+2]) >= 0 && hexDigit(line[i+3]) >= 0:
				w.WriteByte(byte(hexDigit(line[i+2])<<4 | hexDigit(line[i+3])))
				i += 3
			case quote == '"' && c == '\\' && i+1 < len(line):
				i++
				w.WriteByte(unescape(line[i]))
			case quote == '\'' && c == '\\' && i+1 < len(line) && line[i+1] == '\'':
				i++
				w.WriteByte('\'')
			case quote != 0 && c == quote:
				if i+1 < len(line) && !isSpace(line[i+1]) {
					return nil, false
				}
				done = true
			case quote == 0 && isSpace(c):
				done = true
			case quote == 0 && (c == '"' || c == '\''):
				quote = c
			default:
				w.WriteByte(c)
			}
			i++
		}
		words = append(words, w.String())
	}
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
