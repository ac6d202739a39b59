package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

func TestCallRoundTrips(t *testing.T) {
	srv := newMux(t, Options{Handler: echo(nil)})
	cli := newMux(t, Options{})
	mustEcho(t, cli, srv.Advertise(), "hello")
	mustEcho(t, cli, srv.Advertise(), "")
	mustEcho(t, srv, srv.Advertise(), "to myself")

	for _, msg := range []string{"MOVED 123 127.0.0.1:7001", "TRYAGAIN group 3 is electing", "ERR x", ""} {
		_, err := call(cli, srv.Advertise(), "fail", msg, 5*time.Second)
		var re *RemoteError
		if !errors.As(err, &re) || re.Msg != msg || err.Error() != msg {
			t.Fatalf("fail %q: got %#v", msg, err)
		}
		if errors.Is(err, ErrUnreachable) {
			t.Fatalf("a remote error wraps ErrUnreachable: %v", err)
		}
	}

	big := bytes.Repeat([]byte("0123456789abcdef"), 200_000) // 3.2 MB: the streamed path
	got, err := cli.Call(context.Background(), srv.Advertise(), "echo", big)
	if err != nil || !bytes.Equal(got, append([]byte("echo:"), big...)) {
		t.Fatalf("big echo: %d bytes, %v", len(got), err)
	}
}

func TestCallCarriesDeadline(t *testing.T) {
	srv := newMux(t, Options{Handler: echo(nil)})
	cli := newMux(t, Options{})
	got, err := cli.Call(context.Background(), srv.Advertise(), "deadline", nil)
	if err != nil || string(got) != "none" {
		t.Fatalf("no deadline: got %q, %v", got, err)
	}
	s, err := call(cli, srv.Advertise(), "deadline", "", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	left, err := time.ParseDuration(s)
	if err != nil || left <= 0 || left > 3*time.Second {
		t.Fatalf("handler's time left %q (%v), caller's 3s", s, err)
	}
}

func TestCallBeforeHandler(t *testing.T) {
	srv := newMux(t, Options{})
	cli := newMux(t, Options{})
	_, err := call(cli, srv.Advertise(), "echo", "x", 5*time.Second)
	var re *RemoteError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "TRYAGAIN ") {
		t.Fatalf("before Handle: got %v", err)
	}
	srv.Handle(echo(nil))
	mustEcho(t, cli, srv.Advertise(), "after")
}

func TestCallConcurrent(t *testing.T) {
	srv := newMux(t, Options{Handler: echo(nil)})
	cli := newMux(t, Options{})
	const callers, calls = 64, 200
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				body := fmt.Sprintf("%d-%d", c, i)
				got, err := call(cli, srv.Advertise(), "echo", body, 10*time.Second)
				if err != nil || got != "echo:"+body {
					errs <- fmt.Errorf("caller %d call %d: got %q, %v", c, i, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCallUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	dead := newMux(t, Options{Handler: echo(nil)})
	deadAddr := dead.Advertise()
	dead.Close()

	const dialTimeout = 500 * time.Millisecond
	cli := newMux(t, Options{DialTimeout: dialTimeout})
	for _, addr := range []string{refused, deadAddr, "127.0.0.1:notaport"} {
		start := time.Now()
		_, err := call(cli, addr, "echo", "x", time.Minute)
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("call to %s: got %v, want ErrUnreachable", addr, err)
		}
		if took := time.Since(start); took > dialTimeout+5*time.Second { // a call that waited for its context would take a minute
			t.Fatalf("call to %s failed after %v, dial timeout %v", addr, took, dialTimeout)
		}
	}
}

func TestCallContextEnds(t *testing.T) {
	release := make(chan struct{})
	srv := newMux(t, Options{Handler: echo(release)})
	cli := newMux(t, Options{MaxIdlePerPeer: 1})
	mustEcho(t, cli, srv.Advertise(), "warm")

	start := time.Now()
	_, err := call(cli, srv.Advertise(), "slow", "x", 100*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("slow call: got %v, want DeadlineExceeded and ErrUnreachable", err)
	}
	if took := time.Since(start); took > 5*time.Second { // a call that ignored its context would wait for release, never
		t.Fatalf("slow call returned after %v, ctx deadline 100ms", took)
	}
	mustEcho(t, cli, srv.Advertise(), "after the timeout")

	// A slow call in flight on the one pooled connection delays no other.
	slowErr := make(chan error, 1)
	go func() {
		_, err := call(cli, srv.Advertise(), "slow", "y", 10*time.Second)
		slowErr <- err
	}()
	for i := range 20 {
		mustEcho(t, cli, srv.Advertise(), fmt.Sprint("beside the slow one ", i))
	}
	close(release) // both slow handlers: the first one's caller left, not its handler
	if err := <-slowErr; err != nil {
		t.Fatalf("released slow call: %v", err)
	}

	// A ctx already ended sends nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cli.Call(ctx, srv.Advertise(), "echo", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled ctx: got %v", err)
	}
}

func TestCallFrameLimit(t *testing.T) {
	const limit = 1024
	srv := newMux(t, Options{Handler: echo(nil), MaxFrame: limit})
	small := newMux(t, Options{MaxFrame: limit})
	large := newMux(t, Options{})

	// The caller refuses to send a request above its own limit.
	_, err := small.Call(context.Background(), srv.Advertise(), "echo", make([]byte, limit))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("request above the caller's limit: got %v", err)
	}
	_, err = small.Call(context.Background(), srv.Advertise(), strings.Repeat("m", 256), nil)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("method name of 256 bytes: got %v", err)
	}
	// The server refuses a request above its limit, closing the connection.
	_, err = call(large, srv.Advertise(), "echo", strings.Repeat("x", 4*limit), 5*time.Second)
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("request above the server's limit: got %v", err)
	}
	mustEcho(t, large, srv.Advertise(), "small again")
	// A reply above the server's limit becomes an error reply.
	_, err = call(large, srv.Advertise(), "grow", strings.Repeat("x", 600), 5*time.Second)
	var re *RemoteError
	if !errors.As(err, &re) || !strings.Contains(re.Msg, "frame limit") {
		t.Fatalf("reply above the server's limit: got %v", err)
	}
	// A reply above the caller's limit fails the call.
	big := newMux(t, Options{Handler: echo(nil)})
	_, err = call(small, big.Advertise(), "grow", strings.Repeat("x", 600), 5*time.Second)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("reply above the caller's limit: got %v", err)
	}
	mustEcho(t, small, big.Advertise(), "small again")
}

// TestFrameNotAllocated announces frames the server must not allocate:
// 4 GiB (above MaxFrame) and 60 MiB (below it, but never sent).
func TestFrameNotAllocated(t *testing.T) {
	srv := newMux(t, Options{Handler: echo(nil)})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)

	c := rawConn(t, srv, kindRPC, 0)
	c.Write([]byte{0xff, 0xff, 0xff, 0xf0})
	expectClosedBy(t, c, 5*time.Second)

	stall := rawConn(t, srv, kindRPC, 0)
	stall.Write([]byte{0x03, 0xc0, 0x00, 0x00, 1, 2, 3}) // 60 MiB announced, 3 bytes sent
	mustEcho(t, newMux(t, Options{}), srv.Advertise(), "meanwhile")

	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Fatalf("the server allocated %d bytes", grew)
	}
	stall.Close()
}

func TestCloseFailsCalls(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newMux(t, Options{Handler: echo(release)})
	cli, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustEcho(t, cli, srv.Advertise(), "warm")
	inflight := make(chan error, 1)
	go func() {
		_, err := call(cli, srv.Advertise(), "slow", "x", time.Minute)
		inflight <- err
	}()
	testutil.WaitFor(t, 5*time.Second, "the slow call to be in flight", func() bool {
		cli.pmu.RLock()
		defer cli.pmu.RUnlock()
		for _, p := range cli.peers {
			for i := range p.slots {
				s := &p.slots[i]
				s.mu.Lock()
				n := 0
				if s.cc != nil {
					s.cc.mu.Lock()
					n = len(s.cc.calls)
					s.cc.mu.Unlock()
				}
				s.mu.Unlock()
				if n > 0 {
					return true
				}
			}
		}
		return false
	})
	if err := cli.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := cli.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := <-inflight; !errors.Is(err, ErrClosed) {
		t.Fatalf("call in flight at Close: got %v", err)
	}
	if _, err := call(cli, srv.Advertise(), "echo", "x", time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: got %v", err)
	}
}

func BenchmarkCall(b *testing.B) {
	srv, err := Listen("127.0.0.1:0", Options{Handler: echo(nil)})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cli, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	body := make([]byte, 200)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cli.Call(context.Background(), srv.Advertise(), "charge", body); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
