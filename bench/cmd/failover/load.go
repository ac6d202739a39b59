package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/bench/hist"
	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/slots"
)

// loadGen is the workers of one run and the moments they share. Times
// are nanoseconds since base.
type loadGen struct {
	base       time.Time
	workers    []*worker
	steadyFrom atomic.Int64 // 0 until the steady window opens
	steadyTo   atomic.Int64
	killAt     atomic.Int64 // 0 until the kill
	victim     []bool       // by group index: led by the victim; set before killAt
	groupIndex map[int]int  // group id → index
}

// worker checks its keys in turn, one request at a time. Its fields are
// its own but for the atomics, read by the run.
type worker struct {
	ld      *loadGen
	keys    []string
	groups  []int // group index of each key
	router  *load.Router
	batch   load.Batch
	mu      sync.Mutex // guards hist and count for the run's read
	hist    *hist.Histogram
	count   uint64
	after   []bool // per key: answered since the kill
	left    int    // keys not answered since the kill
	fullAt  atomic.Int64
	firstV  atomic.Int64 // first answer for a key of a victim's group, after the kill
	others  atomic.Uint64
	otherMu sync.Mutex
	other   string
}

// newLoad builds the workers: worker w checks fo:<w>:<i> for the i that
// give it keysPerGroup keys in every group of rep.
func newLoad(o options, cl *load.Cluster, rep cluster.Report) *loadGen {
	ld := &loadGen{base: time.Now(), groupIndex: map[int]int{}, victim: make([]bool, len(rep.Groups))}
	for i, g := range rep.Groups {
		ld.groupIndex[g.ID] = i
	}
	for w := range o.workers {
		wk := &worker{ld: ld, router: cl.NewRouter(), hist: hist.New()}
		wk.router.Any = w
		have := make([]int, len(rep.Groups))
		for i, n := 0, 0; n < len(rep.Groups)*o.keysPerGroup; i++ {
			key := fmt.Sprintf("fo:%d:%d", w, i)
			g := ld.groupIndex[rep.GroupOf(slots.Of([]byte(key))).ID]
			if have[g] < o.keysPerGroup {
				have[g]++
				n++
				wk.keys, wk.groups = append(wk.keys, key), append(wk.groups, g)
			}
		}
		wk.after, wk.left = make([]bool, len(wk.keys)), len(wk.keys)
		ld.workers = append(ld.workers, wk)
	}
	return ld
}

func (ld *loadGen) keys() int {
	n := 0
	for _, w := range ld.workers {
		n += len(w.keys)
	}
	return n
}

func (ld *loadGen) now() int64 { return int64(time.Since(ld.base)) }

// loop checks the worker's keys in turn until ctx ends.
func (w *worker) loop(ctx context.Context) {
	defer w.router.Close()
	for ctx.Err() == nil {
		for k := range w.keys {
			if ctx.Err() != nil {
				return
			}
			w.check(ctx, k)
		}
	}
}

// check sends RL.CHECK for key k, retried through the router until it
// has a reply, and records it.
func (w *worker) check(ctx context.Context, k int) {
	w.batch.Reset()
	w.batch.AddCommand("RL.CHECK", w.keys[k], "fixed", "1000000", "1h")
	sent := w.ld.now()
	w.router.Do(ctx, &w.batch, time.Time{}, func(_ int, reply []byte, _ int64) {
		done := w.ld.now()
		if reply[0] == '-' {
			if w.others.Add(1) == 1 {
				w.otherMu.Lock()
				w.other = strings.TrimSpace(string(reply[1:]))
				w.otherMu.Unlock()
			}
			return
		}
		if from, to := w.ld.steadyFrom.Load(), w.ld.steadyTo.Load(); from > 0 && sent >= from && (to == 0 || done <= to) {
			w.mu.Lock()
			w.hist.Record(done - sent)
			w.count++
			w.mu.Unlock()
		}
		if kill := w.ld.killAt.Load(); kill > 0 && sent >= kill {
			w.answered(k, done)
		}
	})
}

// answered records the first reply for key k since the kill.
func (w *worker) answered(k int, at int64) {
	if w.ld.victim[w.groups[k]] && w.firstV.Load() == 0 {
		w.firstV.Store(at)
	}
	if w.after[k] {
		return
	}
	w.after[k] = true
	if w.left--; w.left == 0 {
		w.fullAt.Store(at)
	}
}

// steady opens the steady window for d and returns its throughput and
// latency percentiles (µs).
func (ld *loadGen) steady(d time.Duration) (rps, p50, p99 float64, err error) {
	from := ld.now()
	ld.steadyFrom.Store(from)
	time.Sleep(d)
	to := ld.now()
	ld.steadyTo.Store(to)
	time.Sleep(50 * time.Millisecond) // requests sent before the end, answered after
	h := hist.New()
	var n uint64
	for _, w := range ld.workers {
		w.mu.Lock()
		h.Merge(w.hist)
		n += w.count
		w.mu.Unlock()
	}
	if n == 0 {
		return 0, 0, 0, fmt.Errorf("no reply in the steady window (errors: %d, first: %s)", ld.otherErrors(), ld.firstOther())
	}
	return float64(n) / time.Duration(to-from).Seconds(), float64(h.Quantile(0.5)) / 1e3, float64(h.Quantile(0.99)) / 1e3, nil
}

// markVictim records which groups the victim leads; called before the
// kill time is stored.
func (ld *loadGen) markVictim(rep cluster.Report, victim string) {
	for _, g := range rep.Groups {
		ld.victim[ld.groupIndex[g.ID]] = g.Leader == victim
	}
}

// waitFull waits until every worker has had an answer for each of its
// keys since the kill, and returns when the last one came (zero at the
// deadline).
func (ld *loadGen) waitFull(deadline time.Time) time.Time {
	for time.Now().Before(deadline) {
		last, all := int64(0), true
		for _, w := range ld.workers {
			at := w.fullAt.Load()
			all = all && at > 0
			last = max(last, at)
		}
		if all {
			return ld.base.Add(time.Duration(last))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}
}

func (ld *loadGen) firstVictimAnswer() int64 {
	first := int64(0)
	for _, w := range ld.workers {
		if at := w.firstV.Load(); at > 0 && (first == 0 || at < first) {
			first = at
		}
	}
	return first
}

func (ld *loadGen) otherErrors() uint64 {
	var n uint64
	for _, w := range ld.workers {
		n += w.others.Load()
	}
	return n
}

func (ld *loadGen) firstOther() string {
	for _, w := range ld.workers {
		w.otherMu.Lock()
		s := w.other
		w.otherMu.Unlock()
		if s != "" {
			return s
		}
	}
	return ""
}
