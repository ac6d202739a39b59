package values

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/rlserver/rlserver/internal/testseed"
)

// zmodel is a sorted set as a sorted slice, the obvious way.
type zmodel []znode

func (m zmodel) sort() {
	slices.SortFunc(m, func(a, b znode) int {
		switch {
		case zless(a.score, a.member, b.score, b.member):
			return -1
		case zless(b.score, b.member, a.score, a.member):
			return 1
		}
		return 0
	})
}

// TestZSetAgainstModel runs random inserts, score changes, deletes and
// range deletions on a zset and on a sorted slice, and compares ranks,
// ranges and counts after each, and the skiplist's invariants.
// Both of its forms are compared: the listpack while the set has at most
// 128 members (rounds 0, 3, ...), the skiplist from the start (rounds 1,
// 4, ...), and a listpack of 128 members that the next add turns into a
// skiplist (rounds 2, 5, ...).
func TestZSetAgainstModel(t *testing.T) {
	rnd := testseed.Rand(t)
	steps := map[bool]int{} // by form: lp or not
	for round := range 12 {
		z := newZSetVal()
		var m zmodel
		switch round % 3 {
		case 1:
			z.toSkiplist()
		case 2:
			for i := range zsetListpackEntries {
				member := "m" + strconv.Itoa(2*i)
				z.add([]byte(member), float64(rnd.IntN(40)))
				score, _ := z.score([]byte(member))
				m = append(m, znode{member: member, score: score})
			}
			m.sort()
			if !z.lp {
				t.Fatalf("a set of %d members left the listpack", z.len())
			}
		}
		for step := range 400 {
			zsetStep(t, rnd, z, &m)
			if err := z.verify(); err != nil {
				t.Fatalf("round %d step %d: %v", round, step, err)
			}
			compareZSet(t, rnd, z, m)
			steps[z.lp]++
		}
	}
	if steps[true] < 500 || steps[false] < 500 {
		t.Fatalf("steps compared by form (listpack: true): %v, want both forms well covered", steps)
	}
}

func zsetStep(t *testing.T, rnd *rand.Rand, z *zset, m *zmodel) {
	member := "m" + strconv.Itoa(rnd.IntN(300))
	score := float64(rnd.IntN(40))
	i := slices.IndexFunc(*m, func(n znode) bool { return n.member == member })
	switch op := rnd.IntN(10); {
	case op < 5 && i < 0:
		z.add([]byte(member), score)
		*m = append(*m, znode{member: member, score: score})
	case op < 5:
		pos, _, _ := z.locate([]byte(member))
		z.update(pos, score)
		(*m)[i].score = score
	case op < 8 && i >= 0:
		if !z.remove([]byte(member)) {
			t.Fatalf("remove %q: not found", member)
		}
		*m = slices.Delete(*m, i, i+1)
	case op == 8:
		r := scoreRange{min: score, max: score + float64(rnd.IntN(4)), minex: rnd.IntN(2) == 0}
		n := z.removeRange(&r)
		before := len(*m)
		*m = slices.DeleteFunc(*m, func(x znode) bool { return r.aboveMin(x.score) && r.belowMax(x.score) })
		if n != before-len(*m) {
			t.Fatalf("removeRange removed %d, want %d", n, before-len(*m))
		}
	case op == 9 && len(*m) > 0:
		m.sort()
		s := rnd.IntN(len(*m))
		e := min(s+rnd.IntN(3), len(*m)-1)
		if n := z.removeRanks(s+1, e+1); n != e-s+1 {
			t.Fatalf("removeRanks(%d, %d) removed %d", s+1, e+1, n)
		}
		*m = slices.Delete(*m, s, e+1)
	}
	m.sort()
}

func compareZSet(t *testing.T, rnd *rand.Rand, z *zset, m zmodel) {
	t.Helper()
	if z.len() != len(m) {
		t.Fatalf("len %d, model %d", z.len(), len(m))
	}
	for r, n := range m {
		score, ok := z.score([]byte(n.member))
		if !ok || score != n.score || z.rank([]byte(n.member)) != r+1 || z.at(r+1) != (zent{n.member, n.score}) {
			t.Fatalf("member %q of rank %d: score %v (%v), rank %d, at %+v", n.member, r+1, score, ok, z.rank([]byte(n.member)), z.at(r+1))
		}
	}
	r := scoreRange{min: float64(rnd.IntN(40)), max: float64(rnd.IntN(40)), minex: rnd.IntN(2) == 0, maxex: rnd.IntN(2) == 0}
	var in []string
	for _, n := range m {
		if r.aboveMin(n.score) && r.belowMax(n.score) {
			in = append(in, n.member)
		}
	}
	if got := z.count(&r); got != len(in) {
		t.Fatalf("count %+v = %d, want %d", r, got, len(in))
	}
	first, last := z.firstIn(&r).rank, z.lastIn(&r).rank
	if len(in) == 0 && (first != 0 || last != 0) || len(in) > 0 && (first == 0 || last == 0 || z.at(first).member != in[0] || z.at(last).member != in[len(in)-1]) {
		t.Fatalf("range %+v: first %d last %d, want %v", r, first, last, in)
	}
}
