package server

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/shards"
)

// readAll reads until the server closes the connection (or 5 s pass).
func readAll(t *testing.T, nc net.Conn) string {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("reading until close: %v (got %q)", err, b)
	}
	return string(b)
}

func TestProtocolErrorsCloseOnlyThatConnection(t *testing.T) {
	cases := []struct{ name, send, want string }{
		{"bad multibulk length", "*abc\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"bad bulk length", "*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"missing dollar", "*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
		{"negative bulk", "*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
	}
	_, addr := startServer(t, Config{})
	bystander := dialRaw(t, addr)
	bystander.roundTrip(resp("PING"), "+PONG\r\n")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			io.WriteString(nc, c.send)
			if got := readAll(t, nc); got != c.want {
				t.Fatalf("got %q, want %q then close", got, c.want)
			}
			bystander.roundTrip(resp("PING"), "+PONG\r\n")
		})
	}
}

func TestGarbageBytesGetAnErrorAndChangeNothing(t *testing.T) {
	_, addr := startServer(t, Config{Clock: fakeClock()})
	c := dialRaw(t, addr)
	// Inline garbage is an unknown command; the connection stays usable.
	c.roundTrip("\x00\x01\xfe garbage\r\n", "-ERR unknown command '\x00\x01\xfe', with args beginning with: 'garbage' \r\n")
	c.roundTrip(resp("DBSIZE"), ":0\r\n")
	c.roundTrip(resp("PING"), "+PONG\r\n")
}

func TestOversizedRequestIsRefused(t *testing.T) {
	_, addr := startServer(t, Config{MaxRequest: 64 << 10})
	bystander := dialRaw(t, addr)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A bulk string announced as 1 GB, then streamed: the server stops
	// reading after 64 KiB, answers, and closes.
	io.WriteString(nc, "*2\r\n$4\r\nECHO\r\n$1000000000\r\n")
	go func() {
		chunk := bytes.Repeat([]byte("x"), 8<<10)
		for i := 0; i < 1024; i++ {
			if _, err := nc.Write(chunk); err != nil {
				return
			}
		}
	}()
	got := readAll(t, nc)
	if got != "-ERR Protocol error: request is larger than the server accepts\r\n" {
		t.Fatalf("got %q", got)
	}
	bystander.roundTrip(resp("PING"), "+PONG\r\n")
}

func TestEndlessInlineLineIsRefused(t *testing.T) {
	_, addr := startServer(t, Config{MaxRequest: 32 << 10})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go nc.Write([]byte(strings.Repeat("A", 256<<10)))
	if got := readAll(t, nc); !strings.Contains(got, "request is larger than the server accepts") {
		t.Fatalf("got %q", got)
	}
}

// blockingLimiter holds every Check until release is closed.
type blockingLimiter struct {
	Limiter
	entered chan struct{}
	release chan struct{}
}

func (b *blockingLimiter) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.Limiter.Check(key, a, p, cost, now)
}

func TestShutdownFinishesInFlightCommands(t *testing.T) {
	lim := &blockingLimiter{Limiter: shards.New(1), entered: make(chan struct{}, 1), release: make(chan struct{})}
	s, addr := startServer(t, Config{Clock: fakeClock(), Limiter: lim})
	c := dialRaw(t, addr)
	io.WriteString(c.nc, resp("RL.CHECK", "s", "fixed", "10", "1m")+resp("PING"))
	<-lim.entered // the check is in flight
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- s.Shutdown(ctx)
	}()
	// New connections are refused while the old one finishes.
	testutil.WaitFor(t, 5*time.Second, "the listener to refuse connections after Shutdown began", func() bool {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		nc.Close()
		return false
	})
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) before the in-flight command finished", err)
	default:
	}
	close(lim.release)
	if got, want := readAll(t, c.nc), ints(1, 10, 9, 0, 60000)+"+PONG\r\n"; got != want {
		t.Fatalf("in-flight replies = %q, want %q then close", got, want)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
