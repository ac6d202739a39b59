package engine

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func ringOf(es ...Entry) *Ring {
	r := &Ring{}
	for _, e := range es {
		r.Push(e)
	}
	return r
}

// Version 1 fixtures, encoded by hand from the format in codec.go. They
// must keep decoding to the same states after any change of format.
var goldenStates = []struct {
	name string
	algo Algo
	st   State
	hex  string
}{
	{"fixed", Fixed, State{T: base, N: 3}, "0101808080be87b68bfb2f0600"},
	{"sliding", Sliding, State{T: base, N: 4, P: 7}, "0102808080be87b68bfb2f080e"},
	{"log", Log, State{Log: ringOf(Entry{base + 1, 1}, Entry{base + 2*sec, 2}, Entry{base + 3*sec, 1})},
		"010300000003828080be87b68bfb2f01fecfacf30e0280a8d6b90701"},
	{"log-empty", Log, State{}, "010300000000"},
	{"token", Token, State{T: base + 666666666, N: 2, P: 3}, "0104d49ae4b98cb68bfb2f0406"},
	{"leaky", Leaky, State{T: base + sec, N: 0, P: 3}, "010580a8d6f78eb68bfb2f0006"},
	{"gcra", GCRA, State{T: base + 2*sec}, "010680d0acb196b68bfb2f0000"},
	{"negative", Fixed, State{T: -10 * sec, N: 1}, "0101ff8fdfc04a0200"},
}

func TestGoldenStates(t *testing.T) {
	for _, g := range goldenStates {
		want, err := hex.DecodeString(g.hex)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendState(nil, g.algo, &g.st); !bytes.Equal(got, want) {
			t.Errorf("%s: AppendState = %x, want %s", g.name, got, g.hex)
		}
		a, st, n, err := DecodeState(want)
		if err != nil || a != g.algo || n != len(want) || !stateEqual(&st, &g.st) {
			t.Errorf("%s: DecodeState = %v, %+v %v, %d, %v; want %v, %+v %v", g.name, a, st, entries(&st), n, err,
				g.algo, g.st, entries(&g.st))
		}
	}
}

// checkRoundTrip encodes st after a prefix, decodes it and compares.
func checkRoundTrip(t *testing.T, a Algo, st *State) {
	t.Helper()
	prefix := []byte("xy")
	b := AppendState(prefix, a, st)
	if !bytes.Equal(b[:2], prefix) {
		t.Fatalf("AppendState overwrote the prefix: %x", b)
	}
	b = append(b, 0xff) // trailing bytes are left alone
	got, dec, n, err := DecodeState(b[2:])
	if err != nil || got != a || n != len(b)-3 || !stateEqual(&dec, st) {
		t.Fatalf("%v %+v %v: decoded %v, %+v %v, %d, %v", a, *st, entries(st), got, dec, entries(&dec), n, err)
	}
	if dec.Log != nil && st.Log != nil && dec.Log == st.Log {
		t.Fatalf("decoded state shares the ring")
	}
}

func TestRoundTripEveryAlgo(t *testing.T) {
	rng := newRand(t)
	for _, a := range allAlgos {
		for i := 0; i < 20; i++ {
			var st State
			for _, sg := range genTrace(rng, a, 2) {
				for _, q := range sg.reqs {
					Check(a, &st, sg.p, q.cost, q.at)
					checkRoundTrip(t, a, &st)
				}
			}
		}
	}
	checkRoundTrip(t, GCRA, &State{T: -1 << 63, N: 1<<63 - 1, P: -1})
}

func TestRoundTripLongLog(t *testing.T) {
	// 5000 entries in a ring that has wrapped and grown, one every 7 ms.
	var st State
	p := Params{Limit: 5000, Window: 60 * sec}
	for i := int64(0); i < 20000; i++ {
		if r := Check(Log, &st, p, 1+i%3, base+i*7*ms); !r.Allowed && i < 2500 {
			t.Fatalf("request %d denied", i)
		}
	}
	if st.Log.Len() < 1000 {
		t.Fatalf("only %d entries", st.Log.Len())
	}
	checkRoundTrip(t, Log, &st)
}

func TestDecodeSequence(t *testing.T) {
	var b []byte
	for _, g := range goldenStates {
		b = AppendState(b, g.algo, &g.st)
	}
	for _, g := range goldenStates {
		a, st, n, err := DecodeState(b)
		if err != nil || a != g.algo || !stateEqual(&st, &g.st) {
			t.Fatalf("%s: %v %+v %v", g.name, a, st, err)
		}
		b = b[n:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left", len(b))
	}
}

func TestDecodeStateRejects(t *testing.T) {
	for _, c := range []struct{ name, hex string }{
		{"empty", ""},
		{"version only", "01"},
		{"version 0", "0001000000"},
		{"version 2", "0201000000"},
		{"algo 0", "0100000000"},
		{"algo 7", "0107000000"},
		{"truncated T", "010180"},
		{"missing P", "01010000"},
		{"varint overflow", "0101ffffffffffffffffff02" + "0000"},
		{"log without count", "0103000000"},
		{"log count beyond input", "01030000000302020202"},
		{"log truncated entry", "0103000000018080"},
		{"log zero gap", "0103000000020202000201"},
		{"log negative gap", "0103000000020202010201"},
		{"log zero cost", "01030000000102000000"},
		{"log cost above MaxLimit", "010300000001028180808080804000"},
		{"log costs above MaxLimit", "010300000002" + "02" + "80808080808040" + "02" + "80808080808040"},
		{"non-minimal T", "01018000000000"},
		{"non-minimal P", "010100008100"},
		{"non-minimal cost", "010300000001028100"},
		{"non-minimal count", "0103000000800000"},
		{"log time overflow", "010300000002" + "feffffffffffffffff01" + "01" + "02" + "01"},
	} {
		b, err := hex.DecodeString(c.hex)
		if err != nil {
			t.Fatal(c.name, err)
		}
		if a, st, n, err := DecodeState(b); !errors.Is(err, ErrCorrupt) || n != 0 {
			t.Errorf("%s: DecodeState(%s) = %v, %+v, %d, %v; want ErrCorrupt", c.name, c.hex, a, st, n, err)
		}
	}
}

// FuzzDecodeState: decoding never panics; whatever decodes re-encodes to
// exactly the bytes read, holds a well-formed log, and can be checked.
func FuzzDecodeState(f *testing.F) {
	for _, g := range goldenStates {
		b, _ := hex.DecodeString(g.hex)
		f.Add(b)
	}
	f.Add([]byte{1, 3, 0, 0, 0, 2, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, st, n, err := DecodeState(b)
		if err != nil {
			if n != 0 || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v with n = %d", err, n)
			}
			return
		}
		if !a.Valid() || n > len(b) {
			t.Fatalf("decoded algo %v, n %d of %d", a, n, len(b))
		}
		if got := AppendState(nil, a, &st); !bytes.Equal(got, b[:n]) {
			t.Fatalf("re-encoded %x, read %x", got, b[:n])
		}
		checkWellFormedLog(t, &st)
		for _, p := range []Params{{Limit: 1, Window: MinWindow}, {Limit: 7, Window: 3 * sec, Burst: 2}} {
			c := cloneState(&st)
			Check(a, &c, p, 1, base)
			ExpiresAt(a, &c, p)
		}
	})
}

func checkWellFormedLog(t *testing.T, st *State) {
	t.Helper()
	if st.Log == nil {
		return
	}
	es := entries(st)
	var sum int64
	for i, e := range es {
		if e.Cost <= 0 || e.Cost > MaxLimit || (i > 0 && e.At <= es[i-1].At) {
			t.Fatalf("malformed log %v", es)
		}
		sum += e.Cost
	}
	if len(es) == 0 || sum != st.Log.Sum() {
		t.Fatalf("log of %d entries, sum %d, Sum() %d", len(es), sum, st.Log.Sum())
	}
}
