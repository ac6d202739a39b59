package statuspage

import (
	"context"
	"slices"
	"testing"
	"time"
)

// t0 is the fake clock's start: a whole second.
var t0 = time.Unix(1_700_000_000, 0)

// TestSeriesRecord: each step samples the counters at a time; the ring
// then holds the growth per second, missed seconds sharing the growth
// evenly, a second's later samples ignored, the oldest seconds dropped.
func TestSeriesRecord(t *testing.T) {
	type step struct {
		at             time.Duration // after t0
		checks, denied uint64
		wantStart      time.Duration // start_unix_ms, after t0
		wantChecks     []uint64
		wantDenied     []uint64
	}
	steps := []step{
		{0, 100, 10, 0, []uint64{}, []uint64{}}, // the base
		{1 * time.Second, 150, 12, 0, []uint64{50}, []uint64{2}},
		{1500 * time.Millisecond, 999, 99, 0, []uint64{50}, []uint64{2}}, // same second: ignored
		{2 * time.Second, 160, 12, 0, []uint64{50, 10}, []uint64{2, 0}},
		{5 * time.Second, 170, 17, time.Second, []uint64{10, 3, 3, 4}, []uint64{0, 1, 2, 2}},     // 2 missed seconds; ring of 4
		{6 * time.Second, 100, 5, 2 * time.Second, []uint64{3, 3, 4, 0}, []uint64{1, 2, 2, 0}},   // went back: no growth
		{20 * time.Second, 140, 9, 16 * time.Second, []uint64{3, 3, 3, 3}, []uint64{1, 0, 0, 1}}, // a gap wider than the ring
	}
	s := NewSeries(4)
	for i, st := range steps {
		s.Record(t0.Add(st.at), Totals{Checks: st.checks, Denied: st.denied})
		d := s.Data()
		if !slices.Equal(d.Checks, st.wantChecks) || !slices.Equal(d.Denied, st.wantDenied) {
			t.Fatalf("step %d: checks %v denied %v, want %v %v", i, d.Checks, d.Denied, st.wantChecks, st.wantDenied)
		}
		if want := t0.Add(st.wantStart).UnixMilli(); d.StartUnixMs != want || d.IntervalMs != 1000 {
			t.Fatalf("step %d: start %d interval %d, want %d 1000", i, d.StartUnixMs, d.IntervalMs, want)
		}
	}
}

// TestSeriesSample: Sample records at each tick's time until its context
// ends.
func TestSeriesSample(t *testing.T) {
	s := NewSeries(0)
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var n uint64
	go func() {
		s.Sample(ctx, tick, func() Totals { n += 7; return Totals{Checks: n, Denied: n / 7} })
		close(done)
	}()
	for i := 0; i < 4; i++ {
		tick <- t0.Add(time.Duration(i) * time.Second)
	}
	cancel()
	<-done
	d := s.Data()
	if !slices.Equal(d.Checks, []uint64{7, 7, 7}) || !slices.Equal(d.Denied, []uint64{1, 1, 1}) {
		t.Errorf("after 4 ticks: %+v", d)
	}
	if len(NewSeries(0).checks) != DefaultSeconds {
		t.Errorf("NewSeries(0) keeps %d seconds, want %d", len(NewSeries(0).checks), DefaultSeconds)
	}
}
