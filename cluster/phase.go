package cluster

import (
	"sync"
	"sync/atomic"
)

// phase is where a replica of a group is in its life as a leader: one word
// that only the transitions below change, each named for the step of the
// group's life it is, with the lock that makes serving exact. Before, the
// same facts were four flags (ready, abandoned, handing, deferring) set
// and read across six files.
//
// The facts the word holds:
//
//   - serving: checks run on the replica's store here (the node leads the
//     group, has applied every entry committed before its term, and the
//     applier flushes its journal). Set and cleared under the write lock,
//     so that a check, which holds the read lock while it reads serving
//     and changes the store (enter … leave), never changes the store once
//     serving is cleared.
//   - abandoned: the replica stopped serving because changes it made may
//     not reach the log; its store must be rebuilt from the log before it
//     serves again, whatever raft says meanwhile. Never set with serving.
//   - handing: a hand-over of the lead is under way (Cluster.handOff); the
//     watcher leaves the replica to it, and commands of its slots are held
//     (ErrMoving). It may be set while serving: from the hand-over's start
//     until it stops serving, and throughout one whose target refuses.
//   - deferring: the replica started with longer election timeouts so that
//     the group's preferred leader wins its first election (deferTo); they
//     are restored once a leader is known.
//
// The transitions, and who makes them:
//
//	following ──serve (stepUp, Open)──────────▶ serving
//	serving ───stopServing (stepDown, handOff)─▶ following
//	serving ───giveUp (an entry failed, a drain failed)─▶ abandoned
//	abandoned ─takeAbandoned (the watcher, then stepDown's rebuild)─▶ following
//	any ───────beginHandOff … endHandOff (handOff)──────▶ the same, handing meanwhile
//	deferring ─endDeferral (the watcher, once a leader is known)─▶ not deferring
//
// A replica starts following, not abandoned, not handing; deferring if
// OpenCluster deferred it (deferElection).
type phase struct {
	mu   sync.RWMutex // read by each check while it runs; written to set or clear serving
	bits atomic.Uint32
}

// The bits of phase.bits.
const (
	phaseServing uint32 = 1 << iota
	phaseAbandoned
	phaseHanding
	phaseDeferring
)

// set sets bits on and off in one atomic step and returns the word before.
func (p *phase) set(on, off uint32) uint32 {
	for {
		old := p.bits.Load()
		if p.bits.CompareAndSwap(old, old&^off|on) {
			return old
		}
	}
}

// enter admits a check on the replica's store: it reports whether the
// replica serves, and if it does, holds the read lock until leave.
func (p *phase) enter() bool {
	p.mu.RLock()
	if p.bits.Load()&phaseServing != 0 {
		return true
	}
	p.mu.RUnlock()
	return false
}

// leave ends a check that enter admitted.
func (p *phase) leave() { p.mu.RUnlock() }

// serving reports whether checks run on the replica's store (without the
// lock: a hint for routing, prefetching and status; a check uses enter).
func (p *phase) serving() bool { return p.bits.Load()&phaseServing != 0 }

// serve makes the replica serve: it leads the group and has caught up.
func (p *phase) serve() {
	p.mu.Lock()
	p.set(phaseServing, 0)
	p.mu.Unlock()
}

// stopServing stops the replica serving once the checks under way have
// ended; none changes its store from the moment it returns.
func (p *phase) stopServing() {
	p.mu.Lock() // wait for the checks under way
	p.set(0, phaseServing)
	p.mu.Unlock()
}

// giveUp stops the replica serving, as stopServing, and marks it abandoned:
// its store is rebuilt from the log before it serves again.
func (p *phase) giveUp() {
	p.mu.Lock() // wait for the checks under way
	p.set(phaseAbandoned, phaseServing)
	p.mu.Unlock()
}

// abandoned reports whether the replica gave up and awaits its rebuild.
func (p *phase) abandoned() bool { return p.bits.Load()&phaseAbandoned != 0 }

// takeAbandoned clears abandoned and reports whether it was set: the one
// who takes it rebuilds the store.
func (p *phase) takeAbandoned() bool { return p.set(0, phaseAbandoned)&phaseAbandoned != 0 }

// beginHandOff marks a hand-over under way; false if one already is.
func (p *phase) beginHandOff() bool { return p.set(phaseHanding, 0)&phaseHanding == 0 }

// endHandOff ends the hand-over that beginHandOff began.
func (p *phase) endHandOff() { p.set(0, phaseHanding) }

// handingOff reports whether a hand-over is under way.
func (p *phase) handingOff() bool { return p.bits.Load()&phaseHanding != 0 }

// deferElection marks the replica as started with longer election
// timeouts (deferTo), before its raft starts.
func (p *phase) deferElection() { p.set(phaseDeferring, 0) }

// endDeferral clears deferring and reports whether it was set: the one who
// clears it restores the usual timeouts.
func (p *phase) endDeferral() bool { return p.set(0, phaseDeferring)&phaseDeferring != 0 }

// deferring reports whether the replica still has its deferred timeouts.
func (p *phase) deferring() bool { return p.bits.Load()&phaseDeferring != 0 }

// String names the phase for logs and tests: following, serving,
// abandoned, with "handing over" and "deferring" added when they hold.
func (p *phase) String() string {
	b := p.bits.Load()
	s := "following"
	switch {
	case b&phaseServing != 0:
		s = "serving"
	case b&phaseAbandoned != 0:
		s = "abandoned"
	}
	if b&phaseHanding != 0 {
		s += ", handing over"
	}
	if b&phaseDeferring != 0 {
		s += ", deferring"
	}
	return s
}
