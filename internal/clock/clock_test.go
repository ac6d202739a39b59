package clock

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testseed"
)

// fake is a Source the test moves: pass lets time pass on both clocks,
// step steps the wall clock alone.
type fake struct{ wall, mono atomic.Int64 }

func newFake(wall int64) *fake {
	f := &fake{}
	f.wall.Store(wall)
	f.mono.Store(1e9) // any origin
	return f
}

func (f *fake) Read() (int64, int64) { return f.wall.Load(), f.mono.Load() }

func (f *fake) pass(d time.Duration) {
	f.mono.Add(int64(d))
	f.wall.Add(int64(d))
}

func (f *fake) step(d time.Duration) { f.wall.Add(int64(d)) }

// t0 is the tests' start time, an arbitrary instant.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()

// TestClockFollowsTheRule: a table of wall steps and elapsed time, read
// after each row: the decision time (from the start) and the offset.
func TestClockFollowsTheRule(t *testing.T) {
	type row struct {
		name       string
		pass, step time.Duration // time passing, then a step of the wall clock
		want       time.Duration // decision time since t0
		wantOffset time.Duration
	}
	const h, d = time.Hour, 24 * time.Hour
	for _, tc := range []struct {
		name string
		rows []row
	}{
		{"no step: the wall clock exactly", []row{
			{"start", 0, 0, 0, 0},
			{"a second", time.Second, 0, time.Second, 0},
			{"a day", d, 0, d + time.Second, 0},
		}},
		{"a step back of an hour: 99% of real time until it meets the wall clock", []row{
			{"a minute", time.Minute, 0, time.Minute, 0},
			{"the step: no elapsed time, no move", 0, -h, time.Minute, h},
			{"a minute of real time", time.Minute, 0, 2*time.Minute - 600*time.Millisecond, h - 600*time.Millisecond},
			{"another 100 s", 100 * time.Second, 0, 2*time.Minute + 99*time.Second - 600*time.Millisecond, h - 1600*time.Millisecond},
			{"99 h more: 59.4 min of the hour absorbed", 99 * h, 0,
				99*h + 2*time.Minute + 99*time.Second - 600*time.Millisecond - 99*h/100, h - 1600*time.Millisecond - 99*h/100},
			{"2 h more: met, then the wall clock exactly", 2 * h, 0, 100*h + 3*time.Minute + 40*time.Second, 0},
		}},
		{"a step forward of a day: 101% of real time", []row{
			{"a second", time.Second, 0, time.Second, 0},
			{"the step", 0, d, time.Second, -d},
			{"100 s", 100 * time.Second, 0, 102 * time.Second, -d + time.Second},
			{"a day", d, 0, 102*time.Second + d + d/100, -d + time.Second + d/100},
		}},
		{"a step forward and back within a minute: nothing moved", []row{
			{"a second", time.Second, 0, time.Second, 0},
			{"forward", 0, d, time.Second, -d},
			{"30 s", 30 * time.Second, 0, 30*time.Second + 300*time.Millisecond + time.Second, -d + 300*time.Millisecond},
			{"back", 0, -d, 31*time.Second + 300*time.Millisecond, 300 * time.Millisecond},
			{"30 s: back on the wall clock", 30 * time.Second, 0, 61 * time.Second, 0},
		}},
		{"small gaps close within the reading", []row{
			{"a second", time.Second, 0, time.Second, 0},
			{"NTP-sized step", 0, -50 * time.Millisecond, time.Second, 50 * time.Millisecond},
			{"5 s later it is met", 5 * time.Second, 0, 6*time.Second - 50*time.Millisecond, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t0)
			c := New(f)
			for _, r := range tc.rows {
				f.pass(r.pass)
				f.step(r.step)
				dt, w := c.Read()
				if got := time.Duration(dt - t0); got != r.want {
					t.Errorf("%s: decision time t0%+v, want t0%+v", r.name, got, r.want)
				}
				if got := time.Duration(dt - w); got != r.wantOffset {
					t.Errorf("%s: offset %v, want %v", r.name, got, r.wantOffset)
				}
				if off := time.Duration(c.Offset()); off != r.wantOffset {
					t.Errorf("%s: Offset() %v, want %v", r.name, off, r.wantOffset)
				}
			}
		})
	}
}

// TestClockReadsBetweenAnchors: readings less than a millisecond apart
// do not move the anchor, and still follow the rule.
func TestClockReadsBetweenAnchors(t *testing.T) {
	f := newFake(t0)
	c := New(f)
	f.step(-time.Hour)
	var last int64
	for i := 1; i <= 5000; i++ {
		f.pass(300 * time.Microsecond)
		d := c.Now()
		if d < last {
			t.Fatalf("reading %d: %d after %d", i, d, last)
		}
		last = d
	}
	// 1.5 s passed: the clock ran at 99%, within the anchors' rounding.
	if got, want := time.Duration(last-t0), 1500*time.Millisecond*99/100; got < want-time.Millisecond || got > want+time.Millisecond {
		t.Fatalf("after 1.5 s: t0%+v, want about t0%+v", got, want)
	}
}

// TestAtLeast: raising the clock to a later time moves it there; it then
// converges on the wall clock at 99%. An earlier time changes nothing.
func TestAtLeast(t *testing.T) {
	f := newFake(t0)
	c := New(f)
	f.pass(time.Second)
	if by := c.AtLeast(t0); by != 0 {
		t.Fatalf("AtLeast(an earlier time) moved the clock by %d", by)
	}
	if by := time.Duration(c.AtLeast(t0 + int64(10*time.Minute))); by != 10*time.Minute-time.Second {
		t.Fatalf("AtLeast(t0+10m) moved it by %v, want 9m59s", by)
	}
	if got := time.Duration(c.Now() - t0); got != 10*time.Minute {
		t.Fatalf("after AtLeast: t0%+v, want t0+10m", got)
	}
	f.pass(100 * time.Second)
	if got := time.Duration(c.Now() - t0); got != 10*time.Minute+99*time.Second {
		t.Fatalf("100 s later: t0%+v, want t0+10m99s", got)
	}
	if c.Raised() != int64(10*time.Minute-time.Second) {
		t.Fatalf("Raised() = %v", time.Duration(c.Raised()))
	}
}

// TestClockBoundsRandomSteps: random wall steps and gaps, replayable by
// seed. Between any two readings, the decision time moves by the time
// that passed give or take 1% (and 1 ns of rounding per anchor); it never
// moves back; and once the wall clock stops stepping, the clock meets it
// within 100 times the gap.
func TestClockBoundsRandomSteps(t *testing.T) {
	rng := testseed.Rand(t)
	f := newFake(t0)
	c := New(f)
	last, lastMono := c.Now(), f.mono.Load()
	for i := 0; i < 20000; i++ {
		if rng.IntN(50) == 0 {
			f.step(time.Duration(rng.Int64N(int64(48*time.Hour))) - 24*time.Hour)
		}
		f.pass(time.Duration(rng.Int64N(int64(10 * time.Second))))
		d, m := c.Now(), f.mono.Load()
		e := m - lastMono
		// A reading less than anchorEvery after the last one left the
		// anchor where it was: 2/Slew of that on top.
		slack := int64(2*anchorEvery/Slew + 1)
		if lo, hi := e-e/Slew-slack, e+e/Slew+slack; d-last < lo || d-last > hi {
			t.Fatalf("reading %d: moved %d in %d ns, want %d to %d", i, d-last, e, lo, hi)
		}
		last, lastMono = d, m
	}
	gap := c.Offset()
	f.pass(time.Duration(max(gap, -gap) * Slew))
	if off := c.Offset(); off != 0 {
		t.Fatalf("offset %v left after %d times the gap %v", time.Duration(off), Slew, time.Duration(gap))
	}
}

// TestClockConcurrentReaders: readers on several goroutines while the
// wall clock steps back and forth (run with -race). Each goroutine's
// readings never go back by more than the anchors' bound.
func TestClockConcurrentReaders(t *testing.T) {
	f := newFake(t0)
	c := New(f)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := c.Now()
				if d < last-2*anchorEvery/Slew-1 {
					t.Errorf("went back by %d ns", last-d)
					return
				}
				last = max(last, d)
			}
		}()
	}
	for i := 0; i < 20000; i++ {
		f.pass(100 * time.Microsecond)
		if i%1000 == 0 {
			f.step(time.Duration(i%3000-1000) * time.Millisecond)
		}
		if i%100 == 0 {
			c.AtLeast(c.Now() + 10)
		}
	}
	close(stop)
	wg.Wait()
}

// TestNowAllocatesNothing: Now is on every check's path.
func TestNowAllocatesNothing(t *testing.T) {
	f := newFake(t0)
	c := New(f)
	if n := testing.AllocsPerRun(1000, func() {
		f.pass(time.Millisecond)
		c.Now()
	}); n != 0 {
		t.Fatalf("Now allocates %v times", n)
	}
}

// BenchmarkNow: a reading on the system's clocks, as rlserver takes one
// per pipelined batch, against time.Now alone.
func BenchmarkNow(b *testing.B) {
	start := time.Now()
	c := New(SourceFunc(func() (int64, int64) {
		t := time.Now()
		return t.UnixNano(), int64(t.Sub(start))
	}))
	b.Run("clock", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Now()
			}
		})
	})
	b.Run("time.Now", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = time.Now().UnixNano()
			}
		})
	})
}
