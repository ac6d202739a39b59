package cluster

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The applier moves the journal into the Raft log. Changes are grouped in
// epochs: open is the epoch that changes made now belong to. A flush seals
// the open epoch (open moves on), collects every change listed so far with
// shards.Store.AppendChanges into one entry and hands it to raft.Apply
// without waiting; the committer goroutine waits for the entries in order
// and publishes committed, the last epoch whose changes are all durable,
// then calls the commit listeners. A change made before Pending returned e
// was listed before epoch e was sealed, so it is in entry e or an earlier
// one: once Committed(e) holds, it is in the log.
//
// A flush happens every flush interval and whenever someone waits (Kick):
// in fast mode replies do not wait (unless the log lags, see Lagging), so
// entries follow the interval and up to maxInflight are pipelined; in
// strong mode every batch of replies waits for its epoch and kicks, one
// entry is in flight at a time, and gather makes each carry as many
// waiting batches as it can (group commit).
type applier struct {
	n        *Node
	interval time.Duration
	strong   bool

	// Group commit in strong mode (gather): kicks counts Kick calls (one
	// per waiting batch of replies); sealedKicks is its value when the
	// last epoch was sealed, and lastKicks the kicks of the epoch before.
	kicks       atomic.Uint64
	sealedKicks uint64
	lastKicks   uint64
	sealed      uint64 // the last epoch sealed

	open      atomic.Uint64
	committed atomic.Uint64
	kick      chan struct{}
	inflight  chan pending // in epoch order; bounded: back-pressure
	stop      chan struct{}
	done      chan struct{}

	// failed is the error of an entry the log did not take; while it is
	// set no entry is applied, Committed reports it for every epoch not
	// committed, and the committer retries the entries in order.
	failed atomic.Pointer[error]

	// gate orders failed with raft.Apply: no entry is applied after one
	// failed until the failed ones are in.
	gate sync.Mutex

	lastSize atomic.Int64 // of the last entry, to size the next
	// bufs holds entry buffers that raft is done with, when the log store
	// copies what it stores (Config.ReuseEntries), so that a node writing
	// tens of MB/s of entries does not allocate them.
	bufs chan []byte

	mu        sync.Mutex
	listeners []func()
	gen       atomic.Pointer[chan struct{}] // closed and replaced by notify
}

// pending is a flushed epoch on its way to the log. future is nil for an
// epoch without changes.
type pending struct {
	epoch   uint64
	data    []byte
	records int
	start   time.Time
	future  raft.ApplyFuture
}

// maxInflight bounds the entries handed to raft and not yet committed.
const maxInflight = 16

// applyTimeout bounds how long raft.Apply may wait to enqueue an entry.
const applyTimeout = 10 * time.Second

func newApplier(n *Node, interval time.Duration) *applier {
	a := &applier{
		n: n, interval: interval,
		kick:     make(chan struct{}, 1),
		inflight: make(chan pending, maxInflight),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if n.cfg.ReuseEntries {
		a.bufs = make(chan []byte, maxInflight+2)
	}
	a.open.Store(1)
	ch := make(chan struct{})
	a.gen.Store(&ch)
	return a
}

// run flushes every interval and on kicks until stop, then flushes what is
// left and waits for it to commit.
func (a *applier) run() {
	committerDone := make(chan struct{})
	go func() {
		defer close(committerDone)
		a.commitLoop()
	}()
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			a.flush()
			close(a.inflight)
			<-committerDone
			close(a.done)
			return
		case <-t.C:
		case <-a.kick:
		}
		if a.strong {
			a.gather()
		}
		a.flush()
	}
}

// maxGather bounds how long gather waits for waiters to come back.
const maxGather = 200 * time.Microsecond

// gather is strong mode's group commit. It waits for the entry in flight
// to commit — raft writes one at a time anyway — and then, briefly, for as
// many new waiting batches as that commit released (the kicks of its
// epoch): those connections are sending their next requests, and an epoch
// sealed before they arrive would carry only the batches that came during
// the write, halving what each fsync carries.
func (a *applier) gather() {
	if a.committed.Load() >= a.sealed {
		return // nothing in flight: a lone waiter goes at once
	}
	for a.committed.Load() < a.sealed && a.failed.Load() == nil {
		ch := *a.gen.Load()
		if a.committed.Load() >= a.sealed {
			break
		}
		select {
		case <-ch:
		case <-a.stop:
			return
		}
	}
	deadline, want := time.Now().Add(maxGather), a.kicks.Load()+a.lastKicks
	for a.kicks.Load() < want {
		wait := time.Until(deadline)
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-a.kick:
		case <-t.C:
		case <-a.stop:
		}
		t.Stop()
	}
}

// flush seals the open epoch and hands its changes to raft, unless the log
// is refusing entries (the changes wait in the journal meanwhile).
func (a *applier) flush() {
	a.gate.Lock()
	if a.failed.Load() != nil {
		a.gate.Unlock()
		return
	}
	epoch := a.open.Add(1) - 1
	k := a.kicks.Load()
	a.sealed, a.lastKicks, a.sealedKicks = epoch, k-a.sealedKicks, k
	buf := beginEntry(a.buffer())
	buf, n := a.n.store.AppendChanges(buf)
	a.lastSize.Store(int64(len(buf)))
	p := pending{epoch: epoch, records: n, start: time.Now()}
	if n > 0 {
		sealEntry(buf, a.n.origin, epoch, a.n.clock())
		p.data = buf
		p.future = a.n.raft.Apply(buf, applyTimeout)
	}
	a.gate.Unlock()
	a.inflight <- p
}

// buffer returns an empty entry buffer: a recycled one if there is one,
// else a new one sized for a little more than the last entry, so that
// appending the records rarely grows it.
func (a *applier) buffer() []byte {
	select {
	case b := <-a.bufs:
		return b[:0]
	default:
		return make([]byte, 0, max(4096, a.lastSize.Load()*5/4))
	}
}

// recycle keeps b, an entry whose future has resolved (raft holds no
// reference to it then), for a later flush, if entries may be reused and
// b is not unusually large.
func (a *applier) recycle(b []byte) {
	if a.bufs == nil || cap(b) > maxKeptEntry {
		return
	}
	select {
	case a.bufs <- b:
	default:
	}
}

// maxKeptEntry bounds the entry buffers kept for reuse.
const maxKeptEntry = 8 << 20

// commitLoop waits for the flushed epochs in order and publishes them.
func (a *applier) commitLoop() {
	for p := range a.inflight {
		if p.future != nil {
			if err := p.future.Error(); err != nil {
				if !a.retry(p, err) {
					continue
				}
			}
			a.n.metrics.committed(p.records, len(p.data), time.Since(p.start))
			a.recycle(p.data)
		}
		a.committed.Store(p.epoch)
		a.notify()
	}
}

// retry handles an entry the log did not take: it reports the failure,
// stops new entries, and applies this entry again, then every later one
// (they failed too: raft steps down when its log refuses a write), until
// the log takes it. It returns false if the node is shutting down.
func (a *applier) retry(p pending, err error) bool {
	if errors.Is(err, raft.ErrRaftShutdown) {
		return false
	}
	ferr := fmt.Errorf("%w: %v", ErrPersistence, err)
	a.gate.Lock()
	first := a.failed.CompareAndSwap(nil, &ferr)
	a.gate.Unlock()
	if first {
		a.n.log.Error("the log refused an entry; refusing commands until it takes it again", "epoch", p.epoch, "err", err)
		a.notify()
	}
	for {
		select {
		case <-a.n.shutdownCh:
			return false
		case <-time.After(retryPause):
		}
		if err := a.n.raft.Apply(p.data, applyTimeout).Error(); err == nil {
			break
		} else if errors.Is(err, raft.ErrRaftShutdown) {
			return false
		}
	}
	if len(a.inflight) == 0 {
		a.n.log.Info("the log takes entries again; serving")
		a.failed.Store(nil)
	}
	return true
}

// retryPause is the wait between two attempts to store a refused entry.
const retryPause = 100 * time.Millisecond

// notify wakes the waiters and calls the commit listeners.
func (a *applier) notify() {
	ch := make(chan struct{})
	close(*a.gen.Swap(&ch))
	a.mu.Lock()
	ls := a.listeners
	a.mu.Unlock()
	for _, fn := range ls {
		fn()
	}
}

// Pending returns the epoch that covers every change made so far.
func (a *applier) Pending() uint64 { return a.open.Load() }

// Committed reports whether every change of epoch seq and before is in the
// log; while the log refuses entries, it returns the error instead.
func (a *applier) Committed(seq uint64) (bool, error) {
	if a.committed.Load() >= seq {
		return true, nil
	}
	if err := a.failed.Load(); err != nil {
		return false, *err
	}
	return false, nil
}

// maxLag is how many sealed epochs may be uncommitted before fast-mode
// replies wait: with epochs sealed every flush interval, a crash then
// forgets at most the changes acknowledged during the last maxLag+1
// intervals of replies (if the log stalls, replies stop within maxLag
// intervals, so the bound holds in changes, whatever the stall's length).
const maxLag = 2

// Lagging reports whether more than maxLag sealed epochs are uncommitted,
// and the epoch to wait for to be back within the bound.
func (a *applier) Lagging() (uint64, bool) {
	o, c := a.open.Load(), a.committed.Load()
	if c+maxLag+1 >= o {
		return 0, false
	}
	return o - maxLag - 1, true
}

// Kick asks for a flush now, without waiting for it.
func (a *applier) Kick() {
	a.kicks.Add(1)
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// OnCommit registers fn, called from the committer after every epoch that
// commits and when the log starts refusing entries. fn must not block.
func (a *applier) OnCommit(fn func()) {
	a.mu.Lock()
	a.listeners = append(a.listeners, fn)
	a.mu.Unlock()
}

// wait blocks until seq commits, the log fails, or done closes.
func (a *applier) wait(seq uint64, done <-chan struct{}) error {
	for {
		ch := *a.gen.Load() // before the check: a commit after it closes ch
		if ok, err := a.Committed(seq); ok || err != nil {
			return err
		}
		a.Kick()
		select {
		case <-ch:
		case <-done:
			return errWaitAbandoned
		}
	}
}

// errWaitAbandoned is returned by wait when its caller gave up.
var errWaitAbandoned = errors.New("cluster: gave up waiting for the commit")
