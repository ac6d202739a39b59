package transport

import (
	"context"
	"crypto/hmac"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// counting wraps echo, counting the calls it serves.
func counting(n *atomic.Int64) Handler {
	h := echo(nil)
	return func(ctx context.Context, method string, body []byte) ([]byte, error) {
		n.Add(1)
		return h(ctx, method, body)
	}
}

func TestSharedSecretCarriesCallsAndRaft(t *testing.T) {
	secret := []byte("s3cret")
	a := newMux(t, Options{Secret: secret})
	b := newMux(t, Options{Secret: secret, Handler: echo(nil)})
	mustEcho(t, a, b.Advertise(), "hello")

	lb := b.Stream(5)
	la := a.Stream(5)
	accepted := make(chan []byte, 1)
	go func() {
		c, err := lb.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		io.ReadFull(c, buf)
		accepted <- buf
	}()
	c, err := la.Dial(raft.ServerAddress(b.Advertise()), 5*time.Second)
	if err != nil {
		t.Fatalf("raft dial with the shared secret: %v", err)
	}
	defer c.Close()
	c.Write([]byte("raft"))
	select {
	case got := <-accepted:
		if string(got) != "raft" {
			t.Fatalf("the group's Accept read %q, want the raft bytes", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the raft connection never reached the group")
	}
}

// TestStrangersAreRefused: a mux with a secret serves nothing to a peer
// without it or with another, nor to a raw client that sends a valid
// header and a valid request; and a mux without a secret refuses a peer
// that has one. Every refusal is a closed connection before the handler.
func TestStrangersAreRefused(t *testing.T) {
	var served atomic.Int64
	b := newMux(t, Options{Secret: []byte("s3cret"), Handler: counting(&served)})
	for _, tc := range []struct {
		name   string
		secret []byte
	}{{"no secret", nil}, {"another secret", []byte("guess")}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newMux(t, Options{Secret: tc.secret})
			_, err := call(a, b.Advertise(), "echo", "x", 5*time.Second)
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("call: %v, want ErrUnreachable", err)
			}
			if _, err := a.Stream(1).Dial(raft.ServerAddress(b.Advertise()), 5*time.Second); err == nil && tc.secret != nil {
				t.Fatal("a raft dial with another secret succeeded")
			}
		})
	}
	t.Run("raw request", func(t *testing.T) {
		c := rawConn(t, b, kindRPC, 0)
		c.Write(rpcFrame(uint32(9+9+4+1), frameRequest, request(0, 4, "echox")))
		expectClosedBy(t, c, 5*time.Second)
	})
	t.Run("forged proof", func(t *testing.T) {
		c := dialRaw(t, b)
		h := encodeHeaderVersion(versionAuth, kindRPC, 0)
		c.Write(append(h[:], make([]byte, nonceLen)...))
		in := make([]byte, nonceLen+macLen)
		if _, err := io.ReadFull(c, in); err != nil {
			t.Fatalf("no challenge: %v", err)
		}
		// Reflecting the acceptor's own MAC must not pass for the dialer's.
		c.Write(in[nonceLen:])
		expectClosedBy(t, c, 5*time.Second)
	})
	if n := served.Load(); n != 0 {
		t.Fatalf("the handler served %d calls from strangers", n)
	}

	open := newMux(t, Options{Handler: counting(&served)})
	a := newMux(t, Options{Secret: []byte("s3cret")})
	if _, err := call(a, open.Advertise(), "echo", "x", 5*time.Second); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("a peer with a secret called a mux without: %v, want ErrUnreachable", err)
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("the handler served %d calls", n)
	}
}

// TestDialerChecksTheAcceptor: a listener that answers the challenge
// without the secret gets nothing from a dialer that has it.
func TestDialerChecksTheAcceptor(t *testing.T) {
	fake := newMux(t, Options{Secret: []byte("other")})
	m := newMux(t, Options{Secret: []byte("s3cret")})
	_, err := m.dial(fake.Advertise(), kindRPC, 0, 5*time.Second)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, errAuth) {
		t.Fatalf("dial to a listener with another secret: %v, want ErrUnreachable wrapping errAuth", err)
	}
}

func TestSignLabelsDiffer(t *testing.T) {
	h := encodeHeaderVersion(versionAuth, kindRPC, 0)
	d, a := make([]byte, nonceLen), make([]byte, nonceLen)
	if hmac.Equal(sign([]byte("k"), "rlmx acceptor", h, d, a), sign([]byte("k"), "rlmx dialer", h, d, a)) {
		t.Fatal("the two sides' MACs are equal: one could be reflected as the other")
	}
}

func TestSilentDialerIsDroppedDuringTheExchange(t *testing.T) {
	b := newMux(t, Options{Secret: []byte("s3cret"), HandshakeTimeout: 200 * time.Millisecond})
	c := dialRaw(t, b)
	h := encodeHeaderVersion(versionAuth, kindRPC, 0)
	c.Write(h[:]) // no nonce, ever
	expectClosedBy(t, c, 5*time.Second)
}
