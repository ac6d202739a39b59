package script

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/values"
)

// A RESP client for the tests: it talks to a real redis-server, returns
// replies both as raw bytes (to compare byte for byte) and as
// values.Reply trees (to feed the engine).

type respConn struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	resp int
}

// dialRedis connects to addr speaking RESP2, or RESP3 after HELLO 3.
func dialRedis(t testing.TB, addr string, resp int) *respConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &respConn{t: t, c: c, r: bufio.NewReader(c), resp: 2}
	if resp == 3 {
		rc.do("HELLO", "3")
		rc.resp = 3
	}
	return rc
}

// send writes one command.
func (rc *respConn) send(args ...[]byte) {
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	rc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// doRaw sends a command and returns its reply's bytes and tree.
func (rc *respConn) doRaw(args ...[]byte) ([]byte, values.Reply) {
	rc.send(args...)
	var raw bytes.Buffer
	r, err := readReply(rc.r, &raw)
	if err != nil {
		rc.t.Fatalf("read reply to %q: %v", args, err)
	}
	return raw.Bytes(), r
}

// do sends a command of strings and returns its reply.
func (rc *respConn) do(args ...string) values.Reply {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	_, r := rc.doRaw(bs...)
	return r
}

// readReply reads one RESP2 or RESP3 reply, copying its bytes to raw.
func readReply(br *bufio.Reader, raw *bytes.Buffer) (values.Reply, error) {
	line, err := br.ReadBytes('\n')
	if err != nil {
		return values.Reply{}, err
	}
	raw.Write(line)
	if len(line) < 3 {
		return values.Reply{}, fmt.Errorf("short line %q", line)
	}
	typ, body := line[0], string(line[1:len(line)-2])
	switch typ {
	case '+':
		return values.Reply{Kind: values.Status, Str: []byte(body)}, nil
	case '-':
		return values.Reply{Kind: values.Error, Str: []byte(body)}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		return values.Reply{Kind: values.Int, Int: n}, err
	case '_':
		return values.Reply{Kind: values.Nil}, nil
	case '#':
		n := int64(0)
		if body == "t" {
			n = 1
		}
		return values.Reply{Kind: KindBool, Int: n}, nil
	case ',':
		f, _ := str2number(body)
		return values.Reply{Kind: values.Double, Float: f}, nil
	case '(':
		return values.Reply{Kind: KindBigNumber, Str: []byte(body)}, nil
	case '$', '=':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return values.Reply{Kind: values.Nil}, nil
		}
		data := make([]byte, n+2)
		if _, err := readFull(br, data); err != nil {
			return values.Reply{}, err
		}
		raw.Write(data)
		kind := values.Bulk
		if typ == '=' {
			kind = KindVerbatim
		}
		return values.Reply{Kind: kind, Str: data[:n]}, nil
	case '*', '%', '~', '>', '|':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return values.Reply{Kind: values.NilArray}, nil
		}
		count := n
		if typ == '%' || typ == '|' {
			count = 2 * n
		}
		elems := make([]values.Reply, count)
		for i := range elems {
			if elems[i], err = readReply(br, raw); err != nil {
				return values.Reply{}, err
			}
		}
		kind := map[byte]values.ReplyKind{'*': values.Array, '%': values.Map, '~': KindSet, '>': values.Array}[typ]
		if typ == '|' { // an attribute: the reply follows it
			return readReply(br, raw)
		}
		return values.Reply{Kind: kind, Elems: elems}, nil
	}
	return values.Reply{}, fmt.Errorf("unknown reply type %q", line)
}

func readFull(br *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := br.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// writeReply encodes r as a server speaking resp writes it: the writer the
// server will have, for comparing the engine's replies with Redis's bytes.
func writeReply(b []byte, r values.Reply, resp int) []byte {
	line := func(prefix byte, s string) { b = append(append(append(b, prefix), s...), '\r', '\n') }
	header := func(prefix byte, n int) { line(prefix, strconv.Itoa(n)) }
	switch r.Kind {
	case values.Status:
		line('+', string(r.Str))
	case values.Error:
		line('-', string(r.Str))
	case values.Int:
		line(':', strconv.FormatInt(r.Int, 10))
	case values.Bulk:
		header('$', len(r.Str))
		b = append(append(b, r.Str...), '\r', '\n')
	case values.Nil:
		if resp == 3 {
			line('_', "")
		} else {
			line('$', "-1")
		}
	case values.NilArray:
		if resp == 3 {
			line('_', "")
		} else {
			line('*', "-1")
		}
	case values.Array, values.Map, KindSet:
		n, prefix := len(r.Elems), byte('*')
		if resp == 3 && r.Kind == values.Map {
			n, prefix = n/2, '%'
		}
		if resp == 3 && r.Kind == KindSet {
			prefix = '~'
		}
		header(prefix, n)
		for _, e := range r.Elems {
			b = writeReply(b, e, resp)
		}
	case values.Double:
		line(',', string(appendG(nil, r.Float, 17, false, false)))
	case KindBool:
		if r.Int != 0 {
			line('#', "t")
		} else {
			line('#', "f")
		}
	case KindBigNumber:
		line('(', string(r.Str))
	case KindVerbatim:
		header('=', len(r.Str))
		b = append(append(b, r.Str...), '\r', '\n')
	default:
		panic(fmt.Sprintf("reply kind %d", r.Kind))
	}
	return b
}

// forwardCaller is a Caller that runs the commands on a real redis-server:
// with it, only the Lua engine differs between a script run by Redis and
// the same script run by the engine.
type forwardCaller struct {
	conns    map[int]*respConn
	commands map[string]values.Command
	log      []string // the commands called, for the interchangeability test
}

// newForwardCaller connects to addr twice (RESP2 and RESP3) and reads the
// server's command table.
func newForwardCaller(t testing.TB, addr string) *forwardCaller {
	f := &forwardCaller{conns: map[int]*respConn{2: dialRedis(t, addr, 2), 3: dialRedis(t, addr, 3)}, commands: map[string]values.Command{}}
	for _, info := range f.conns[2].do("COMMAND").Elems {
		name := string(info.Elems[0].Str)
		cmd := values.Command{Name: name, Arity: int(info.Elems[1].Int)}
		for _, flag := range info.Elems[2].Elems {
			switch string(flag.Str) {
			case "write":
				cmd.Flags |= values.Write
			case "readonly":
				cmd.Flags |= values.ReadOnly
			case "denyoom":
				cmd.Flags |= values.DenyOOM
			case "fast":
				cmd.Flags |= values.Fast
			case "noscript":
				cmd.Flags |= values.NoScript
			}
		}
		f.commands[name] = cmd
	}
	return f
}

func (f *forwardCaller) Command(name []byte) (values.Command, bool) {
	c, ok := f.commands[strings.ToLower(string(name))]
	return c, ok
}

func (f *forwardCaller) Call(args [][]byte, resp int) values.Reply {
	f.log = append(f.log, fmt.Sprintf("%q", args))
	_, r := f.conns[resp].doRaw(args...)
	return r
}

// startRedis starts a redis-server for the test.
func startRedis(t testing.TB) string {
	t.Helper()
	return redistest.Start(t)
}
