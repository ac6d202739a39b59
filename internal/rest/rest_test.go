package rest

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// fake is a Governor whose parallelism and CPU are counters, driven tick
// by tick on a made-up clock.
type fake struct {
	g     *Governor
	now   time.Time
	cpu   time.Duration
	procs int
	rests int
}

func newFake(after time.Duration) *fake {
	f := &fake{now: time.Unix(1e9, 0), procs: 4}
	f.g = New(after)
	f.g.Rest = func() { f.procs = 1; f.rests++ }
	f.g.Wake = func() { f.procs = 4 }
	f.g.CPU = func() time.Duration { return f.cpu }
	f.g.quietSince = f.now
	return f
}

// tick advances the clock by a second in which the process used used of
// CPU, and runs the Governor's step.
func (f *fake) tick(used time.Duration) {
	f.now = f.now.Add(time.Second)
	f.cpu += used
	f.g.step(f.now, f.cpu, time.Second)
}

func TestRestsAfterQuietAndWakesWhenBusy(t *testing.T) {
	f := newFake(5 * time.Second)
	for i := 1; i <= 4; i++ {
		f.tick(20 * time.Millisecond) // 2% of a core: quiet
		if f.procs != 4 || f.g.Resting() {
			t.Fatalf("after %d quiet ticks: %d procs, resting %v; want 4, not resting before 5 s", i, f.procs, f.g.Resting())
		}
	}
	f.tick(20 * time.Millisecond)
	if f.procs != 1 || !f.g.Resting() {
		t.Fatalf("after 5 quiet ticks: %d procs, resting %v; want 1, resting", f.procs, f.g.Resting())
	}
	f.tick(150 * time.Millisecond) // still under Busy
	if f.procs != 1 {
		t.Fatalf("a quiet tick woke it: %d procs", f.procs)
	}
	f.tick(400 * time.Millisecond) // a follower replicating: busy
	if f.procs != 4 || f.g.Resting() {
		t.Fatalf("after a busy tick: %d procs, resting %v; want 4, awake", f.procs, f.g.Resting())
	}
	// Quiet again: it rests After later, not at once.
	for i := 0; i < 4; i++ {
		f.tick(0)
	}
	if f.procs != 4 {
		t.Fatalf("rested again %v after being busy, want %v", 4*time.Second, 5*time.Second)
	}
	f.tick(0)
	if f.procs != 1 || f.rests != 2 {
		t.Fatalf("%d procs after %d rests; want 1 after 2", f.procs, f.rests)
	}
}

// TestRestsOnABusyHost: an idle cluster node on a busy host used 6.5-8%
// of a core a second (its timers' wake-ups cost more there), and it must
// rest there too, where resting saves the most.
func TestRestsOnABusyHost(t *testing.T) {
	f := newFake(5 * time.Second)
	for i := 0; i < 5; i++ {
		f.tick(80 * time.Millisecond)
	}
	if f.procs != 1 || !f.g.Resting() {
		t.Fatalf("after 5 ticks at 8%% of a core: %d procs, resting %v; want 1, resting", f.procs, f.g.Resting())
	}
	for i := 0; i < 5; i++ {
		f.tick(80 * time.Millisecond)
	}
	if f.procs != 1 || f.rests != 1 {
		t.Fatalf("at 8%% of a core: %d procs after %d rests; want 1 after 1", f.procs, f.rests)
	}
}

func TestTouchKeepsItAwake(t *testing.T) {
	f := newFake(3 * time.Second)
	for i := 0; i < 10; i++ {
		f.g.Touch() // a request every second, at no CPU cost
		f.tick(0)
	}
	if f.rests != 0 {
		t.Fatalf("rested %d times with a request every second", f.rests)
	}
	for i := 0; i < 3; i++ {
		f.tick(0)
	}
	if f.procs != 1 {
		t.Fatalf("%d procs 3 s after the last request, want 1", f.procs)
	}
	f.g.Touch()
	f.tick(0)
	if f.procs != 4 {
		t.Fatalf("%d procs at the tick after a request, want 4", f.procs)
	}
}

// TestTouchWakesARestingProcessAtOnce runs the Governor's loop with ticks
// an hour apart: the request alone must give the cores back.
func TestTouchWakesARestingProcessAtOnce(t *testing.T) {
	g := New(time.Hour)
	g.Every = time.Hour
	var procs atomic.Int32
	procs.Store(4)
	changed := make(chan bool, 4)
	g.Rest = func() { procs.Store(1) }
	g.Wake = func() { procs.Store(4) }
	g.CPU = func() time.Duration { return 0 }
	g.OnChange = func(r bool) { changed <- r }
	// Rest it by hand, as step would have.
	g.change(true)
	<-changed
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Run(ctx); close(done) }()
	g.Touch()
	select {
	case r := <-changed:
		if r || procs.Load() != 4 {
			t.Fatalf("after a request: resting %v, %d procs", r, procs.Load())
		}
	case <-time.After(time.Minute):
		t.Fatal("a request did not wake the resting process")
	}
	// Resting again when ctx ends gives the cores back.
	g.change(true)
	<-changed
	cancel()
	<-done
	if procs.Load() != 4 || g.Resting() {
		t.Fatalf("after Run returned: %d procs, resting %v", procs.Load(), g.Resting())
	}
}

func TestARequestWhileGoingToRestWakesIt(t *testing.T) {
	f := newFake(time.Second)
	f.g.Rest = func() {
		f.procs = 1
		f.g.Touch() // the request that comes between the decision and the rest
	}
	f.tick(0)
	if f.procs != 4 || f.g.Resting() {
		t.Fatalf("%d procs, resting %v; want it awake again", f.procs, f.g.Resting())
	}
}

// TestDefaultsChangeGOMAXPROCS checks New's defaults on the test process
// itself: Rest runs Go code on one P, Wake gives back the default.
func TestDefaultsChangeGOMAXPROCS(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: GOMAXPROCS is 1 either way")
	}
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	g := New(time.Second)
	g.Rest()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("GOMAXPROCS %d after Rest, want 1", n)
	}
	g.Wake()
	if n := runtime.GOMAXPROCS(0); n < 2 {
		t.Fatalf("GOMAXPROCS %d after Wake, want the default (%d CPUs)", n, runtime.NumCPU())
	}
	if c := g.CPU(); c <= 0 {
		t.Fatalf("the process's CPU time: %v", c)
	}
}
