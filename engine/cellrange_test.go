package engine

import (
	"math/big"
	"testing"
)

// Issue 10, item 10: CL.THROTTLE with max_burst or quantity near 2^63
// overflowed: a quantity of 2^63-1 was allowed with remaining 17 of a
// limit of 16 and a negative reset, and max_burst 2^63-1 made the limit
// -2^63. Where redis-cell's 64-bit arithmetic would overflow (it wraps
// around, or its time library panics and takes Redis down), CellThrottle
// saturates; within the range it stays redis-cell's, bit for bit.
func TestCellThrottleNear2To63(t *testing.T) {
	const M = maxInt64
	for _, c := range []struct {
		name                              string
		maxBurst, count, period, quantity int64
		want                              CellResult
	}{
		{"quantity 2^63-1: never", 15, 30, 60, M,
			CellResult{Limited: true, Limit: 16, Remaining: 16, RetryAfter: -sec, ResetAfter: 0}},
		{"quantity 2^62: never", 15, 30, 60, 1 << 62,
			CellResult{Limited: true, Limit: 16, Remaining: 16, RetryAfter: -sec, ResetAfter: 0}},
		{"max_burst 2^63-1: the limit saturates, 292 years of tolerance", M, 1, 1, 1,
			CellResult{Limited: false, Limit: M, Remaining: 9223372036, RetryAfter: -sec, ResetAfter: sec}},
		{"max_burst 2^62 at 1 per 60 s", 1 << 62, 1, 60, 1,
			CellResult{Limited: false, Limit: 1<<62 + 1, Remaining: 153722867, RetryAfter: -sec, ResetAfter: 60 * sec}},
		{"max_burst -2^63+1: never", -M, 1, 1, 1,
			CellResult{Limited: true, Limit: -M + 1, Remaining: 0, RetryAfter: -sec, ResetAfter: 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var st State
			got, err := CellThrottle(&st, c.maxBurst, c.count, c.period, c.quantity, base)
			if err != nil || got != c.want {
				t.Fatalf("CellThrottle = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// TestCellThrottleStaysInRange: random sequences on one key with
// max_burst and quantity drawn from the whole int64 range, near its ends
// and small: whatever the arguments, a non-negative quantity against a
// non-negative max_burst never reports more remaining than the limit, nor
// a negative reset, nor a retry other than -1 s or a wait; the TAT never
// goes back; and a quantity above the limit is never allowed.
func TestCellThrottleStaysInRange(t *testing.T) {
	rng := newRand(t)
	pick := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return maxInt64 - rng.Int64N(1<<20)
		case 1:
			return rng.Int64N(maxInt64)
		case 2:
			return 1 << (32 + rng.IntN(31))
		}
		return rng.Int64N(100)
	}
	for trace := 0; trace < 200; trace++ {
		var st State
		now := base
		count := []int64{1, 2, 4, 5, 10, 1000}[rng.IntN(6)] // whole-microsecond intervals
		period := 1 + rng.Int64N(3600)
		for i := 0; i < 50; i++ {
			now += rng.Int64N(10 * sec)
			maxBurst, quantity := pick(), pick()
			before := st.T
			r, err := CellThrottle(&st, maxBurst, count, period, quantity, now)
			if err != nil {
				t.Fatal(err)
			}
			bad := r.Limit < 1 || r.Remaining < 0 || r.Remaining > r.Limit || r.ResetAfter < 0 ||
				(r.RetryAfter != -sec && r.RetryAfter < 0) || st.T < before || (!r.Limited && quantity > r.Limit)
			if bad {
				t.Fatalf("max_burst %d, %d per %d s, quantity %d at +%d ns: %+v (TAT %d -> %d)",
					maxBurst, count, period, quantity, now-base, r, before, st.T)
			}
		}
	}
}

// TestCellThrottleMatchesExactArithmetic: where redis-cell's arithmetic
// stays inside int64, CellThrottle's saturating arithmetic gives the same
// results as exact arithmetic with big integers, for arguments up to
// 2^40, negative quantities included (most of them stay in range).
func TestCellThrottleMatchesExactArithmetic(t *testing.T) {
	rng := newRand(t)
	compared := 0
	for trace := 0; trace < 2000; trace++ {
		bits := 10 + rng.IntN(30) // arguments up to 2^10 .. 2^40
		maxBurst, quantity := rng.Int64N(1<<bits)-10, rng.Int64N(1<<bits)-1<<(bits-1)
		count, period := 1+rng.Int64N(1000), 1+rng.Int64N(3600)
		tat := base + rng.Int64N(1<<50) - 1<<49
		st := State{T: tat}
		got, err := CellThrottle(&st, maxBurst, count, period, quantity, base)
		want, wantT, ok := exactCell(tat, maxBurst, count, period, quantity, base)
		if !ok {
			continue
		}
		compared++
		if err != nil || got != want || st.T != wantT {
			t.Fatalf("max_burst %d, %d per %d s, quantity %d, TAT %d: got %+v TAT %d, exact %+v TAT %d",
				maxBurst, count, period, quantity, tat-base, got, st.T, want, wantT)
		}
	}
	if compared < 1000 {
		t.Fatalf("only %d of 2000 cases stayed in range", compared)
	}
}

// exactCell is redis-cell's rate_limit in big integers; ok is false if a
// value leaves the int64 range.
func exactCell(tat, maxBurst, count, period, quantity, now int64) (CellResult, int64, bool) {
	b := func(v int64) *big.Int { return big.NewInt(v) }
	interval := Interval(count, period*1e9)
	limit := new(big.Int).Add(b(maxBurst), b(1))
	dvt := new(big.Int).Mul(b(interval), limit)
	inc := new(big.Int).Mul(b(interval), b(quantity))
	t := b(max(tat, now))
	newTAT := new(big.Int).Add(t, inc)
	diff := new(big.Int).Sub(b(now), new(big.Int).Sub(newTAT, dvt))
	res := CellResult{Limit: limit.Int64(), RetryAfter: -sec}
	var ttl *big.Int
	storeT := tat
	if diff.Sign() < 0 {
		res.Limited = true
		if inc.Cmp(dvt) <= 0 {
			res.RetryAfter = new(big.Int).Neg(diff).Int64()
		}
		ttl = new(big.Int).Sub(t, b(now))
	} else {
		ttl = new(big.Int).Sub(newTAT, b(now))
		if quantity != 0 {
			storeT = newTAT.Int64()
		}
	}
	next := new(big.Int).Sub(dvt, ttl)
	for _, v := range []*big.Int{limit, dvt, inc, newTAT, diff, ttl, next} {
		if !v.IsInt64() {
			return res, 0, false
		}
	}
	res.ResetAfter = ttl.Int64()
	if next.Int64() > -interval {
		res.Remaining = cellDiv(next.Int64()/1000, interval/1000)
	}
	return res, storeT, true
}
