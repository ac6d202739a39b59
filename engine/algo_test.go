package engine

import "testing"

func TestParseAlgo(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Algo // 0: rejected
	}{
		{"fixed", Fixed},
		{"FIXED", Fixed},
		{"Sliding", Sliding},
		{"lOg", Log},
		{"TOKEN", Token},
		{"Leaky", Leaky},
		{"gcra", GCRA},
		{"GCRA", GCRA},
		{"", 0},
		{"lo", 0},
		{"fix", 0},
		{"fixedd", 0},
		{"slidingx", 0},
		{" log", 0},
		{"gcra ", 0},
		{"tokens", 0},
		{"leaky\x00", 0},
		{"to\u212aen", 0}, // KELVIN SIGN folds to k in Unicode, not here
		{"algo(1)", 0},
		{"1", 0},
	} {
		got, ok := ParseAlgo([]byte(c.in))
		if ok != (c.want != 0) || got != c.want {
			t.Errorf("ParseAlgo(%q) = %v, %v; want %v", c.in, got, ok, c.want)
		}
	}
}

func FuzzParseAlgo(f *testing.F) {
	for _, s := range []string{"fixed", "SLIDING", "Log", "tokens", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := ParseAlgo(b)
		lower := make([]byte, len(b))
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		var want Algo
		for _, x := range allAlgos {
			if x.String() == string(lower) {
				want = x
			}
		}
		if a != want || ok != (want != 0) {
			t.Fatalf("ParseAlgo(%q) = %v, %v; want %v", b, a, ok, want)
		}
	})
}

func TestParseAlgoAllocs(t *testing.T) {
	in := [][]byte{[]byte("SLIDING"), []byte("gcra"), []byte("nope"), []byte("tokens!")}
	allocs := testing.AllocsPerRun(100, func() {
		for _, b := range in {
			ParseAlgo(b)
		}
	})
	if allocs != 0 {
		t.Fatalf("ParseAlgo allocates %v times per run", allocs)
	}
}

func TestAlgoNames(t *testing.T) {
	want := []string{"algo(0)", "fixed", "sliding", "log", "token", "leaky", "gcra", "algo(7)", "algo(255)"}
	for i, a := range []Algo{0, 1, 2, 3, 4, 5, 6, 7, 255} {
		if got := a.String(); got != want[i] {
			t.Errorf("Algo(%d).String() = %q, want %q", a, got, want[i])
		}
		if got := a.Valid(); got != (a >= 1 && a <= 6) {
			t.Errorf("Algo(%d).Valid() = %v", a, got)
		}
		if got := a.Bucket(); got != (a == Token || a == Leaky || a == GCRA) {
			t.Errorf("Algo(%d).Bucket() = %v", a, got)
		}
	}
	if NumAlgos != 7 {
		t.Errorf("NumAlgos = %d", NumAlgos)
	}
}

func TestCapacity(t *testing.T) {
	p := Params{Limit: 10, Window: sec, Burst: 25}
	for _, a := range allAlgos {
		want := int64(10)
		if a.Bucket() {
			want = 25
		}
		if got := p.Capacity(a); got != want {
			t.Errorf("%v: Capacity = %d, want %d", a, got, want)
		}
		if got := (Params{Limit: 10, Window: sec}).Capacity(a); got != 10 {
			t.Errorf("%v without burst: Capacity = %d, want 10", a, got)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		a    Algo
		p    Params
		want error
	}{
		{Fixed, Params{1, sec, 0}, nil},
		{Fixed, Params{0, sec, 0}, ErrLimit},
		{Fixed, Params{-1, sec, 0}, ErrLimit},
		{Log, Params{MaxLimit, sec, 0}, nil},
		{Log, Params{MaxLimit + 1, sec, 0}, ErrLimit},
		{Sliding, Params{1, MinWindow, 0}, nil},
		{Sliding, Params{1, MinWindow - 1, 0}, ErrWindow},
		{Sliding, Params{1, MaxWindow, 0}, nil},
		{Sliding, Params{1, MaxWindow + 1, 0}, ErrWindow},
		{Token, Params{1, sec, -1}, ErrBurst},
		{Fixed, Params{1, sec, MaxLimit + 1}, ErrBurst},
		{Token, Params{1, MaxWindow, 100}, nil}, // exactly 100 × 366 days
		{Token, Params{1, MaxWindow, 101}, ErrSpan},
		{Leaky, Params{1, MaxWindow, 101}, ErrSpan},
		{GCRA, Params{1, MaxWindow, 101}, ErrSpan},
		{Fixed, Params{1, MaxWindow, 101}, nil}, // burst is ignored
		{GCRA, Params{1e6, MinWindow, 0}, nil},  // 1 ns apart
		{GCRA, Params{2e6, MinWindow, 0}, ErrRate},
		{Token, Params{2e6, MinWindow, 0}, nil},
	} {
		if got := c.p.Validate(c.a); got != c.want {
			t.Errorf("%v %+v: Validate = %v, want %v", c.a, c.p, got, c.want)
		}
	}
}

func TestValidCost(t *testing.T) {
	for _, c := range []struct {
		cost int64
		want bool
	}{{-1, false}, {0, true}, {1, true}, {MaxLimit, true}, {MaxLimit + 1, false}} {
		if got := ValidCost(c.cost); got != c.want {
			t.Errorf("ValidCost(%d) = %v", c.cost, got)
		}
	}
}

func TestCheckInvalidAlgoPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || r != "engine: invalid algorithm algo(0)" {
			t.Fatalf("recovered %v", r)
		}
	}()
	Check(0, &State{}, Params{Limit: 1, Window: sec}, 1, base)
}
