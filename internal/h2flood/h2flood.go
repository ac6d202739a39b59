// Package h2flood is a raw HTTP/2 client for tests that holds gRPC calls
// open: it sends the headers of calls and never their message, as an
// attacker who wants a server to keep state for calls that never come
// does.
package h2flood

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Flood is a raw HTTP/2 client that holds gRPC calls open: on each of its
// connections it sends the client preface and then HEADERS frames of
// calls (with a bearer token when it has one) and never a DATA frame. It
// reads and drops what the server sends, counting the streams the server
// ended.
type Flood struct {
	mu    sync.Mutex
	conns []net.Conn
	// Ended counts the streams the server ended (trailers, or a reset
	// without them); Gone the connections it closed or refused; Served
	// the connections it sent its SETTINGS on (it took them in).
	Ended  atomic.Int64
	Gone   atomic.Int64
	Served atomic.Int64
	wg     sync.WaitGroup
}

// ShouldRateLimit is the method the flood calls unless told otherwise.
const ShouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// Stall opens conns connections to addr, each with streams calls of
// method that send their headers (with "authorization: Bearer token" when
// token is not empty) and nothing more, and returns once every HEADERS
// frame is written (or its connection failed). Close ends them.
func Stall(addr, method, token string, conns, streams int) *Flood {
	f := &Flood{}
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.open(addr, method, token, streams)
		}()
	}
	wg.Wait()
	return f
}

// open dials one connection and writes its stalled streams.
func (f *Flood) open(addr, method, token string, streams int) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		f.Gone.Add(1)
		return
	}
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
	fr := http2.NewFramer(c, c)
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil || fr.WriteSettings() != nil {
		f.Gone.Add(1)
		return
	}
	f.wg.Add(1)
	go f.drain(fr)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := 0; i < streams; i++ {
		hb.Reset()
		for _, h := range [][2]string{{":method", "POST"}, {":scheme", "http"},
			{":path", method},
			{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
		}
		if token != "" {
			enc.WriteField(hpack.HeaderField{Name: "authorization", Value: "Bearer " + token})
		}
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndHeaders: true})
		if err != nil {
			return
		}
	}
}

// drain reads the server's frames until the connection ends, counting the
// streams it ended (it writes nothing: open owns the writes).
func (f *Flood) drain(fr *http2.Framer) {
	defer f.wg.Done()
	ended := map[uint32]bool{}
	for {
		fr2, err := fr.ReadFrame()
		if err != nil {
			f.Gone.Add(1)
			return
		}
		id := fr2.Header().StreamID
		switch fr2 := fr2.(type) {
		case *http2.SettingsFrame:
			if !fr2.IsAck() {
				f.Served.Add(1)
			}
			continue
		case *http2.RSTStreamFrame:
		case *http2.HeadersFrame:
			if !fr2.StreamEnded() {
				continue
			}
		default:
			continue
		}
		if !ended[id] {
			ended[id] = true
			f.Ended.Add(1)
		}
	}
}

// Close closes every connection and waits for their readers.
func (f *Flood) Close() {
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
