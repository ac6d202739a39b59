package transport

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testutil"
)

// pipeCheck writes through a and reads it back from b.
func pipeCheck(t *testing.T, a, b net.Conn, msg string) {
	t.Helper()
	if _, err := a.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(b, got); err != nil || string(got) != msg {
		t.Fatalf("read %q, %v; want %q", got, err, msg)
	}
}

// accept runs l.Accept with a deadline.
func accept(t *testing.T, l net.Listener, d time.Duration) (net.Conn, error) {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.Accept()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-time.After(d):
		t.Fatalf("Accept did not return within %v", d)
		return nil, nil
	}
}

func TestStreamRouting(t *testing.T) {
	a := newMux(t, Options{})
	b := newMux(t, Options{})
	if a.Stream(1) != a.Stream(1) {
		t.Fatal("Stream(1) twice returned two layers")
	}
	if got := a.Stream(1).Addr().String(); got != a.Advertise() {
		t.Fatalf("layer Addr %q, want %q", got, a.Advertise())
	}
	b1, b2 := b.Stream(1), b.Stream(2)
	for _, g := range []struct {
		id uint32
		l  raft.StreamLayer
	}{{1, b1}, {2, b2}} {
		c, err := a.Stream(g.id).Dial(raft.ServerAddress(b.Advertise()), time.Second)
		if err != nil {
			t.Fatalf("dial group %d: %v", g.id, err)
		}
		s, err := accept(t, g.l, 5*time.Second)
		if err != nil {
			t.Fatalf("accept group %d: %v", g.id, err)
		}
		pipeCheck(t, c, s, "to the group")
		pipeCheck(t, s, c, "and back")
		c.Close()
		s.Close()
	}

	// Closing group 1's layer unregisters group 1 only.
	b1.Close()
	b1.Close()
	if _, err := b1.Accept(); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	c, err := a.Stream(2).Dial(raft.ServerAddress(b.Advertise()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := accept(t, b2, 5*time.Second); err != nil {
		t.Fatalf("group 2 after group 1 closed: %v", err)
	}
	c.Close()
	if b.Stream(1) == b1 {
		t.Fatal("Stream(1) after Close returned the closed layer")
	}
}

func TestStreamHeldUntilRegistered(t *testing.T) {
	a := newMux(t, Options{})
	b := newMux(t, Options{HoldTimeout: 10 * time.Second})
	c, err := a.Stream(5).Dial(raft.ServerAddress(b.Advertise()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.WaitFor(t, 5*time.Second, "the connection to be held", func() bool { return b.held.Load() == 1 })
	s, err := accept(t, b.Stream(5), 5*time.Second)
	if err != nil {
		t.Fatalf("accept after registering: %v", err)
	}
	defer s.Close()
	pipeCheck(t, c, s, "held, then delivered")
}

func TestStreamUnregisteredClosed(t *testing.T) {
	a := newMux(t, Options{})
	for _, hold := range []time.Duration{-1, 200 * time.Millisecond} {
		b := newMux(t, Options{HoldTimeout: hold})
		c, err := a.Stream(5).Dial(raft.ServerAddress(b.Advertise()), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		expectClosedBy(t, c, 10*time.Second)
		if took := time.Since(start); took > max(hold, 0)+5*time.Second {
			t.Fatalf("hold %v: closed after %v", hold, took)
		}
		testutil.WaitFor(t, 5*time.Second, "no held connections", func() bool { return b.held.Load() == 0 })
	}
}

func TestMuxClose(t *testing.T) {
	a := newMux(t, Options{})
	b, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := b.Stream(1)
	c, err := a.Stream(1).Dial(raft.ServerAddress(b.Advertise()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s, err := accept(t, l, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Stream(1).Dial(raft.ServerAddress(a.Advertise()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	accepted, err := accept(t, a.Stream(1), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := accept(t, l, 5*time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Accept after mux Close: %v", err)
	}
	if _, err := s.Write([]byte("x")); err == nil {
		t.Fatal("an accepted connection survived Close")
	}
	if _, err := out.Write([]byte("x")); err == nil {
		t.Fatal("a dialled connection survived Close")
	}
	expectClosedBy(t, c, 10*time.Second)
	expectClosedBy(t, accepted, 5*time.Second)
	if _, err := b.Stream(2).Dial(raft.ServerAddress(a.Advertise()), time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("Dial after Close: %v", err)
	}
	if _, err := b.Stream(2).Accept(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Accept of a layer made after Close: %v", err)
	}
	if _, err := a.Stream(1).Dial(raft.ServerAddress(b.Advertise()), time.Second); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Dial to a closed mux: %v", err)
	}
}

func TestAdvertise(t *testing.T) {
	m := newMux(t, Options{Advertise: "node1.example:0"})
	_, port, _ := net.SplitHostPort(m.Addr().String())
	if want := net.JoinHostPort("node1.example", port); m.Advertise() != want {
		t.Fatalf("Advertise %q, want %q", m.Advertise(), want)
	}
	m2 := newMux(t, Options{Advertise: "10.0.0.1:7000"})
	if m2.Advertise() != "10.0.0.1:7000" || m2.Stream(0).Addr().String() != "10.0.0.1:7000" {
		t.Fatalf("Advertise %q", m2.Advertise())
	}
	if _, err := Listen("127.0.0.1:0", Options{Advertise: "no port"}); err == nil {
		t.Fatal("a bad Advertise was accepted")
	}
}
