package transport

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// newMux listens on 127.0.0.1:0 and closes the mux at the end of the test.
func newMux(t *testing.T, opts Options) *Mux {
	t.Helper()
	m, err := Listen("127.0.0.1:0", opts)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// echo replies "method:body"; method "deadline" replies the time left
// before ctx's deadline ("none" without one), "grow" replies body twice, "fail"
// returns body as an error, and "slow" waits for release (or ctx) first.
func echo(release <-chan struct{}) Handler {
	return func(ctx context.Context, method string, body []byte) ([]byte, error) {
		switch method {
		case "deadline":
			dl, ok := ctx.Deadline()
			if !ok {
				return []byte("none"), nil
			}
			return []byte(time.Until(dl).String()), nil
		case "grow":
			return append(body, body...), nil
		case "fail":
			return nil, errors.New(string(body))
		case "slow":
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return append([]byte(method+":"), body...), nil
	}
}

// call makes one call with a deadline of d.
func call(m *Mux, addr, method, body string, d time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	b, err := m.Call(ctx, addr, method, []byte(body))
	return string(b), err
}

// mustEcho checks one echo round trip from m to addr.
func mustEcho(t *testing.T, m *Mux, addr, body string) {
	t.Helper()
	got, err := call(m, addr, "echo", body, 5*time.Second)
	if err != nil || got != "echo:"+body {
		t.Fatalf("echo %q: got %q, %v", body, got, err)
	}
}

// expectClosedBy checks that the mux closes c within d: a read ends in EOF
// or a reset, not in the read deadline.
func expectClosedBy(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1024)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %v", d)
		}
		return
	}
}
