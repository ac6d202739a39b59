package engine

import "testing"

// TestPeekChangesNothing: for every algorithm, Peek with the key's own
// parameters or any others (a shorter window, a lower limit, a burst)
// answers what Check with cost 0 answers on a copy, and leaves the state
// exactly as it was (issue 10, item 8).
func TestPeekChangesNothing(t *testing.T) {
	own := Params{Limit: 10, Window: 60 * sec}
	others := []Params{own, {Limit: 5, Window: sec}, {Limit: 100, Window: 10 * ms}, {Limit: 3, Window: 3600 * sec, Burst: 2}}
	for _, a := range allAlgos {
		t.Run(a.String(), func(t *testing.T) {
			var st State
			now := base
			for i := 0; i < 6; i++ { // six admissions, 5 s apart
				if r := Check(a, &st, own, 1, now); !r.Allowed {
					t.Fatalf("admission %d denied", i)
				}
				now += 5 * sec
			}
			for _, p := range others {
				if p.Burst != 0 && !a.Bucket() {
					p.Burst = 0
				}
				for _, later := range []int64{0, 2 * sec, 30 * sec, 3600 * sec} {
					before := cloneState(&st)
					got := Peek(a, &st, p, now+later)
					if !stateEqual(&before, &st) {
						t.Fatalf("Peek(%+v) at +%s changed the state: %+v -> %+v", p, fmtDur(later), before, st)
					}
					cp := cloneState(&st)
					if want := Check(a, &cp, p, 0, now+later); got != want {
						t.Fatalf("Peek(%+v) at +%s = %s, Check with cost 0 = %s", p, fmtDur(later), fmtResult(got), fmtResult(want))
					}
				}
			}
		})
	}
}
