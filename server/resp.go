package server

import (
	"errors"
	"io"
)

// Protocol errors. Their texts are Redis's; the connection answers
// "-ERR " + text and closes.
var (
	errTooBig           = errors.New("Protocol error: request is larger than the server accepts")
	errMultibulkLength  = errors.New("Protocol error: invalid multibulk length")
	errBulkLength       = errors.New("Protocol error: invalid bulk length")
	errUnbalancedQuotes = errors.New("Protocol error: unbalanced quotes in request")
)

// errExpectedDollar is Redis's error for an array element that is not a
// bulk string.
func errExpectedDollar(got byte) error {
	return errors.New("Protocol error: expected '$', got '" + string(got) + "'")
}

// maxMultibulk is Redis's bound on the number of arguments of one request.
const maxMultibulk = 1024 * 1024

// reader parses requests, RESP arrays of bulk strings or inline commands,
// from a connection into argument slices that point into its own buffer,
// so that a steady stream of requests is parsed without allocating. It
// bounds the size of one request (not of a pipelined batch) by max bytes:
// a larger one, or a bulk string announced larger, is errTooBig.
//
// A reader is owned by one connection goroutine.
type reader struct {
	r     io.Reader
	max   int
	buf   []byte
	start int // first unparsed byte
	end   int // end of the bytes read
	// scanned is how far an incomplete inline line has been searched for
	// its newline, so that a long line arriving in pieces is scanned once.
	scanned int
	// args holds the arguments of the requests parsed since reset, back to
	// back; each request's arguments are a slice of it.
	args   [][]byte
	inline []byte // unquoted inline arguments
}

// reset forgets the requests parsed so far, whose arguments must no longer
// be used, so that their space is reused.
func (rd *reader) reset() {
	rd.args = rd.args[:0]
	rd.inline = rd.inline[:0]
}

// initialReadBuf is the size of a new connection's read buffer; it grows
// for a request that does not fit and shrinks back when it is drained.
const initialReadBuf = 16 << 10

// buffered reports whether bytes that are not parsed yet are buffered.
func (rd *reader) buffered() bool { return rd.start < rd.end }

// fill reads once from the connection, after making room: the unparsed
// tail moves to the front of the buffer, which grows if the tail fills it.
func (rd *reader) fill() error {
	if rd.start == rd.end {
		rd.start, rd.end, rd.scanned = 0, 0, 0
		if len(rd.buf) > initialReadBuf {
			rd.buf = make([]byte, initialReadBuf)
		}
	}
	if rd.end-rd.start > rd.max {
		return errTooBig
	}
	if rd.end == len(rd.buf) {
		if rd.start > 0 {
			n := copy(rd.buf, rd.buf[rd.start:rd.end])
			rd.scanned -= rd.start
			rd.start, rd.end = 0, n
		} else {
			nb := make([]byte, 2*len(rd.buf))
			copy(nb, rd.buf[:rd.end])
			rd.buf = nb
		}
	}
	n, err := rd.r.Read(rd.buf[rd.end:])
	rd.end += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// next parses the next complete request in the buffer and returns its
// arguments, which stay valid until the next call to fill or reset, so that
// a whole pipelined batch can be parsed before it runs. It returns nil and
// no error when the buffer holds no complete request; empty requests ("*0",
// blank lines) are skipped as Redis does.
func (rd *reader) next() ([][]byte, error) {
	for rd.start < rd.end {
		mark := len(rd.args)
		var n int
		var err error
		if rd.buf[rd.start] == '*' {
			n, err = rd.parseMultibulk(rd.buf[rd.start:rd.end])
		} else {
			n, err = rd.parseInline(rd.buf[rd.start:rd.end])
		}
		if err != nil || n == 0 {
			rd.args = rd.args[:mark]
			return nil, err
		}
		rd.start += n
		rd.scanned = rd.start
		if len(rd.args) > mark {
			return rd.args[mark:len(rd.args):len(rd.args)], nil
		}
	}
	return nil, nil
}

// parseMultibulk parses "*<n>\r\n" and n bulk strings at the front of b,
// appending them to rd.args. It returns the bytes consumed, 0 if b is
// incomplete.
func (rd *reader) parseMultibulk(b []byte) (int, error) {
	line, pos, err := crlfLine(b, 1, errMultibulkLength)
	if pos == 0 {
		return 0, err
	}
	count, ok := parseInt(line)
	if !ok || count > maxMultibulk {
		return 0, errMultibulkLength
	}
	for i := int64(0); i < count; i++ {
		if pos >= len(b) {
			return 0, nil
		}
		if b[pos] != '$' {
			return 0, errExpectedDollar(b[pos])
		}
		line, next, err := crlfLine(b, pos+1, errBulkLength)
		if next == 0 {
			return 0, err
		}
		size, ok := parseInt(line)
		switch {
		case !ok || size < 0:
			return 0, errBulkLength
		case size > int64(rd.max):
			return 0, errTooBig
		}
		end := next + int(size)
		if end+2 > len(b) {
			return 0, nil
		}
		if b[end] != '\r' || b[end+1] != '\n' {
			return 0, errBulkLength
		}
		rd.args = append(rd.args, b[next:end:end])
		pos = end + 2
	}
	return pos, nil
}

// crlfLine returns the line of b from i to the next "\r\n" and the offset
// after it; next is 0 if the line is incomplete. A newline without a
// carriage return, or a length line too long to hold a number, is bad.
func crlfLine(b []byte, i int, bad error) (line []byte, next int, err error) {
	for j := i; j < len(b); j++ {
		if b[j] == '\n' {
			if j == i || b[j-1] != '\r' {
				return nil, 0, bad
			}
			return b[i : j-1], j + 1, nil
		}
		if j-i > 32 {
			return nil, 0, bad
		}
	}
	return nil, 0, nil
}

// parseInline parses one inline command line at the front of b, appending
// its arguments to rd.args and splitting it as Redis's sdssplitargs does: arguments separated
// by spaces, "double quotes" with \n \r \t \b \a \\ \" and \xHH escapes,
// 'single quotes' with \' only. It returns the bytes consumed, 0 if the
// line is incomplete.
func (rd *reader) parseInline(b []byte) (int, error) {
	from := max(rd.scanned-rd.start, 0)
	nl := -1
	for j := from; j < len(b); j++ {
		if b[j] == '\n' {
			nl = j
			break
		}
	}
	if nl < 0 {
		rd.scanned = rd.start + len(b)
		return 0, nil
	}
	line := b[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if err := rd.splitInline(line); err != nil {
		return 0, err
	}
	return nl + 1, nil
}

func (rd *reader) splitInline(line []byte) error {
	for i := 0; ; {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return nil
		}
		if line[i] != '"' && line[i] != '\'' {
			j := i
			for j < len(line) && !isSpace(line[j]) {
				j++
			}
			rd.args = append(rd.args, line[i:j:j])
			i = j
			continue
		}
		start := len(rd.inline)
		n, err := rd.unquote(line[i:])
		if err != nil {
			return err
		}
		// rd.inline may have moved while growing; the slices taken before
		// keep the old array alive and stay valid.
		rd.args = append(rd.args, rd.inline[start:len(rd.inline):len(rd.inline)])
		i += n
	}
}

// unquote appends the quoted argument at the front of s to rd.inline and
// returns the bytes it took, including the closing quote.
func (rd *reader) unquote(s []byte) (int, error) {
	q := s[0]
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			if i+1 < len(s) && !isSpace(s[i+1]) {
				return 0, errUnbalancedQuotes
			}
			return i + 1, nil
		case c == '\\' && i+1 < len(s) && q == '\'' && s[i+1] == '\'':
			c, i = '\'', i+1
		case c == '\\' && i+3 < len(s) && q == '"' && s[i+1] == 'x' && isHex(s[i+2]) && isHex(s[i+3]):
			c, i = unhex(s[i+2])<<4|unhex(s[i+3]), i+3
		case c == '\\' && i+1 < len(s) && q == '"':
			i++
			c = s[i]
			switch c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'a':
				c = '\a'
			}
		}
		rd.inline = append(rd.inline, c)
	}
	return 0, errUnbalancedQuotes
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
