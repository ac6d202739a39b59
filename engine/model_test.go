package engine

import (
	"math/big"
	"testing"
)

// Straightforward reference models, written from docs/commands.md ("Which algorithm") rather
// than from the engine: counters per aligned window, a list of admitted
// requests, and buckets counting tokens in exact rationals. They answer
// (allowed, remaining) and must agree with Check on every request.
type model interface {
	check(cost, now int64) (bool, int64)
}

type windowModel struct {
	p       Params
	sliding bool
	counts  map[int64]int64 // admitted cost per aligned window index
}

func (m *windowModel) check(cost, now int64) (bool, int64) {
	w := floorDiv(now, m.p.Window)
	count := m.counts[w]
	if m.sliding {
		e := now - w*m.p.Window
		count += mulDivFloor(m.counts[w-1], m.p.Window-e, m.p.Window)
	}
	ok := count+cost <= m.p.Limit
	if ok {
		m.counts[w] += cost
		count += cost
	}
	return ok, max(m.p.Limit-count, 0)
}

type logModel struct {
	p   Params
	log []req
}

func (m *logModel) check(cost, now int64) (bool, int64) {
	var sum int64
	for _, r := range m.log {
		if r.at > now-m.p.Window && r.at <= now {
			sum += r.cost
		}
	}
	ok := sum+cost <= m.p.Limit
	if ok {
		m.log = append(m.log, req{now, cost})
		sum += cost
	}
	return ok, m.p.Limit - sum
}

// bucketModel keeps the token count (token) or the water level (leaky) as
// an exact rational, updated from the elapsed time at each request.
type bucketModel struct {
	p     Params
	leaky bool
	x     *big.Rat // tokens, or level
	last  int64
}

func (m *bucketModel) check(cost, now int64) (bool, int64) {
	capa, c := big.NewRat(m.p.Capacity(Token), 1), big.NewRat(cost, 1)
	if m.x == nil {
		m.x = new(big.Rat)
		if !m.leaky {
			m.x.Set(capa) // a token bucket starts full, a leaky one empty
		}
	}
	flow := big.NewRat(now-m.last, 1)
	flow.Mul(flow, big.NewRat(m.p.Limit, m.p.Window))
	m.last = now
	var ok bool
	tokens := new(big.Rat)
	if m.leaky {
		if m.x.Sub(m.x, flow); m.x.Sign() < 0 {
			m.x.SetInt64(0)
		}
		next := new(big.Rat).Add(m.x, c)
		if ok = next.Cmp(capa) <= 0; ok {
			m.x = next
		}
		tokens.Sub(capa, m.x)
	} else {
		if m.x.Add(m.x, flow); m.x.Cmp(capa) > 0 {
			m.x.Set(capa)
		}
		if ok = m.x.Cmp(c) >= 0; ok {
			m.x.Sub(m.x, c)
		}
		tokens.Set(m.x)
	}
	return ok, new(big.Int).Quo(tokens.Num(), tokens.Denom()).Int64()
}

func newModel(a Algo, p Params) model {
	switch a {
	case Fixed, Sliding:
		return &windowModel{p: p, sliding: a == Sliding, counts: map[int64]int64{}}
	case Log:
		return &logModel{p: p}
	}
	return &bucketModel{p: p, leaky: a == Leaky}
}

func TestMatchesReferenceModels(t *testing.T) {
	rng := newRand(t)
	for _, a := range []Algo{Fixed, Sliding, Log, Token, Leaky} {
		for i := 0; i < 50; i++ {
			sg := genTrace(rng, a, 1)[0]
			m := newModel(a, sg.p)
			var st State
			for j, q := range sg.reqs {
				r := Check(a, &st, sg.p, q.cost, q.at)
				ok, rem := m.check(q.cost, q.at)
				if r.Allowed != ok || r.Remaining != rem {
					t.Fatalf("%v %+v step %d %+v: Check %s, model allowed %v remaining %d",
						a, sg.p, j, q, fmtResult(r), ok, rem)
				}
			}
		}
	}
}
