package transport

import (
	"bytes"
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testutil"
)

var seed = flag.Uint64("seed", 0, "seed of the random hostile input (0: a new one)")

// rawConn dials m and writes a header of kind and group.
func rawConn(t *testing.T, m *Mux, kind byte, group uint32) net.Conn {
	t.Helper()
	c := dialRaw(t, m)
	h := encodeHeader(kind, group)
	if _, err := c.Write(h[:]); err != nil {
		t.Fatal(err)
	}
	return c
}

// dialRaw opens a plain TCP connection to m, closed at the end of the test.
func dialRaw(t *testing.T, m *Mux) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", m.Advertise(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rpcFrame returns a raw frame: length, id, kind and rest as given.
func rpcFrame(length uint32, kind byte, rest []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, length)
	b = binary.BigEndian.AppendUint64(b, 1)
	return append(append(b, kind), rest...)
}

// request returns a request frame's payload: timeout, method length, and
// the rest.
func request(timeout uint64, mlen byte, rest string) []byte {
	return append(append(binary.BigEndian.AppendUint64(nil, timeout), mlen), rest...)
}

func TestHostileInput(t *testing.T) {
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %d)", s, s)
	rng := rand.New(rand.NewPCG(s, s))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}

	const handshake = 300 * time.Millisecond
	srv := newMux(t, Options{Handler: echo(nil), HandshakeTimeout: handshake, HoldTimeout: handshake})
	stream := srv.Stream(3)
	peer := newMux(t, Options{})

	good := encodeHeader(kindRaft, 3)
	rpc := encodeHeader(kindRPC, 0)
	withHeader := func(h [headerLen]byte, rest ...byte) []byte { return append(h[:], rest...) }
	cases := []struct {
		name string
		send []byte
	}{
		{"random bytes", random},
		{"wrong magic", append([]byte("RLMX"), good[4:]...)},
		{"wrong version", append(append(good[:4:4], 9), good[5:]...)},
		{"unknown kind", append(append(good[:5:5], 7), good[6:]...)},
		{"kind zero", append(append(good[:5:5], 0), good[6:]...)},
		{"rpc with a group", withHeader(encodeHeader(kindRPC, 5))},
		{"nothing", nil},
		{"half a header", good[:6]},
		{"raft for an unknown group", withHeader(encodeHeader(kindRaft, 99))},
		{"rpc then random bytes", append(rpc[:], random...)},
		{"rpc frame too short", withHeader(rpc, 0, 0, 0, 3, 1, 2, 3)},
		{"rpc frame of unknown kind", withHeader(rpc, rpcFrame(10, 9, []byte{0})...)},
		{"rpc reply to the server", withHeader(rpc, rpcFrame(9, frameReply, nil)...)},
		{"rpc method longer than frame", withHeader(rpc, rpcFrame(19, frameRequest, request(0, 200, "x"))...)},
		{"rpc request cut short", withHeader(rpc, rpcFrame(13, frameRequest, []byte{0, 0, 0, 0})...)},
		{"rpc request timeout above int64", withHeader(rpc, rpcFrame(22, frameRequest, request(1<<63, 4, "echo"))...)},
		{"rpc frame then silence", withHeader(rpc, rpcFrame(100, frameRequest, request(0, 4, "e"))...)},
	}
	var wg sync.WaitGroup
	for _, tc := range cases {
		wg.Go(func() {
			c := dialRaw(t, srv)
			if len(tc.send) > 0 {
				c.Write(tc.send)
			}
			if tc.name == "rpc then random bytes" {
				// Random bytes can frame as requests whose last one is cut
				// short (a length below MaxFrame, 1.6% of seeds): the mux
				// waits for the rest, as for "rpc frame then silence". The
				// peer hangs up, and whatever the bytes said, it is closed.
				c.(*net.TCPConn).CloseWrite()
			}
			if tc.name == "rpc frame then silence" {
				// A frame cut short is the caller's to finish: the mux keeps
				// waiting, like any server; closing it must not hurt.
				mustEcho(t, peer, srv.Advertise(), "beside a stalled frame")
				return
			}
			start := time.Now()
			expectClosedBy(t, c, 10*time.Second)
			if took := time.Since(start); took > handshake+5*time.Second {
				t.Errorf("%s: closed after %v", tc.name, took)
			}
		})
	}
	// Real peers keep being served while the hostile connections are open.
	mustEcho(t, peer, srv.Advertise(), "during")
	wg.Wait()
	mustEcho(t, peer, srv.Advertise(), "after")
	c, err := peer.Stream(3).Dial(raft.ServerAddress(srv.Advertise()), time.Second)
	if err != nil {
		t.Fatalf("raft dial after hostile input: %v", err)
	}
	defer c.Close()
	got, err := stream.Accept()
	if err != nil {
		t.Fatalf("raft accept after hostile input: %v", err)
	}
	got.Close()
}

// TestManySilentConns opens many connections that never speak: each is
// closed after the handshake timeout, and real calls go on meanwhile.
func TestManySilentConns(t *testing.T) {
	const handshake = 200 * time.Millisecond
	srv := newMux(t, Options{Handler: echo(nil), HandshakeTimeout: handshake})
	peer := newMux(t, Options{})
	conns := make([]net.Conn, 100)
	for i := range conns {
		conns[i] = dialRaw(t, srv)
	}
	mustEcho(t, peer, srv.Advertise(), "among silent connections")
	for _, c := range conns {
		expectClosedBy(t, c, 10*time.Second)
	}
	testutil.WaitFor(t, 5*time.Second, "the silent connections to be forgotten", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns) <= 2 // the peer's pooled RPC connections
	})
}

func FuzzParseHeader(f *testing.F) {
	h := encodeHeader(kindRaft, 7)
	f.Add(h[:])
	f.Add([]byte("rlmx\x01\x02\x00\x00\x00\x00"))
	f.Add([]byte("rlmx\x02\x01\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < headerLen {
			return
		}
		h, err := parseHeader([headerLen]byte(b[:headerLen]))
		if err != nil {
			return
		}
		if encodeHeaderVersion(h.version, h.kind, h.group) != [headerLen]byte(b[:headerLen]) {
			t.Fatalf("header %x decodes to %+v, which encodes differently", b[:headerLen], h)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add(rpcFrame(22, frameRequest, request(1e9, 4, "echo")))
	f.Add(rpcFrame(12, frameReply, []byte("abc")))
	f.Add(rpcFrame(9, frameError, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := readFrame(bytes.NewReader(b), 1<<16)
		if err != nil {
			return
		}
		if fr.kind != frameRequest && fr.kind != frameReply && fr.kind != frameError {
			t.Fatalf("accepted frame kind %d", fr.kind)
		}
	})
}
