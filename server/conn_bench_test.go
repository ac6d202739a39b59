package server

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/rlserver/rlserver/shards"
)

// pipelineClient sends batches of pipelined RL.CHECKs over a real TCP
// connection and waits for their replies, without allocating.
type pipelineClient struct {
	nc      net.Conn
	batches [][]byte // pre-encoded batches over distinct keys
	buf     []byte
	next    int
}

func newPipelineClient(tb testing.TB, addr string, depth, keys int) *pipelineClient {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	c := &pipelineClient{nc: nc, buf: make([]byte, 64<<10)}
	for k := 0; k < keys; k += depth {
		var b bytes.Buffer
		for i := 0; i < depth; i++ {
			b.WriteString(resp("RL.CHECK", fmt.Sprintf("key:%012d", k+i), "token", "1000000", "60"))
		}
		c.batches = append(c.batches, b.Bytes())
	}
	return c
}

// roundTrip sends one batch of depth checks and reads the depth replies:
// each is an array of 5 integers, 6 lines.
func (c *pipelineClient) roundTrip(tb testing.TB, depth int) {
	batch := c.batches[c.next]
	c.next = (c.next + 1) % len(c.batches)
	if _, err := c.nc.Write(batch); err != nil {
		tb.Fatal(err)
	}
	for lines := 0; lines < 6*depth; {
		n, err := c.nc.Read(c.buf)
		if err != nil {
			tb.Fatal(err)
		}
		lines += bytes.Count(c.buf[:n], []byte{'\n'})
	}
}

// BenchmarkConnCheck measures RL.CHECK over the real connection path:
// socket read, RESP parsing, dispatch, the shard, the reply and the socket
// write, pipelined 16 deep over 10,000 keys. -benchmem counts every
// allocation of the process, server and client.
func BenchmarkConnCheck(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprintf("P%d", depth), func(b *testing.B) {
			_, addr := startServer(b, Config{Limiter: shards.New(0)})
			c := newPipelineClient(b, addr, depth, 10000)
			for range c.batches {
				c.roundTrip(b, depth) // create every key, grow every buffer
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += depth {
				c.roundTrip(b, depth)
			}
		})
	}
}

// TestConnCheckDoesNotAllocate: in steady state, RL.CHECKs over a real
// connection allocate nothing, measured over the whole process.
func TestConnCheckDoesNotAllocate(t *testing.T) {
	_, addr := startServer(t, Config{Limiter: shards.New(0)})
	const depth = 16
	c := newPipelineClient(t, addr, depth, 4096)
	for i := 0; i < 2*len(c.batches); i++ {
		c.roundTrip(t, depth)
	}
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const batches = 2000
	for i := 0; i < batches; i++ {
		c.roundTrip(t, depth)
	}
	runtime.ReadMemStats(&after)
	// A few allocations by the runtime itself (timers, the netpoller) are
	// not per check; one per check would be 32,000.
	if n := after.Mallocs - before.Mallocs; n > 50 {
		t.Fatalf("%d allocations for %d checks", n, batches*depth)
	}
}

// BenchmarkConnCheckHotKeys is BenchmarkConnCheck's pipelined case with
// the hot-key sketch on and off, for an A/B comparison in one run
// (-count 6, then benchstat): over 100,000 keys, nearly every check is of
// a key the sketch does not monitor, its dearest case.
func BenchmarkConnCheckHotKeys(b *testing.B) {
	const depth, keys = 16, 100_000
	for _, off := range []bool{false, true} {
		b.Run(fmt.Sprintf("sketch=%v", !off), func(b *testing.B) {
			_, addr := startServer(b, Config{Limiter: shards.NewStore(shards.Options{NoHotKeys: off})})
			c := newPipelineClient(b, addr, depth, keys)
			for range c.batches {
				c.roundTrip(b, depth)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += depth {
				c.roundTrip(b, depth)
			}
		})
	}
}
