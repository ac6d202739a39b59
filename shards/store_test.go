package shards

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

const sec = int64(1e9)

var minute = engine.Params{Limit: 3, Window: 60 * sec}

func TestCheckCountsAndDenies(t *testing.T) {
	s := New(4)
	now := 1000 * 60 * sec // aligned to a minute
	for i, want := range []bool{true, true, true, false} {
		r, err := s.Check([]byte("k"), engine.Fixed, minute, 1, now)
		if err != nil || r.Allowed != want {
			t.Fatalf("check %d: allowed=%v err=%v, want %v", i, r.Allowed, err, want)
		}
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("Len = %d, want 1", n)
	}
}

func TestWrongType(t *testing.T) {
	s := New(1)
	if _, err := s.Check([]byte("k"), engine.Token, minute, 1, sec); err != nil {
		t.Fatal(err)
	}
	_, err := s.Check([]byte("k"), engine.Fixed, minute, 1, sec)
	var wt *WrongTypeError
	if !errors.As(err, &wt) || !errors.Is(err, ErrWrongType) || wt.Held != engine.Token || wt.Want != engine.Fixed {
		t.Fatalf("err = %v, want WRONGTYPE token→fixed", err)
	}
	if _, err := s.Throttle([]byte("k"), 1, 1, 1, 1, sec); !errors.Is(err, ErrWrongType) {
		t.Fatalf("Throttle on token key: err = %v, want WRONGTYPE", err)
	}
	// A key whose state expired is free to change algorithm.
	if _, err := s.Check([]byte("k"), engine.Fixed, minute, 1, 10*60*sec); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

func TestFreshStateIsNotStored(t *testing.T) {
	s := New(1)
	// COST 0 on a new key and a denied request leave nothing behind.
	if _, err := s.Check([]byte("peek"), engine.Log, minute, 0, sec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check([]byte("big"), engine.Token, minute, 5, sec); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len = %d, want 0", n)
	}
	if m := s.MemoryBytes(); m != 0 {
		t.Fatalf("MemoryBytes = %d, want 0", m)
	}
}

func TestLazyExpiryAndSweep(t *testing.T) {
	s := New(8)
	for i := 0; i < 1000; i++ {
		key := []byte(fmt.Sprintf("k%d", i))
		if _, err := s.Check(key, engine.GCRA, minute, 1, sec); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Len(); n != 1000 {
		t.Fatalf("Len = %d, want 1000", n)
	}
	if s.MemoryBytes() <= 1000*entryOverhead {
		t.Fatalf("MemoryBytes = %d, want > %d", s.MemoryBytes(), 1000*entryOverhead)
	}
	// One GCRA admission of 3 per minute expires 20 s later.
	if got := s.Sweep(20*sec, 1000); got != 0 {
		t.Fatalf("Sweep before expiry dropped %d keys", got)
	}
	later := 22 * sec
	ok, err := s.Reset([]byte("k1"), later)
	if ok || err != nil {
		t.Fatalf("Reset of an expired key = %v, %v; want false (lazily expired)", ok, err)
	}
	dropped := 0
	for i := 0; i < 10 && s.Len() > 0; i++ {
		dropped += s.Sweep(later, 16)
	}
	if s.Len() != 0 || dropped != 999 {
		t.Fatalf("after sweeping: Len = %d, dropped %d; want 0 and 999", s.Len(), dropped)
	}
	if m := s.MemoryBytes(); m != 0 {
		t.Fatalf("MemoryBytes after sweep = %d, want 0", m)
	}
}

func TestSweepIsBounded(t *testing.T) {
	s := New(1)
	for i := 0; i < 500; i++ {
		s.Check([]byte(fmt.Sprintf("k%d", i)), engine.Fixed, minute, 1, sec)
	}
	// Everything has expired; one call drops at most 4 rounds of 10.
	if got := s.Sweep(3600*sec, 10); got > 40 || got < 10 {
		t.Fatalf("Sweep(limit 10) dropped %d keys, want 10..40", got)
	}
}

func TestClockNeverGoesBack(t *testing.T) {
	s := New(1)
	p := engine.Params{Limit: 2, Window: 10 * sec}
	s.Check([]byte("k"), engine.Log, p, 2, 100*sec)
	// A request stamped earlier than one already applied runs at the later
	// time: the log stays ordered and the limit holds.
	r, _ := s.Check([]byte("k"), engine.Log, p, 1, 95*sec)
	if r.Allowed {
		t.Fatal("a request stamped in the past was admitted past the limit")
	}
}

func TestResetAndFlush(t *testing.T) {
	s := New(2)
	s.Check([]byte("a"), engine.Fixed, minute, 1, sec)
	s.Check([]byte("b"), engine.Fixed, minute, 1, sec)
	if ok, _ := s.Reset([]byte("a"), sec); !ok {
		t.Fatal("Reset(a) = false, want true")
	}
	if ok, _ := s.Reset([]byte("a"), sec); ok {
		t.Fatal("second Reset(a) = true, want false")
	}
	s.Flush()
	if s.Len() != 0 || s.MemoryBytes() != 0 {
		t.Fatalf("after Flush: Len %d, MemoryBytes %d", s.Len(), s.MemoryBytes())
	}
}

func TestThrottleMatchesRedisCell(t *testing.T) {
	s := New(1)
	r, err := s.Throttle([]byte("user123"), 15, 30, 60, 1, 1000*sec)
	if err != nil {
		t.Fatal(err)
	}
	got := []int64{b2i(r.Limited), r.Limit, r.Remaining, engine.CellSeconds(r.RetryAfter), engine.CellSeconds(r.ResetAfter)}
	if fmt.Sprint(got) != "[0 16 15 -1 2]" {
		t.Fatalf("CL.THROTTLE user123 15 30 60 1 = %v, want [0 16 15 -1 2]", got)
	}
	if _, err := s.Throttle([]byte("z"), 1, 0, 60, 1, sec); !errors.Is(err, engine.ErrZeroRate) {
		t.Fatalf("zero rate: err = %v", err)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestConcurrentExactAdmissions: 32 goroutines × 100 checks on one key with
// limit 1000 per hour admit exactly 1000 for the window algorithms.
func TestConcurrentExactAdmissions(t *testing.T) {
	for _, a := range []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			s := New(16)
			p := engine.Params{Limit: 1000, Window: 3600 * sec}
			start := int64(1_700_000_000) * sec / (3600 * sec) * (3600 * sec)
			var mu sync.Mutex
			admitted := 0
			var wg sync.WaitGroup
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					n := 0
					for i := 0; i < 100; i++ {
						// Time advances a microsecond per call: refill over the
						// run is far below one request.
						r, err := s.Check([]byte("hot"), a, p, 1, start+int64(g*100+i)*1000)
						if err != nil {
							t.Error(err)
							return
						}
						if r.Allowed {
							n++
						}
					}
					mu.Lock()
					admitted += n
					mu.Unlock()
				}(g)
			}
			wg.Wait()
			if admitted != 1000 {
				t.Fatalf("%s admitted %d of 3200, want exactly 1000", a, admitted)
			}
		})
	}
}
