package redisfuzz

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/values"
)

// Conn is a RESP2 or RESP3 client connection that returns replies as
// values.Reply trees, keeping what a comparison needs to see: status
// against bulk strings, null bulk strings against null arrays, RESP3
// doubles and maps. It is not safe for concurrent use.
type Conn struct {
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	resp int
}

// Dial connects to addr and, for resp 3, switches the connection to RESP3
// with HELLO 3.
func Dial(addr string, resp int) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	conn := &Conn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c), resp: 2}
	if resp == 3 {
		r, err := conn.Do([]byte("HELLO"), []byte("3"))
		if err != nil {
			c.Close()
			return nil, err
		}
		if r.Kind == values.Error {
			c.Close()
			return nil, fmt.Errorf("HELLO 3: %s", r.Str)
		}
		conn.resp = 3
	}
	return conn, nil
}

// RESP returns the protocol version the connection speaks.
func (c *Conn) RESP() int { return c.resp }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// Do sends one command and reads its reply. An error reply is a Reply of
// kind Error, not an error: the error is for the connection failing.
func (c *Conn) Do(args ...[]byte) (values.Reply, error) {
	rs, err := c.Pipeline([][][]byte{args})
	if err != nil {
		return values.Reply{}, err
	}
	return rs[0], nil
}

// Pipeline sends the commands together and reads their replies.
func (c *Conn) Pipeline(cmds [][][]byte) ([]values.Reply, error) {
	if err := c.c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	for _, args := range cmds {
		c.w.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
		for _, a := range args {
			c.w.WriteString("$" + strconv.Itoa(len(a)) + "\r\n")
			c.w.Write(a)
			c.w.WriteString("\r\n")
		}
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	out := make([]values.Reply, len(cmds))
	for i := range out {
		r, err := readReply(c.r)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// readReply reads one RESP2 or RESP3 value. Attributes are skipped, sets
// and pushes read as arrays, booleans as integers, big numbers as bulk
// strings.
func readReply(r *bufio.Reader) (values.Reply, error) {
	line, err := readLine(r)
	if err != nil {
		return values.Reply{}, err
	}
	if len(line) == 0 {
		return values.Reply{}, errors.New("redisfuzz: empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return values.Reply{Kind: values.Status, Str: body}, nil
	case '-':
		return values.Reply{Kind: values.Error, Str: body}, nil
	case ':':
		n, err := strconv.ParseInt(string(body), 10, 64)
		return values.IntReply(n), err
	case '#':
		if string(body) == "t" {
			return values.IntReply(1), nil
		}
		return values.IntReply(0), nil
	case '_':
		return values.NilReply(), nil
	case ',':
		return readDouble(body)
	case '(':
		return values.BulkReply(body), nil
	case '$', '=', '!':
		return readBulk(r, line)
	case '*', '~', '>', '%', '|':
		return readAggregate(r, line)
	}
	return values.Reply{}, fmt.Errorf("redisfuzz: unknown reply %q", line)
}

func readDouble(body []byte) (values.Reply, error) {
	var f float64
	var err error
	switch string(body) {
	case "inf":
		f = math.Inf(1)
	case "-inf":
		f = math.Inf(-1)
	default:
		f, err = strconv.ParseFloat(string(body), 64)
	}
	return values.Reply{Kind: values.Double, Float: f}, err
}

func readBulk(r *bufio.Reader, line []byte) (values.Reply, error) {
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil {
		return values.Reply{}, err
	}
	if n < 0 {
		return values.NilReply(), nil
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return values.Reply{}, err
	}
	if line[0] == '!' {
		return values.Reply{Kind: values.Error, Str: b[:n]}, nil
	}
	return values.BulkReply(b[:n]), nil
}

func readAggregate(r *bufio.Reader, line []byte) (values.Reply, error) {
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil {
		return values.Reply{}, err
	}
	if n < 0 {
		return values.NilArrayReply(), nil
	}
	count := n
	if line[0] == '%' || line[0] == '|' {
		count = 2 * n
	}
	elems := make([]values.Reply, count)
	for i := range elems {
		if elems[i], err = readReply(r); err != nil {
			return values.Reply{}, err
		}
	}
	switch line[0] {
	case '|': // an attribute: the value follows
		return readReply(r)
	case '%':
		return values.Reply{Kind: values.Map, Elems: elems}, nil
	}
	return values.ArrayReply(elems...), nil
}

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("redisfuzz: bad reply line %q", line)
	}
	return line[:len(line)-2], nil
}

// Doer returns a Doer that sends each command on c, for Compare.
func (c *Conn) Doer() Doer {
	return func(args [][]byte) (values.Reply, error) { return c.Do(args...) }
}
