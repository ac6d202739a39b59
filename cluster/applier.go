package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The applier moves the journals of the groups this node leads into their
// Raft logs. Changes are grouped in epochs, node-wide: open is the epoch
// that changes made now belong to. A flush seals the open epoch (open moves
// on), collects each active group's changes with shards.Store.AppendChanges
// into one entry per group and hands it to that group's raft.Apply without
// waiting; each group's commit loop waits for its entries in order and
// records the last epoch it has committed, and the node's committed epoch
// is the least of the active groups' (the sealed epoch when there are
// none); then the commit listeners are called. A change made before Pending
// returned e was listed before epoch e was sealed, so it is in its group's
// entry e or an earlier one: once Committed(e) holds, it is in the log.
//
// A group that stops being led here (or whose entry failed) leaves the
// active set; the epochs it had not committed, up to the open one, become a
// lost window: Committed answers ErrLostLead for them, since their changes
// may never reach the log, until the waiters have moved past it.
//
// A flush happens every flush interval while the stores change (the
// applier sleeps while they do not: run) and whenever someone waits
// (Kick): in fast mode replies do not wait (unless the log lags, see
// Lagging), so entries follow the interval and up to maxInflight are
// pipelined; in strong mode every batch of replies waits for its epoch and
// kicks, one entry is in flight at a time, and gather makes each carry as
// many waiting batches as it can (group commit). A standalone node learns
// that an entry is in the log from its log store (stored), not from raft.
type applier struct {
	interval time.Duration
	strong   bool
	clock    func() int64
	metrics  *metrics
	log      *slog.Logger
	quit     <-chan struct{} // closed when the node shuts down
	reuse    bool            // entries' buffers may be reused once committed

	sealed uint64 // the last epoch sealed, under gate

	// Group commit in strong mode (gather): kicks counts Kick calls (one
	// per waiting batch of replies); sealedKicks is its value when the
	// last epoch was sealed, and lastKicks the kicks of the epoch before.
	kicks       atomic.Uint64
	sealedKicks uint64
	lastKicks   uint64

	open      atomic.Uint64
	committed atomic.Uint64
	kick      chan struct{}
	changed   chan struct{} // a store's first change since its last collection
	onChange  func()        // noteChange, made once
	stop      chan struct{}
	done      chan struct{}

	// failed is the error of an entry a standalone node's log did not
	// take; while it is set no entry is applied, Committed reports it for
	// every epoch not committed, and the commit loop retries the entries in
	// order.
	failed atomic.Pointer[error]
	// space, when set (a standalone node's disk guard, Space.Room), is
	// asked before an entry is tried again: while it refuses, retry does
	// not hand raft an entry its log would refuse (each attempt would
	// make raft step down and log it).
	space func() error

	// gate orders flushes with failures and with changes of the active
	// set: no entry is applied after one failed until the failed ones are
	// in, and a group joins or leaves between two flushes.
	gate    sync.Mutex
	groups  []*group                 // active groups, under gate
	retired []chan pending           // inflight queues of groups that left, to close; under gate
	current atomic.Pointer[[]*group] // a copy of groups for readers
	lost    atomic.Pointer[[]window] // recent lost windows, newest last
	// leadsLost counts the groups that left the active set without their
	// changes committed (a lead lost to a missed heartbeat or a partition,
	// an entry that failed): their waiters may be answered ErrLostLead.
	// It counts before the waiters are woken.
	leadsLost atomic.Uint64

	lastSize atomic.Int64 // of the last entry, to size the next
	// bufs holds entry buffers that raft is done with, when the log store
	// copies what it stores (Config.ReuseEntries), so that a node writing
	// tens of MB/s of entries does not allocate them.
	bufs chan []byte

	mu        sync.Mutex
	listeners []func()
	gen       atomic.Pointer[chan struct{}] // closed and replaced by notify
}

// window is a range of epochs (lo, hi] whose changes in some group may
// never reach its log.
type window struct{ lo, hi uint64 }

// maxLost bounds the lost windows kept: a waiter is woken when its window
// is recorded, so only recent ones matter.
const maxLost = 16

// ErrLostLead answers the replies whose changes may not be in the log
// because the node stopped leading their group before they committed.
var ErrLostLead = errors.New("TRYAGAIN the group's leadership moved before the change was committed; retry")

// pending is a flushed epoch on its way to a group's log. future is nil
// for an epoch without changes.
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

func newApplier(interval time.Duration, clock func() int64, m *metrics, log *slog.Logger, quit <-chan struct{}, reuse bool) *applier {
	a := &applier{
		interval: interval, clock: clock, metrics: m, log: log, quit: quit, reuse: reuse,
		kick:    make(chan struct{}, 1),
		changed: make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if reuse {
		a.bufs = make(chan []byte, maxInflight+2)
	}
	a.onChange = a.noteChange
	a.open.Store(1)
	ch := make(chan struct{})
	a.gen.Store(&ch)
	a.current.Store(&[]*group{})
	a.lost.Store(&[]window{})
	return a
}

// run flushes every interval and on kicks until stop, then flushes what is
// left and waits for it to commit. While nothing changes it sleeps: after
// a flush that found no change in any group it stops its ticker until a
// store reports a change (changed, through shards.Store.OnChange) or
// someone kicks, and the next flush is one interval after that change, as
// it would have been had the ticker run.
func (a *applier) run() {
	t := time.NewTicker(a.interval)
	defer t.Stop()
	ticking := true
	for {
		var tick <-chan time.Time
		var changed chan struct{}
		if ticking {
			tick = t.C
		} else {
			changed = a.changed
		}
		select {
		case <-a.stop:
			a.finish()
			return
		case <-tick:
		case <-a.kick:
		case <-changed:
			t.Reset(a.interval)
			ticking = true
			continue
		}
		if a.strong && !a.gather() {
			a.finish()
			return
		}
		// Before the flush: a change after it signals again (see run).
		select {
		case <-a.changed:
		default:
		}
		if idle := a.flush(); idle && ticking {
			t.Stop()
			ticking = false
		} else if !idle && !ticking {
			t.Reset(a.interval)
			ticking = true
		}
	}
}

// waitInflight is strong mode's group commit: it waits for the entry in
// flight to commit before the next is sealed (raft writes one at a time
// anyway), so that the next carries every batch that came meanwhile. It
// returns false if the applier is stopping.
func (a *applier) waitInflight() bool {
	for a.committed.Load() < a.sealed && a.failed.Load() == nil {
		ch := *a.gen.Load()
		if a.committed.Load() >= a.sealed {
			break
		}
		select {
		case <-ch:
		case <-a.stop:
			return false
		}
	}
	return true
}

// maxGather bounds how long gather waits for waiters to come back.
const maxGather = 200 * time.Microsecond

// gather is strong mode's group commit. It waits for the entry in flight
// to commit (waitInflight) — raft writes one at a time anyway — and then,
// briefly, for as many new waiting batches as that commit released (the
// kicks of its epoch): those connections are sending their next requests,
// and an epoch sealed before they arrive would carry only the batches that
// came during the write, halving what each fsync carries. (Sealing at
// once, or as soon as the event loops have nothing more to read, measured
// worse: a client's next requests trickle in, and the loops run dry
// between them; DESIGN.md.) It returns false if the applier is stopping.
func (a *applier) gather() bool {
	if a.committed.Load() >= a.sealed {
		return true // nothing in flight: a lone waiter goes at once
	}
	if !a.waitInflight() {
		return false
	}
	deadline, want := time.Now().Add(maxGather), a.kicks.Load()+a.lastKicks
	for a.kicks.Load() < want {
		wait := time.Until(deadline)
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-a.kick:
		case <-t.C:
		case <-a.stop:
		}
		t.Stop()
	}
	return true
}

// finish flushes what is left, retires every group and waits for their
// commit loops, for run's stop.
func (a *applier) finish() {
	a.flush()
	a.gate.Lock()
	groups := a.groups
	a.groups = nil
	for _, g := range groups {
		g.active = false
		a.retired = append(a.retired, g.inflight)
	}
	a.closeRetired()
	a.publish()
	a.gate.Unlock()
	for _, g := range groups {
		<-g.loopDone
	}
	close(a.done)
}

// noteChange is the stores' OnChange: it wakes run if it sleeps.
func (a *applier) noteChange() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// flush seals the open epoch and hands each active group's changes to its
// raft, unless a standalone node's log is refusing entries (the changes
// wait in the journal meanwhile). It reports whether it found no change
// to write (idle).
func (a *applier) flush() (idle bool) {
	a.gate.Lock()
	if a.failed.Load() != nil {
		a.gate.Unlock()
		return false
	}
	epoch := a.open.Add(1) - 1
	k := a.kicks.Load()
	a.sealed, a.lastKicks, a.sealedKicks = epoch, k-a.sealedKicks, k
	a.closeRetired()
	groups := a.groups
	ps := make([]pending, len(groups))
	// Each entry goes to the queue of the activation it was collected
	// in, read here under the gate: the group may be deactivated and
	// activated again (a new queue) before it is sent, and that
	// activation's commit loop must not get an epoch of the one before
	// (the race detector saw the queue read below while activate wrote
	// it). The old queue is closed only by a later flush (closeRetired),
	// in this goroutine: the send below never finds it closed.
	queues := make([]chan pending, len(groups))
	idle = true
	for i, g := range groups {
		ps[i] = a.collect(g, epoch)
		queues[i] = g.inflight
		idle = idle && ps[i].records == 0
	}
	if len(groups) == 0 {
		a.advance(epoch)
	}
	a.gate.Unlock()
	if len(groups) == 0 {
		// Nothing to write: the epoch is committed now. Wake its waiters
		// (a node that leads no group would keep them until a timeout).
		a.notify()
	}
	for i, q := range queues {
		q <- ps[i] // bounded: back-pressure
	}
	return idle
}

// collect seals g's changes of epoch into an entry and hands it to raft.
// Call with gate held.
func (a *applier) collect(g *group, epoch uint64) pending {
	buf := beginEntry(a.buffer())
	buf, n := g.store.AppendChanges(buf)
	a.lastSize.Store(int64(len(buf)))
	p := pending{epoch: epoch, records: n, start: time.Now()}
	if n > 0 {
		sealEntry(buf, g.fsm.origin.Load(), epoch, a.clock())
		p.data = buf
		p.future = g.raft.Apply(buf, applyTimeout)
	} else {
		a.recycle(buf)
	}
	return p
}

// activate adds g, which the node now leads and has caught up, to the
// groups whose changes are flushed, and starts its commit loop. Its
// journal is empty: a follower's store records nothing.
func (a *applier) activate(g *group) {
	a.gate.Lock()
	defer a.gate.Unlock()
	if g.active {
		return
	}
	g.active = true
	g.committed.Store(a.open.Load() - 1)
	g.inflight = make(chan pending, maxInflight)
	g.loopDone = make(chan struct{})
	a.groups = append(a.groups[:len(a.groups):len(a.groups)], g)
	a.publish()
	g.store.OnChange(a.onChange)
	a.noteChange() // a flush soon, whatever the journal holds
	go a.commitLoop(g, g.inflight, g.loopDone)
}

// isActive reports whether g is one of the groups whose changes are
// flushed.
func (a *applier) isActive(g *group) bool {
	a.gate.Lock()
	defer a.gate.Unlock()
	return g.active
}

// deactivate removes g from the active groups, if it is one. Unless clean
// (every change made in g is committed: see drain), it records the epochs
// whose changes in g may not be in its log as a lost window.
func (a *applier) deactivate(g *group, clean bool) {
	a.deactivateOf(g, nil, clean)
}

// isCurrent reports whether inflight is the queue of g's current activation.
func (a *applier) isCurrent(g *group, inflight <-chan pending) bool {
	a.gate.Lock()
	defer a.gate.Unlock()
	return g.active && (<-chan pending)(g.inflight) == inflight
}

// deactivateOf is deactivate, for the activation whose queue is inflight
// only (any activation if inflight is nil): a commit loop gives up its own
// activation, never one the watcher made after it (the group may be led
// again, and serving, by then).
func (a *applier) deactivateOf(g *group, inflight <-chan pending, clean bool) {
	a.gate.Lock()
	if !g.active || inflight != nil && (<-chan pending)(g.inflight) != inflight {
		a.gate.Unlock()
		return
	}
	g.active = false
	a.retired = append(a.retired, g.inflight)
	if !clean {
		a.leadsLost.Add(1)
	}
	if lo, hi := g.committed.Load(), a.open.Load(); lo < hi && !clean {
		ws := append([]window(nil), *a.lost.Load()...)
		ws = append(ws, window{lo: lo, hi: hi})
		if len(ws) > maxLost {
			ws = ws[len(ws)-maxLost:]
		}
		a.lost.Store(&ws)
		// The changes made from now on are not in the lost window: they
		// belong to the next epoch (the next flush seals it, with the
		// changes of the open one). Without this, an idle node (no flush
		// seals the open epoch while nothing changes) answered every
		// change made after the loss ErrLostLead — a rule change that
		// the meta group had committed on every node among them.
		a.open.Add(1)
	}
	groups := make([]*group, 0, len(a.groups))
	for _, x := range a.groups {
		if x != g {
			groups = append(groups, x)
		}
	}
	a.groups = groups
	a.publish()
	a.gate.Unlock()
	a.recompute()
	a.notify()
}

// closeRetired closes the queues of the groups that left the active set,
// whose commit loops then end. Only the applier's goroutine sends on the
// queues, and it calls this between flushes, so no send can follow. Call
// with gate held.
func (a *applier) closeRetired() {
	for _, ch := range a.retired {
		close(ch)
	}
	a.retired = nil
}

// publish makes the active groups visible to recompute. Call with gate
// held.
func (a *applier) publish() {
	cp := append([]*group(nil), a.groups...)
	a.current.Store(&cp)
}

// recompute sets committed to the least epoch committed by every active
// group, or to the sealed epoch if no group is active, and reports whether
// it moved.
func (a *applier) recompute() bool {
	groups := *a.current.Load()
	if len(groups) == 0 {
		a.gate.Lock()
		defer a.gate.Unlock()
		return len(a.groups) == 0 && a.advance(a.sealed)
	}
	least := groups[0].committed.Load()
	for _, g := range groups[1:] {
		least = min(least, g.committed.Load())
	}
	return a.advance(least)
}

// advance raises committed to epoch (it never moves back) and reports
// whether it moved.
func (a *applier) advance(epoch uint64) bool { return raise(&a.committed, epoch) }

// raise sets v to epoch if that is more, and reports whether it did.
func raise(v *atomic.Uint64, epoch uint64) bool {
	for {
		c := v.Load()
		if epoch <= c {
			return false
		}
		if v.CompareAndSwap(c, epoch) {
			return true
		}
	}
}

// stored is a standalone group's log store's report (syncedLogs) that
// logs were stored, synced: the entries this run wrote among them are in
// the log, and so is every earlier one (raft stores them in order), which
// for a group whose only voter is this node is to say committed. Their
// epochs are committed from now on, without waiting for raft to tell the
// entries' futures (after its FSM goroutine has seen them): two goroutine
// hand-offs fewer between the fsync and the replies of strong mode. It
// runs in raft's goroutine and never blocks.
func (a *applier) stored(g *group, logs []*raft.Log) {
	origin := g.fsm.origin.Load()
	var top uint64
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		if e, err := decodeHeader(l.Data); err == nil && e.origin == origin {
			top = max(top, e.epoch)
		}
	}
	if top == 0 || !raise(&g.committed, top) || len(*a.current.Load()) == 0 {
		return
	}
	if a.recompute() {
		a.notify()
	}
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

// commitLoop waits for g's flushed epochs in order and publishes them. It
// ends when inflight is closed (g left the active set) and drained.
func (a *applier) commitLoop(g *group, inflight <-chan pending, done chan<- struct{}) {
	defer close(done)
	failed := false
	for p := range inflight {
		if p.future != nil {
			err := p.future.Error()
			if err != nil && g.standalone {
				if !a.retry(g, p, err) {
					continue
				}
				err = nil
			}
			if err != nil || failed {
				// The lead moved, or an earlier entry failed: the changes
				// may not be in the log. Give the state up and take it
				// again from the log (the group's watcher).
				if !failed && !errors.Is(err, raft.ErrRaftShutdown) {
					a.log.Warn("a log entry was not committed; the node gives up the group's state", "group", g.id, "epoch", p.epoch, "err", err)
				}
				if !failed && !g.standalone && a.isCurrent(g, inflight) {
					g.giveUp() // before deactivating: no change is acknowledged past the lost window
				}
				failed = true
				a.deactivateOf(g, inflight, false)
				g.markDirty()
				continue
			}
			a.metrics.committed(p.records, len(p.data), time.Since(p.start))
			a.recycle(p.data)
		}
		if !failed {
			raise(&g.committed, p.epoch)
			cleared := false
			if g.standalone && a.failed.Load() != nil && len(inflight) == 0 {
				// Every entry sealed before the log refused one is in it
				// now (flush seals nothing while failed is set).
				a.log.Info("the log takes entries again; serving")
				a.failed.Store(nil)
				cleared = true
			}
			// A standalone group's stored has notified already; a
			// cluster's waiters may wait for this group alone (drain).
			if a.recompute() || cleared || !g.standalone {
				a.notify()
			}
		}
	}
}

// retry handles an entry a standalone node's log did not take: it reports
// the failure, stops new entries, and applies this entry again, then every
// later one (they failed too: raft steps down when its log refuses a
// write), until the log takes it; commitLoop serves again once none is
// left. It returns false if the node is shutting down.
func (a *applier) retry(g *group, p pending, err error) bool {
	if errors.Is(err, raft.ErrRaftShutdown) {
		return false
	}
	ferr := fmt.Errorf("%w: %v", ErrPersistence, err)
	a.gate.Lock()
	first := a.failed.CompareAndSwap(nil, &ferr)
	a.gate.Unlock()
	if first {
		a.log.Error("the log refused an entry; refusing commands until it takes it again", "epoch", p.epoch, "err", err)
		a.notify()
	}
	for {
		select {
		case <-a.quit:
			return false
		case <-time.After(retryPause):
		}
		if a.space != nil && a.space() != nil {
			continue
		}
		nudge(g.raft) // it stepped down when its log refused the entry
		if err := g.raft.Apply(p.data, applyTimeout).Error(); err == nil {
			break
		} else if errors.Is(err, raft.ErrRaftShutdown) {
			return false
		}
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

// drain waits until every change made in g so far is committed: g no
// longer changes (it stopped serving), so once the epoch open now is
// sealed and g has committed it, its journal and entries are all in its
// log. It returns an error if g's entries fail or done closes first.
func (a *applier) drain(g *group, done <-chan struct{}) error {
	seq := a.open.Load()
	for {
		ch := *a.gen.Load()
		if g.committed.Load() >= seq {
			return nil
		}
		a.gate.Lock()
		active := g.active
		a.gate.Unlock()
		if !active {
			return errors.New("cluster: the group's entries failed")
		}
		a.Kick()
		select {
		case <-ch:
		case <-done:
			return errWaitAbandoned
		}
	}
}

// Pending returns the epoch that covers every change made so far.
func (a *applier) Pending() uint64 { return a.open.Load() }

// Committed reports whether every change of epoch seq and before is in the
// log; while a standalone node's log refuses entries, it returns that
// error, and for an epoch of a lost window ErrLostLead.
func (a *applier) Committed(seq uint64) (bool, error) {
	for _, w := range *a.lost.Load() {
		if w.lo < seq && seq <= w.hi {
			return false, ErrLostLead
		}
	}
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
