package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/shards"
)

// t0 is the fake clock of the table tests: a whole minute since the epoch.
const t0 = int64(1_700_000_040) * 1e9

// startServer runs a Server for cfg on a 127.0.0.1 port and stops it when
// the test ends. A nil Limiter gets a fresh shards.Store. A zero
// cfg.IOLoops takes $RLSERVER_TEST_IOLOOPS, so that `make test` runs the
// package once with event loops and once with a goroutine per connection.
func startServer(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Limiter == nil {
		cfg.Limiter = shards.New(16)
	}
	if cfg.IOLoops == 0 {
		if v := os.Getenv("RLSERVER_TEST_IOLOOPS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("RLSERVER_TEST_IOLOOPS=%q: %v", v, err)
			}
			cfg.IOLoops = n
		}
	}
	s := New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(ln); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	})
	return s, ln.Addr().String()
}

// fakeClock returns a Config clock fixed at t0.
func fakeClock() func() int64 { return func() int64 { return t0 } }

// rawConn is a client that writes raw bytes and reads raw replies.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	rd *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, rd: bufio.NewReader(nc)}
}

// roundTrip sends req and asserts that exactly want comes back.
func (c *rawConn) roundTrip(req, want string) {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.nc, req); err != nil {
		c.t.Fatalf("write %q: %v", req, err)
	}
	got := make([]byte, len(want))
	n, err := io.ReadFull(c.rd, got)
	if err != nil || string(got) != want {
		c.t.Fatalf("send %q\n got %q (err %v)\nwant %q", req, got[:n], err, want)
	}
	// Nothing more may follow.
	c.nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if extra, _ := c.rd.Peek(1); len(extra) > 0 {
		rest, _ := c.rd.Peek(c.rd.Buffered())
		c.t.Fatalf("send %q: unexpected extra reply bytes %q", req, rest)
	}
}

// resp encodes args as a RESP array of bulk strings.
func resp(args ...string) string {
	var b strings.Builder
	b.WriteString("*" + itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// ints encodes the RESP reply of an array of integers.
func ints(vals ...int64) string {
	var b strings.Builder
	b.WriteString("*" + itoa(len(vals)) + "\r\n")
	for _, v := range vals {
		b.WriteString(":" + strconv.FormatInt(v, 10) + "\r\n")
	}
	return b.String()
}
