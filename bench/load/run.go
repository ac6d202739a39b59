// Package load drives a RESP server with pipelined commands over many
// connections and measures throughput and latency. It speaks RESP over TCP
// itself and knows nothing of rlserver: the same run works against Redis.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/bench/hist"
)

// Config describes one run.
type Config struct {
	Name      string        // label for reports
	Addr      string        // host:port
	Password  string        // AUTH password, if any
	Conns     int           // connections, each with its own goroutine
	Pipeline  int           // commands written per round trip
	Keys      uint64        // key numbers for RandInt are drawn from [0, Keys)
	Dist      string        // "uniform" (default), "zipf", or "seq" (0, 1, 2, ... across all connections, wrapping at Keys)
	ZipfS     float64       // zipf exponent, > 1 (default 1.1)
	Duration  time.Duration // measured time, after Warmup; ignored if Requests > 0
	Requests  int64         // total requests; 0 means run for Duration
	Warmup    time.Duration // time run before measuring (Duration mode only)
	Templates []*Template   // commands, chosen uniformly at random per request
	Seed      uint64
	// Cluster routes each request to the node serving its key's slot:
	// the slot map is read with CLUSTER SLOTS from Addr, and each
	// connection (Conns of them) keeps one socket per node (see Router).
	Cluster bool
}

// Latency holds latency statistics in microseconds.
type Latency struct {
	Min  float64 `json:"min_us"`
	Mean float64 `json:"mean_us"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	Max  float64 `json:"max_us"`
}

// Result is the outcome of one run.
type Result struct {
	Name       string   `json:"name"`
	Addr       string   `json:"addr"`
	Commands   []string `json:"commands"`
	Conns      int      `json:"conns"`
	Pipeline   int      `json:"pipeline"`
	Keys       uint64   `json:"keys"`
	Dist       string   `json:"dist"`
	Requests   uint64   `json:"requests"`
	Total      uint64   `json:"total"` // replies including the warmup's
	Denied     uint64   `json:"denied"`
	Errors     uint64   `json:"errors"`
	FirstError string   `json:"first_error,omitempty"`
	Seconds    float64  `json:"seconds"`
	RPS        float64  `json:"rps"`
	Latency    Latency  `json:"latency"`
	// Cluster is set in cluster mode: the nodes and what routing met,
	// over the whole run (the warm-up's included).
	Cluster *ClusterResult `json:"cluster,omitempty"`
}

// ClusterResult is what a run in cluster mode met.
type ClusterResult struct {
	Nodes []string `json:"nodes"`
	StatsSnapshot
}

// worker is one connection's state.
type worker struct {
	cfg      *Config
	nc       net.Conn
	rw       io.ReadWriter // nc, or its raw descriptor (see rawConn)
	rd       *replyReader
	wbuf     []byte
	rng      *rand.Rand
	zipf     *rand.Zipf
	hist     *hist.Histogram
	inflight []*Template // the template of each request of the batch
	count    uint64      // replies inside the measured window
	denied   uint64      // of which denials (see Template.deniedFirst)
	total    uint64      // every reply, the warmup's included
	errors   uint64
	seq      *atomic.Uint64
	errMsg   string
	router   *Router // cluster mode
	batch    Batch   // cluster mode: the requests of a round trip
}

// Run executes cfg and returns its result. It returns an error if a
// connection cannot be opened or fails during the run.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var cl *Cluster
	if cfg.Cluster {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		cl, err = NewCluster(cctx, []string{cfg.Addr}, cfg.Password)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	workers := make([]*worker, cfg.Conns)
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.close()
			}
		}
	}()
	for i := range workers {
		var w *worker
		var err error
		if cl != nil {
			w, err = clusterWorker(&cfg, cl, uint64(i))
		} else {
			w, err = dialWorker(ctx, &cfg, uint64(i))
		}
		if err != nil {
			return nil, err
		}
		workers[i] = w
	}
	var budget atomic.Int64
	budget.Store(cfg.Requests)
	var seq atomic.Uint64
	for _, w := range workers {
		w.seq = &seq
	}
	base := time.Now()
	measureFrom, stopAt := int64(cfg.Warmup), int64(cfg.Warmup+cfg.Duration)
	if cfg.Requests > 0 {
		measureFrom, stopAt = 0, 1<<62
	}
	errs := make(chan error, len(workers))
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.loop(ctx, base, measureFrom, stopAt, &budget)
		}()
	}
	wg.Wait()
	elapsed := time.Since(base)
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	res := cfg.result(workers, elapsed)
	if cl != nil {
		res.Cluster = &ClusterResult{Nodes: cl.Addrs(), StatsSnapshot: cl.Stats.Snapshot()}
	}
	return res, nil
}

func (cfg *Config) defaults() error {
	if cfg.Conns <= 0 {
		cfg.Conns = 50
	}
	if cfg.Pipeline <= 0 {
		cfg.Pipeline = 1
	}
	if cfg.Keys == 0 {
		cfg.Keys = 100000
	}
	if cfg.Dist == "" {
		cfg.Dist = "uniform"
	}
	if cfg.ZipfS == 0 {
		cfg.ZipfS = 1.1
	}
	if cfg.Dist != "uniform" && cfg.Dist != "zipf" && cfg.Dist != "seq" {
		return fmt.Errorf("load: unknown distribution %q (want uniform, zipf or seq)", cfg.Dist)
	}
	if cfg.Dist == "zipf" && cfg.ZipfS <= 1 {
		return errors.New("load: the zipf exponent must be above 1")
	}
	if cfg.Requests <= 0 && cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Second
	}
	if len(cfg.Templates) == 0 {
		return errors.New("load: no command template")
	}
	return nil
}

func dialWorker(ctx context.Context, cfg *Config, id uint64) (*worker, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	var rw io.ReadWriter = nc
	if raw := newRawConn(nc); raw != nil {
		rw = raw
	}
	w := &worker{cfg: cfg, nc: nc, rw: rw, rd: newReplyReader(rw), hist: hist.New(),
		rng: rand.New(rand.NewPCG(cfg.Seed, id))}
	if cfg.Dist == "zipf" {
		w.zipf = rand.NewZipf(w.rng, cfg.ZipfS, 1, cfg.Keys-1)
	}
	if cfg.Password != "" {
		if _, err := do(nc, w.rd, "AUTH", cfg.Password); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return w, nil
}

// clusterWorker returns a worker with a Router over cl, connected to
// every node.
func clusterWorker(cfg *Config, cl *Cluster, id uint64) (*worker, error) {
	w := &worker{cfg: cfg, hist: hist.New(), rng: rand.New(rand.NewPCG(cfg.Seed, id)), router: cl.NewRouter()}
	w.router.Any = int(id)
	if cfg.Dist == "zipf" {
		w.zipf = rand.NewZipf(w.rng, cfg.ZipfS, 1, cfg.Keys-1)
	}
	if err := w.router.Connect(); err != nil {
		w.router.Close()
		return nil, err
	}
	return w, nil
}

func (w *worker) close() {
	if w.router != nil {
		w.router.Close()
	} else {
		w.nc.Close()
	}
}

func (w *worker) key() uint64 {
	switch {
	case w.zipf != nil:
		return w.zipf.Uint64()
	case w.cfg.Dist == "seq":
		return (w.seq.Add(1) - 1) % w.cfg.Keys
	}
	return w.rng.Uint64N(w.cfg.Keys)
}

// loop runs batches until the budget or the time is spent.
func (w *worker) loop(ctx context.Context, base time.Time, measureFrom, stopAt int64, budget *atomic.Int64) error {
	cfg := w.cfg
	var now [nowWidth]byte
	hasNow := false
	for _, t := range cfg.Templates {
		hasNow = hasNow || t.HasNow()
	}
	if w.router != nil {
		w.router.Clock = func() int64 { return int64(time.Since(base)) }
	}
	for ctx.Err() == nil {
		n := cfg.Pipeline
		if cfg.Requests > 0 {
			left := budget.Add(-int64(n))
			if left+int64(n) <= 0 {
				return nil
			}
			if left < 0 {
				n += int(left)
			}
		}
		if hasNow {
			putDigits(now[:], uint64(time.Now().UnixMicro()))
		}
		if w.router != nil {
			if done, err := w.clusterBatch(ctx, n, &now, base, measureFrom, stopAt); done || err != nil {
				return err
			}
			continue
		}
		w.wbuf = w.wbuf[:0]
		w.inflight = w.inflight[:0]
		for i := 0; i < n; i++ {
			t := cfg.Templates[0]
			if len(cfg.Templates) > 1 {
				t = cfg.Templates[w.rng.IntN(len(cfg.Templates))]
			}
			w.wbuf = t.appendTo(w.wbuf, w.key(), &now)
			w.inflight = append(w.inflight, t)
		}
		sent := int64(time.Since(base))
		if sent >= stopAt {
			return nil
		}
		if _, err := w.rw.Write(w.wbuf); err != nil {
			return err
		}
		if err := w.await(n, sent, base, measureFrom, stopAt); err != nil {
			return err
		}
	}
	return nil
}

// clusterBatch sends n requests through the router and records their
// replies, each under its own request's template. Requests still
// unanswered at the end of the run are dropped. It reports whether the
// run is over.
func (w *worker) clusterBatch(ctx context.Context, n int, now *[nowWidth]byte, base time.Time, measureFrom, stopAt int64) (bool, error) {
	cfg := w.cfg
	w.batch.Reset()
	w.inflight = w.inflight[:0]
	for i := 0; i < n; i++ {
		t := cfg.Templates[0]
		if len(cfg.Templates) > 1 {
			t = cfg.Templates[w.rng.IntN(len(cfg.Templates))]
		}
		start := len(w.batch.Buf)
		w.batch.Buf = t.appendTo(w.batch.Buf, w.key(), now)
		w.batch.Add(t.slotAt(w.batch.Buf[start:]))
		w.inflight = append(w.inflight, t)
	}
	sent := int64(time.Since(base))
	if sent >= stopAt {
		return true, nil
	}
	var giveUp time.Time
	if cfg.Requests <= 0 {
		giveUp = base.Add(time.Duration(stopAt))
	}
	_, err := w.router.Do(ctx, &w.batch, giveUp, func(i int, reply []byte, at int64) {
		w.record(reply, w.inflight[i], sent, at, measureFrom, stopAt)
	})
	if ctx.Err() != nil {
		return true, nil
	}
	return false, err
}

// await reads n replies to a batch sent at sent.
func (w *worker) await(n int, sent int64, base time.Time, measureFrom, stopAt int64) error {
	total := n
	for n > 0 {
		reply, ok, err := w.rd.next()
		if err != nil {
			return err
		}
		if !ok {
			if err := w.rd.fill(); err != nil {
				return fmt.Errorf("read reply: %w", err)
			}
			continue
		}
		at := int64(time.Since(base))
		for {
			n--
			w.record(reply, w.inflight[total-n-1], sent, at, measureFrom, stopAt)
			if n == 0 {
				break
			}
			if reply, ok, err = w.rd.next(); err != nil {
				return err
			} else if !ok {
				break
			}
		}
	}
	return nil
}

func (w *worker) record(reply []byte, t *Template, sent, at, measureFrom, stopAt int64) {
	w.total++
	if reply[0] == '-' {
		w.errors++
		if w.errMsg == "" {
			w.errMsg = strings.TrimSpace(string(reply[1:]))
		}
	}
	if sent < measureFrom || at > stopAt {
		return
	}
	w.count++
	if t.denied(reply) {
		w.denied++
	}
	w.hist.Record(at - sent)
}

func (cfg *Config) result(workers []*worker, elapsed time.Duration) *Result {
	h := hist.New()
	r := &Result{Name: cfg.Name, Addr: cfg.Addr, Conns: cfg.Conns, Pipeline: cfg.Pipeline,
		Keys: cfg.Keys, Dist: cfg.Dist}
	for _, t := range cfg.Templates {
		r.Commands = append(r.Commands, t.Text)
	}
	for _, w := range workers {
		h.Merge(w.hist)
		r.Requests += w.count
		r.Denied += w.denied
		r.Total += w.total
		r.Errors += w.errors
		if r.FirstError == "" {
			r.FirstError = w.errMsg
		}
	}
	r.Seconds = cfg.Duration.Seconds()
	if cfg.Requests > 0 {
		r.Seconds = elapsed.Seconds()
	}
	r.RPS = float64(r.Requests) / r.Seconds
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	r.Latency = Latency{Min: us(h.Min()), Mean: h.Mean() / 1e3, P50: us(h.Quantile(0.5)),
		P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Max())}
	return r
}
