package script

import (
	"sync"
	"sync/atomic"
	"time"
)

// The watchdog. The hook looks at a run every checkEvery instructions, but
// one instruction can take long (t[n] = v filling a large array part, a
// long string.rep, a command that takes time): while a run is in
// progress, the watchdog pokes every state every pokeEvery, and a poked
// hook looks at its run before the next instruction. So a run is looked
// at no more than pokeEvery after it turns busy, is killed, or allocates.
// The watchdog's goroutine sleeps while no run is in progress, and ends
// with Engine.Close.

const pokeEvery = 500 * time.Microsecond

type watchdog struct {
	mu     sync.Mutex
	states map[*state]struct{}
	active atomic.Int32 // runs in the interpreter now
	wake   chan struct{}
	stop   chan struct{}
	start  sync.Once
	closed sync.Once
}

func (w *watchdog) init() {
	w.states = map[*state]struct{}{}
	w.wake = make(chan struct{}, 1)
	w.stop = make(chan struct{})
}

// add and remove keep the set of states to poke.
func (w *watchdog) add(st *state) {
	w.mu.Lock()
	w.states[st] = struct{}{}
	w.mu.Unlock()
}

func (w *watchdog) remove(st *state) {
	w.mu.Lock()
	delete(w.states, st)
	w.mu.Unlock()
}

// begin and end bracket a run in the interpreter.
func (w *watchdog) begin() {
	w.start.Do(func() { go w.loop() })
	if w.active.Add(1) == 1 {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *watchdog) end() { w.active.Add(-1) }

// close stops the goroutine.
func (w *watchdog) close() { w.closed.Do(func() { close(w.stop) }) }

func (w *watchdog) loop() {
	t := time.NewTimer(pokeEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		}
		for w.active.Load() > 0 {
			w.pokeAll()
			t.Reset(pokeEvery)
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}
}

func (w *watchdog) pokeAll() {
	w.mu.Lock()
	for st := range w.states {
		st.hook.poke.Store(true)
	}
	w.mu.Unlock()
}
