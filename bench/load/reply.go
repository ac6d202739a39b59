package load

import (
	"errors"
	"io"
)

// replyReader reads RESP replies from a connection into one buffer and
// recognises complete replies without copying or allocating.
type replyReader struct {
	r     io.Reader
	buf   []byte
	start int
	end   int
}

var errProtocol = errors.New("load: malformed reply")

func newReplyReader(r io.Reader) *replyReader {
	return &replyReader{r: r, buf: make([]byte, 64<<10)}
}

// fill reads more bytes, compacting or growing the buffer first.
func (rr *replyReader) fill() error {
	if rr.start > 0 && rr.start == rr.end {
		rr.start, rr.end = 0, 0
	}
	if rr.end == len(rr.buf) {
		if rr.start > 0 {
			rr.end = copy(rr.buf, rr.buf[rr.start:rr.end])
			rr.start = 0
		} else {
			nb := make([]byte, 2*len(rr.buf))
			copy(nb, rr.buf[:rr.end])
			rr.buf = nb
		}
	}
	n, err := rr.r.Read(rr.buf[rr.end:])
	rr.end += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// next consumes and returns the next complete reply in the buffer (its
// first byte is its type: '+', '-', ':', '$', '*', ...), or ok=false if the
// buffer does not hold a complete reply yet. The bytes are valid until the
// next fill.
func (rr *replyReader) next() (reply []byte, ok bool, err error) {
	b := rr.buf[rr.start:rr.end]
	n, err := skipReply(b, 0)
	if err != nil || n < 0 {
		return nil, false, err
	}
	rr.start += n
	return b[:n], true, nil
}

// nextReply returns the next complete reply's bytes, reading as needed. The
// bytes are valid until the next call.
func (rr *replyReader) nextReply() ([]byte, error) {
	for {
		b := rr.buf[rr.start:rr.end]
		n, err := skipReply(b, 0)
		if err != nil {
			return nil, err
		}
		if n >= 0 {
			rr.start += n
			return b[:n], nil
		}
		if err := rr.fill(); err != nil {
			return nil, err
		}
	}
}

// skipReply returns the offset just past the reply starting at b[i], -1 if
// it is incomplete.
func skipReply(b []byte, i int) (int, error) {
	if i >= len(b) {
		return -1, nil
	}
	kind := b[i]
	line, next := lineAt(b, i+1)
	if next < 0 {
		return -1, nil
	}
	switch kind {
	case '+', '-', ':', '_', '#', ',', '(':
		return next, nil
	case '$', '!', '=':
		n, ok := atoi(line)
		if !ok {
			return 0, errProtocol
		}
		if n < 0 {
			return next, nil
		}
		end := next + n + 2
		if end > len(b) {
			return -1, nil
		}
		return end, nil
	case '*', '%', '~', '>':
		n, ok := atoi(line)
		if !ok {
			return 0, errProtocol
		}
		if kind == '%' {
			n *= 2
		}
		for j := 0; j < n; j++ {
			var err error
			if next, err = skipReply(b, next); next < 0 || err != nil {
				return next, err
			}
		}
		return next, nil
	}
	return 0, errProtocol
}

// lineAt returns the line starting at b[i] without its CRLF and the offset
// after it, or next = -1 if the line is incomplete.
func lineAt(b []byte, i int) (line []byte, next int) {
	for j := i; j+1 < len(b); j++ {
		if b[j] == '\r' && b[j+1] == '\n' {
			return b[i:j], j + 2
		}
	}
	return nil, -1
}

func atoi(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
