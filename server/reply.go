package server

import (
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"
)

// Reply writers. They append to the connection's output buffer, which is
// flushed once per pipelined batch. Maps, sets and nulls follow the
// connection's protocol: RESP3 types after HELLO 3, their RESP2 forms
// otherwise.

func (c *conn) writeOK() { c.out = append(c.out, "+OK\r\n"...) }

func (c *conn) writeStatus(s string) { c.out = redcon.AppendString(c.out, s) }

func (c *conn) writeInt(n int64) { c.out = redcon.AppendInt(c.out, n) }

func (c *conn) writeBulk(b []byte) { c.out = redcon.AppendBulk(c.out, b) }

func (c *conn) writeBulkString(s string) { c.out = redcon.AppendBulkString(c.out, s) }

func (c *conn) writeArray(n int) { c.out = redcon.AppendArray(c.out, n) }

func (c *conn) writeNull() {
	if c.proto == 3 {
		c.out = append(c.out, "_\r\n"...)
		return
	}
	c.out = redcon.AppendNull(c.out)
}

// writeMap writes the header of a map of n pairs (a flat array of 2n
// elements in RESP2).
func (c *conn) writeMap(n int) {
	if c.proto == 3 {
		c.out = append(c.out, '%')
		c.out = strconv.AppendInt(c.out, int64(n), 10)
		c.out = append(c.out, '\r', '\n')
		return
	}
	c.writeArray(2 * n)
}

// writeSet writes the header of a set of n elements (an array in RESP2).
func (c *conn) writeSet(n int) {
	if c.proto == 3 {
		c.out = append(c.out, '~')
		c.out = strconv.AppendInt(c.out, int64(n), 10)
		c.out = append(c.out, '\r', '\n')
		return
	}
	c.writeArray(n)
}

// writeError writes msg, which starts with its error code ("ERR ...",
// "WRONGTYPE ..."), as an error reply, with line breaks removed.
func (c *conn) writeError(msg string) {
	if strings.ContainsAny(msg, "\r\n") {
		msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	}
	c.out = redcon.AppendError(c.out, msg)
	code := msg
	if i := strings.IndexByte(msg, ' '); i > 0 {
		code = msg[:i]
	}
	c.s.metrics.errorCount(code)
	if code == "MOVED" {
		c.s.lastMoved.Store(time.Now().UnixNano())
	}
}

// writeErr is the one place where errors become RESP: an error whose first
// word is upper case (WRONGTYPE, MOVED, TRYAGAIN, CLUSTERDOWN, NOAUTH, ...)
// goes to the client unchanged; anything else gets the ERR prefix.
//
// A transient error of a command that may be held (the slot is moving;
// see dispatchTop) is not answered: the command runs again.
func (c *conn) writeErr(err error) {
	if c.hold(err) {
		return
	}
	c.writeError(replyError(err))
}

func replyError(err error) string {
	msg := err.Error()
	word := msg
	if i := strings.IndexByte(msg, ' '); i >= 0 {
		word = msg[:i]
	}
	if word != "" && strings.ToUpper(word) == word && strings.ToLower(word) != word {
		return msg
	}
	return "ERR " + msg
}

// Generic values for the replies of admin commands, which are not on the
// hot path: writeValue walks them.
type (
	status string // a simple string
	kv     []any  // a map, as alternating keys and values
	set    []any  // a set
)

func (c *conn) writeValue(v any) {
	switch v := v.(type) {
	case nil:
		c.writeNull()
	case status:
		c.writeStatus(string(v))
	case string:
		c.writeBulkString(v)
	case []byte:
		c.writeBulk(v)
	case int:
		c.writeInt(int64(v))
	case int64:
		c.writeInt(v)
	case bool:
		c.writeInt(b2i(v))
	case kv:
		c.writeMap(len(v) / 2)
		for _, e := range v {
			c.writeValue(e)
		}
	case set:
		c.writeSet(len(v))
		for _, e := range v {
			c.writeValue(e)
		}
	case []any:
		c.writeArray(len(v))
		for _, e := range v {
			c.writeValue(e)
		}
	case []string:
		c.writeArray(len(v))
		for _, e := range v {
			c.writeBulkString(e)
		}
	default:
		panic("server: writeValue of unsupported type")
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
