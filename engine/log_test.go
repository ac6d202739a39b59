package engine

import (
	"reflect"
	"testing"
)

func TestLogSteps(t *testing.T) {
	// 3 per 10 s; an entry at a counts in (now-W, now], so it leaves at a+W.
	k := newKey(t, Log, base)
	k.run(Params{Limit: 3, Window: 10 * sec}, []step{
		{0, 1, true, 2, 0, 10 * sec},
		{2 * sec, 1, true, 1, 0, 10 * sec},
		{2 * sec, 1, true, 0, 0, 10 * sec},
		{1 * sec, 1, false, 0, 5 * sec, 9 * sec}, // the entry at 0 leaves at 10
		{5 * sec, 1, true, 0, 0, 10 * sec},       // t=10: 0 is out, (0,10] holds 2,4
		{1 * sec, 2, false, 0, 3 * sec, 9 * sec}, // needs 2 and 4 gone: t=14
		{1 * sec, 1, true, 0, 0, 10 * sec},       // t=12: 2 is out
		{0, 0, true, 0, 0, 10 * sec},             // COST 0 peeks
		{0, 4, false, 0, -1, 10 * sec},           // cost > limit
		{2 * sec, 2, false, 1, 6 * sec, 8 * sec}, // t=14: 4 out; 10 must go too
		{0, 1, true, 0, 0, 10 * sec},             // log 10, 12, 14
		{6*sec - 1, 1, false, 0, 1, 4*sec + 1},   // 1 ns before 10 leaves
		{1, 1, true, 0, 0, 10 * sec},             // t=20
		{40 * sec, 3, true, 0, 0, 10 * sec},      // idle, then all at once
		{0, 0, true, 0, 0, 10 * sec},             //
		{10*sec - 1, 1, false, 0, 1, 1},          // the 3 at one instant
		{1, 1, true, 2, 0, 10 * sec},             // leave together
	})
}

func TestLogParamChange(t *testing.T) {
	k := newKey(t, Log, base)
	k.run(Params{Limit: 2, Window: 10 * sec}, []step{
		{0, 1, true, 1, 0, 10 * sec},
		{1 * sec, 1, true, 0, 0, 10 * sec},
		{1 * sec, 1, false, 0, 8 * sec, 9 * sec},
	})
	// Raising the limit admits more at once; the entries are kept.
	k.run(Params{Limit: 4, Window: 10 * sec}, []step{
		{0, 1, true, 1, 0, 10 * sec},
	})
	// Lowering it below the logged 3 denies even a peek until 0 leaves.
	k.run(Params{Limit: 2, Window: 10 * sec}, []step{
		{0, 0, false, 0, 8 * sec, 10 * sec},
	})
	// A longer window keeps all four entries (0, 1, 2, 2) for 20 s.
	k.run(Params{Limit: 4, Window: 20 * sec}, []step{
		{0, 1, true, 0, 0, 20 * sec},
		{10 * sec, 1, false, 0, 8 * sec, 10 * sec},
	})
	// A shorter one drops them all at once.
	k.run(Params{Limit: 4, Window: 5 * sec}, []step{
		{0, 1, true, 3, 0, 5 * sec},
	})
}

func TestLogMergesSameInstant(t *testing.T) {
	var st State
	p := Params{Limit: 10, Window: sec}
	for _, c := range []int64{1, 2, 0, 3} {
		Check(Log, &st, p, c, base)
	}
	Check(Log, &st, p, 1, base+1)
	want := []Entry{{base, 6}, {base + 1, 1}}
	if got := entries(&st); !reflect.DeepEqual(got, want) {
		t.Fatalf("entries = %v, want %v", got, want)
	}
	if got, want := ExpiresAt(Log, &st, p), base+1+sec; got != want {
		t.Fatalf("ExpiresAt = %d, want %d", got, want)
	}
}

func TestLogPeekOnFreshKeyKeepsNoRing(t *testing.T) {
	var st State
	p := Params{Limit: 3, Window: sec}
	Check(Log, &st, p, 0, base)
	Check(Log, &st, p, 4, base)
	if st.Log != nil {
		t.Fatalf("a peek and a denial created a ring: %v", entries(&st))
	}
	if got := ExpiresAt(Log, &st, p); got != 0 {
		t.Fatalf("ExpiresAt = %d, want 0", got)
	}
}

func TestRing(t *testing.T) {
	var r Ring
	for i := int64(1); i <= 4; i++ {
		r.Push(Entry{At: i, Cost: i})
	}
	r.Push(Entry{At: 4, Cost: 1}) // merged into the newest
	checkRing(t, "filled", &r, []Entry{{1, 1}, {2, 2}, {3, 3}, {4, 5}}, 4)
	r.TrimBefore(2)
	r.Push(Entry{At: 5, Cost: 1})
	r.Push(Entry{At: 6, Cost: 1}) // wraps around to the front
	checkRing(t, "wrapped", &r, []Entry{{3, 3}, {4, 5}, {5, 1}, {6, 1}}, 4)
	r.Push(Entry{At: 7, Cost: 2}) // grows while wrapped
	checkRing(t, "grown", &r, []Entry{{3, 3}, {4, 5}, {5, 1}, {6, 1}, {7, 2}}, 8)
	r.TrimBefore(6)
	checkRing(t, "trimmed", &r, []Entry{{7, 2}}, 8)
	r.TrimBefore(100)
	checkRing(t, "emptied", &r, nil, 8)
	r.Push(Entry{At: 200, Cost: 9})
	checkRing(t, "reused", &r, []Entry{{200, 9}}, 8)
	r.Push(Entry{At: 201, Cost: 1})
	r.TrimBefore(200) // head moves off the front
	r.Reset()
	checkRing(t, "reset", &r, nil, 8)
	r.Push(Entry{At: 100, Cost: 4}) // a reset ring keeps no order from before
	checkRing(t, "after reset", &r, []Entry{{100, 4}}, 8)
}

func checkRing(t *testing.T, name string, r *Ring, want []Entry, wantCap int) {
	t.Helper()
	var got []Entry
	var sum int64
	for i := 0; i < r.Len(); i++ {
		got = append(got, r.At(i))
		sum += r.At(i).Cost
	}
	if !reflect.DeepEqual(got, want) || r.Sum() != sum || r.Cap() != wantCap {
		t.Fatalf("%s: entries %v sum %d cap %d, want %v sum %d cap %d",
			name, got, r.Sum(), r.Cap(), want, sum, wantCap)
	}
	if len(want) > 0 && r.Last() != want[len(want)-1] {
		t.Fatalf("%s: Last = %v, want %v", name, r.Last(), want[len(want)-1])
	}
}

func TestRingLoad(t *testing.T) {
	seq := func(n int) []Entry {
		var es []Entry
		for i := 1; i <= n; i++ {
			es = append(es, Entry{At: int64(10 * i), Cost: int64(i)})
		}
		return es
	}
	var r Ring
	for _, c := range []struct {
		name    string
		load    []Entry
		wantCap int
	}{
		{"into a new ring", seq(3), 4},
		{"grown", seq(5), 8},
		{"grown past double", seq(17), 32},
		{"fewer keep the buffer", seq(2), 32},
		{"none", nil, 32},
	} {
		r.Load(c.load)
		checkRing(t, c.name, &r, c.load, c.wantCap)
	}
	// Into a wrapped ring, then Push as after any other fill.
	var w Ring
	for i := int64(1); i <= 6; i++ {
		w.Push(Entry{At: i, Cost: 1})
		w.TrimBefore(i - 3)
	}
	w.Load(seq(3))
	w.Push(Entry{At: 30, Cost: 4}) // merged into the newest
	w.Push(Entry{At: 31, Cost: 1}) // fills the buffer
	checkRing(t, "loaded, then pushed", &w, []Entry{{10, 1}, {20, 2}, {30, 7}, {31, 1}}, 4)
	w.Push(Entry{At: 32, Cost: 1})
	checkRing(t, "loaded, then grown", &w, []Entry{{10, 1}, {20, 2}, {30, 7}, {31, 1}, {32, 1}}, 8)
}
