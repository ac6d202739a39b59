package server

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
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

// BenchmarkConnCheckHotKeysPaired measures what the hot-key sketch costs
// the pipelined check path on a machine whose load drifts: two servers,
// the sketch on in one and off in the other, each with a client that
// pipelines 16 checks over 100,000 keys, take turns batch by batch (the
// order alternating), and each 64 batch pairs give one ratio of the time
// on to the time off. It reports the median ratio's excess as
// sketch-overhead-% (and ns per check of each side); slow drifts of the
// machine's load cancel out within a pair. RLSERVER_HOTKEYS_AA=1 turns the
// sketch off on both sides: an A/A run, which shows the method's bias.
func BenchmarkConnCheckHotKeysPaired(b *testing.B) {
	const depth, keys, chunk = 16, 100_000, 64
	_, addrOn := startServer(b, Config{Limiter: shards.NewStore(shards.Options{NoHotKeys: os.Getenv("RLSERVER_HOTKEYS_AA") != ""})})
	_, addrOff := startServer(b, Config{Limiter: shards.NewStore(shards.Options{NoHotKeys: true})})
	on, off := newPipelineClient(b, addrOn, depth, keys), newPipelineClient(b, addrOff, depth, keys)
	for range on.batches {
		on.roundTrip(b, depth)
		off.roundTrip(b, depth)
	}
	var ratios []float64
	var sumOn, sumOff, tOn, tOff time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		first, second, dFirst, dSecond := on, off, &tOn, &tOff
		if (i/depth)%2 == 1 {
			first, second, dFirst, dSecond = off, on, &tOff, &tOn
		}
		t := time.Now()
		first.roundTrip(b, depth)
		m := time.Now()
		second.roundTrip(b, depth)
		*dFirst += m.Sub(t)
		*dSecond += time.Since(m)
		if (i/depth+1)%chunk == 0 {
			ratios = append(ratios, float64(tOn)/float64(tOff))
			sumOn, sumOff, tOn, tOff = sumOn+tOn, sumOff+tOff, 0, 0
		}
	}
	if len(ratios) > 0 {
		slices.Sort(ratios)
		b.ReportMetric((ratios[len(ratios)/2]-1)*100, "sketch-overhead-%")
		n := float64(len(ratios) * chunk * depth)
		b.ReportMetric(float64(sumOn)/n, "ns/check-on")
		b.ReportMetric(float64(sumOff)/n, "ns/check-off")
	}
}
