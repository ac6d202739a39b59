package server_test

import (
	"bufio"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testserver"
)

// BenchmarkCheckPipelinedMetrics measures what metrics cost on the check
// path: RL.CHECK through real servers over TCP, pipelined 64 deep on 4
// connections, against one server with metrics on (command counter, check
// counter, latency histogram) and one with Config.DisableMetrics. Rounds
// alternate between the two, in alternating order, so that load from
// elsewhere on the machine hits both alike. It reports ns per check for
// each and the overhead in percent: the median, over pairs of adjacent
// rounds, of on/off - 1, which a burst of outside load does not skew:
//
//	go test -run '^$' -bench CheckPipelinedMetrics -benchtime 4000000x -count 5 ./server
func BenchmarkCheckPipelinedMetrics(b *testing.B) {
	on := newPipeliner(b, testserver.Start(b, testserver.Options{}).Addr, 4, 64)
	off := newPipeliner(b, testserver.Start(b, testserver.Options{DisableMetrics: true}).Addr, 4, 64)
	on.round(b, 100) // warm up connections and keys
	off.round(b, 100)
	const batchesPerRound = 20
	checksPerRound := batchesPerRound * 4 * 64
	var tOn, tOff time.Duration
	var ratios []float64
	b.ResetTimer()
	for done := 0; done < b.N; done += 2 * checksPerRound {
		var dOn, dOff time.Duration
		if len(ratios)%2 == 0 {
			dOn, dOff = on.round(b, batchesPerRound), off.round(b, batchesPerRound)
		} else {
			dOff, dOn = off.round(b, batchesPerRound), on.round(b, batchesPerRound)
		}
		tOn, tOff = tOn+dOn, tOff+dOff
		ratios = append(ratios, float64(dOn)/float64(dOff))
	}
	checks := float64(len(ratios) * checksPerRound)
	b.ReportMetric(float64(tOn.Nanoseconds())/checks, "ns/check-on")
	b.ReportMetric(float64(tOff.Nanoseconds())/checks, "ns/check-off")
	sort.Float64s(ratios)
	b.ReportMetric(100*(ratios[len(ratios)/2]-1), "%overhead")
}

// pipeliner sends pipelined RL.CHECKs on a set of connections.
type pipeliner struct {
	conns []net.Conn
	rds   []*bufio.Reader
	batch []byte
	depth int
}

func newPipeliner(b *testing.B, addr string, conns, depth int) *pipeliner {
	p := &pipeliner{depth: depth}
	for i := 0; i < depth; i++ {
		key := fmt.Sprintf("bench:%d", i)
		p.batch = fmt.Appendf(p.batch, "*5\r\n$8\r\nRL.CHECK\r\n$%d\r\n%s\r\n$5\r\ntoken\r\n$10\r\n1000000000\r\n$2\r\n60\r\n", len(key), key)
	}
	for i := 0; i < conns; i++ {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { nc.Close() })
		p.conns = append(p.conns, nc)
		p.rds = append(p.rds, bufio.NewReaderSize(nc, 64<<10))
	}
	return p
}

// round sends batches batches on every connection at once, each batch
// written whole and its replies read before the next, and returns the
// elapsed time.
func (p *pipeliner) round(b *testing.B, batches int) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	for i := range p.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < batches; j++ {
				if _, err := p.conns[i].Write(p.batch); err != nil {
					b.Error(err)
					return
				}
				for k := 0; k < p.depth*6; k++ { // "*5" and five integers per reply
					line, err := p.rds[i].ReadSlice('\n')
					if err != nil || line[0] == '-' {
						b.Errorf("reply %q: %v", line, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
