package envoyrls

import (
	"context"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/envoyrls/config"
	"github.com/rlserver/rlserver/shards"
)

// KeyPrefix starts every counter key of the service, so that its counters
// never meet RL.CHECK's or the rules' ("rls:<domain>_<key>_<value>_...").
const KeyPrefix = "rls:"

// plan is one request's limits and the counters they charge.
type plan struct {
	descs []descPlan
	slots []slot
	ops   []shards.Op
	deny  bool // a non-shadow requests_per_unit 0 is hit: deny, charge nothing
}

// descPlan is what applies to one descriptor.
type descPlan struct {
	unlimited   bool
	first, n    int // its slots: plan.slots[first:first+n]
	shadow      bool
	metricKey   string
	hits        int64
	pendLimits  []*config.Limit
	pendShare   []string
	pendEntries []config.Entry
}

// slot is one limit of one descriptor.
type slot struct {
	desc   int
	limit  *config.Limit
	hits   int64
	op     int // index in plan.ops; -1: no counter (requests_per_unit 0)
	result engine.Result
	// counted: the op is a plain counter (a fixed window whose engine
	// limit is engine.MaxLimit), charged whatever the answer, and the
	// slot's result is decided here from the counter's value, as
	// envoyproxy/ratelimit decides on its INCRBY's. pre is what the
	// request's earlier slots on the same op charge (the reference
	// increments a key named twice in turn), charge what this one does;
	// before and after are the counter's value around this slot's charge.
	counted       bool
	pre, charge   int64
	before, after int64
}

// plan finds each descriptor's limits, applies replaces and unlimited, and
// lays out the counters to charge, one op per distinct counter key.
func (s *Service) plan(conf *config.Config, req *pb.RateLimitRequest, now int64) (*plan, error) {
	p := &plan{descs: make([]descPlan, len(req.Descriptors))}
	replacing := map[string]bool{}
	for i, d := range req.Descriptors {
		dp := &p.descs[i]
		dp.hits = hitsAddend(req, d)
		dp.pendEntries = make([]config.Entry, len(d.Entries))
		for j, e := range d.Entries {
			dp.pendEntries[j] = config.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		if ov := d.GetLimit(); ov != nil {
			l, err := overrideLimit(ov)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
			}
			dp.pendLimits, dp.metricKey = []*config.Limit{l}, metricKeyOf(dp.pendEntries)
			continue
		}
		m := conf.Match(req.Domain, dp.pendEntries)
		if m.Descriptor == nil {
			continue
		}
		dp.pendLimits, dp.pendShare, dp.shadow, dp.metricKey = m.Descriptor.Limits, m.Share, m.Descriptor.ShadowMode, m.MetricKey
		for _, l := range m.Descriptor.Limits {
			for _, r := range l.Replaces {
				replacing[r] = true
			}
			dp.unlimited = dp.unlimited || l.Unlimited
		}
	}
	keys := map[string]int{}
	for i := range p.descs {
		s.layout(p, i, req.Domain, replacing, keys)
	}
	return p, nil
}

// layout adds descriptor i's slots (and ops) to p. Under ChargeEach and
// ChargeStopWhenOver a fixed window (also of requests_per_unit 0) is a
// counted slot, and the ops of other algorithms are shadow ops, so that
// each op is charged on its own, whatever the others answer.
func (s *Service) layout(p *plan, i int, domain string, replacing map[string]bool, keys map[string]int) {
	dp := &p.descs[i]
	dp.first = len(p.slots)
	if dp.unlimited {
		return
	}
	each := s.cfg.Charging != ChargeAllOrNothing
	for _, l := range dp.pendLimits {
		if l.Name != "" && replacing[l.Name] {
			continue
		}
		sl := slot{desc: i, limit: l, hits: dp.hits, charge: dp.hits, op: -1}
		sl.counted = each && l.Algo == engine.Fixed
		if l.RequestsPerUnit == 0 && !sl.counted {
			if dp.hits > 0 && !dp.shadow {
				p.deny = true
			}
			p.slots = append(p.slots, sl)
			continue
		}
		params, shadow := l.Params(), dp.shadow
		switch {
		case sl.counted:
			params = engine.Params{Limit: engine.MaxLimit, Window: l.Window()}
		case each:
			shadow = true
		}
		key := counterKey(domain, dp.pendEntries, dp.pendShare, l)
		if j, ok := keys[key]; ok {
			sl.pre = p.ops[j].Cost
			p.ops[j].Cost += dp.hits // the same counter twice: charged with both
			sl.op = j
		} else {
			sl.op = len(p.ops)
			keys[key] = sl.op
			p.ops = append(p.ops, shards.Op{Key: []byte(key), Algo: l.Algo, Params: params,
				Shadow: shadow, Replace: true, OwnCost: true, Cost: dp.hits})
		}
		p.slots = append(p.slots, sl)
	}
	dp.n = len(p.slots) - dp.first
}

// overrideLimit is the limit a descriptor's own limit field sets, as
// envoyproxy/ratelimit applies it: fixed windows, never shadow.
func overrideLimit(ov *ratelimitv3.RateLimitDescriptor_RateLimitOverride) (*config.Limit, error) {
	l := &config.Limit{RequestsPerUnit: int64(ov.GetRequestsPerUnit()), Unit: config.Unit(ov.GetUnit()),
		UnitMultiplier: 1, Algo: engine.Fixed, Index: -1}
	if m := ov.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
		l.UnitMultiplier = int64(m.GetValue())
	}
	if l.Window() > engine.MaxWindow {
		return nil, status.Error(codes.InvalidArgument, "the limit override's window is longer than 366 days")
	}
	return l, nil
}

// counterKey is "rls:<domain>_<key>_<value>_..." as envoyproxy/ratelimit
// builds its cache keys, a share_threshold entry taking its pattern for
// its value, then "#<index>" for a descriptor's second and later limits,
// "@<seconds>" for a fixed window's length (the reference's key ends with
// the window's start, which its length sets: a request's limit override
// of the same window shares the configured limit's counter, and a window
// made longer or shorter by a reload is a new counter, there and here),
// and "#<algorithm>" for an algorithm other than fixed.
//
// The entries' part is the reference's, so it is not injective:
// [user=alice_action_login] and [user=alice, action=login] both make
// "..._user_alice_action_login_", and two fixed windows share that
// counter there and here. The suffix keeps apart what would otherwise
// drop each other's state: every entry ends with '_' and the suffix has
// none, so the part after the last '_' is the suffix alone, and keys of
// different algorithms (or limit indexes) never meet.
func counterKey(domain string, entries []config.Entry, share []string, l *config.Limit) string {
	var b strings.Builder
	b.WriteString(KeyPrefix)
	b.WriteString(domain)
	b.WriteByte('_')
	for i, e := range entries {
		b.WriteString(e.Key)
		b.WriteByte('_')
		if share != nil && share[i] != "" {
			b.WriteString(share[i])
		} else {
			b.WriteString(e.Value)
		}
		b.WriteByte('_')
	}
	if l.Index > 0 {
		b.WriteByte('#')
		b.WriteString(itoa(int64(l.Index)))
	}
	if l.Algo == engine.Fixed {
		b.WriteByte('@')
		b.WriteString(itoa(l.Window() / 1e9))
	} else {
		b.WriteByte('#')
		b.WriteString(l.Algo.String())
	}
	return b.String()
}

// metricKeyOf names a descriptor with an override in metrics, as
// envoyproxy/ratelimit does: its keys and values.
func metricKeyOf(entries []config.Entry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('_')
			b.WriteString(e.Value)
		}
	}
	return b.String()
}

// charge runs the plan's ops as Config.Charging says: one all-or-nothing
// check (ChargeAllOrNothing), or every op charged on its own (ChargeEach),
// after a look at the counters for ChargeStopWhenOver.
func (s *Service) charge(ctx context.Context, p *plan, now int64) error {
	if len(p.ops) == 0 {
		return nil
	}
	if s.cfg.Charging == ChargeAllOrNothing {
		if err := s.chargeAll(p, now); err != nil {
			return err
		}
	} else {
		if s.cfg.Charging == ChargeStopWhenOver {
			if err := s.stopWhenOver(p, now); err != nil {
				return err
			}
		}
		if _, err := s.cfg.Limiter.CheckAll(p.ops, 0, now); err != nil {
			return mapErr(err)
		}
	}
	if s.cfg.Durable != nil {
		if err := s.cfg.Durable.Settle(ctx, false); err != nil {
			return mapErr(err)
		}
	}
	for i := range p.slots {
		sl := &p.slots[i]
		switch {
		case sl.counted:
			op := &p.ops[sl.op]
			base := engine.MaxLimit - op.Result.Remaining - op.Cost // the counter before this request
			sl.before = base + sl.pre
			sl.after = sl.before + sl.charge
			sl.result = countedResult(sl.limit, sl.after, now)
		case sl.op >= 0:
			sl.result = p.ops[sl.op].Result
		}
	}
	return nil
}

// countedResult is the answer of a fixed window whose counter is at
// after once charged: over the limit past it, as the reference decides.
func countedResult(l *config.Limit, after, now int64) engine.Result {
	w := l.Window()
	r := engine.Result{Limit: l.RequestsPerUnit, Allowed: after <= l.RequestsPerUnit,
		Remaining: max(l.RequestsPerUnit-after, 0), ResetAfter: w - now%w}
	if !r.Allowed {
		r.RetryAfter = r.ResetAfter
	}
	return r
}

// stopWhenOver is STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: it reads the
// counters and, if a counted slot would go over its limit, leaves the
// charge only to the slots that would (the reference's reading); the other
// ops then charge nothing.
func (s *Service) stopWhenOver(p *plan, now int64) error {
	look := make([]shards.Op, len(p.ops))
	for i := range p.ops {
		look[i] = p.ops[i]
		look[i].Cost = 0
	}
	if _, err := s.cfg.Limiter.CheckAll(look, 0, now); err != nil {
		return mapErr(err)
	}
	would := make([]bool, len(p.slots))
	anyOver := false
	for i := range p.slots {
		if sl := &p.slots[i]; sl.counted {
			cur := engine.MaxLimit - look[sl.op].Result.Remaining
			would[i] = cur+sl.hits > sl.limit.RequestsPerUnit
			anyOver = anyOver || would[i]
		}
	}
	if !anyOver {
		return nil
	}
	for i := range p.ops {
		p.ops[i].Cost = 0
	}
	for i := range p.slots {
		if sl := &p.slots[i]; sl.op >= 0 {
			sl.charge = 0
			if would[i] {
				sl.charge = sl.hits
			}
			sl.pre = p.ops[sl.op].Cost
			p.ops[sl.op].Cost += sl.charge
		}
	}
	return nil
}

// chargeAll runs the plan's ops all or nothing, or, when the plan denies
// anyway, only looks. A denial that left some ops unreached (a cluster's
// later groups) looks at those too, so that every status is filled.
func (s *Service) chargeAll(p *plan, now int64) error {
	if p.deny {
		for i := range p.ops {
			p.ops[i].Cost = 0
		}
	}
	allowed, err := s.cfg.Limiter.CheckAll(p.ops, 0, now)
	if err != nil {
		return mapErr(err)
	}
	if !allowed {
		return s.peekUnreached(p, now)
	}
	return nil
}

// peekUnreached fills the results of ops a denied CheckAll did not reach
// (zero Limit) with their current allowance.
func (s *Service) peekUnreached(p *plan, now int64) error {
	var idx []int
	var ops []shards.Op
	for i := range p.ops {
		if p.ops[i].Result.Limit == 0 {
			op := p.ops[i]
			op.Cost = 0
			idx, ops = append(idx, i), append(ops, op)
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := s.cfg.Limiter.CheckAll(ops, 0, now); err != nil {
		return mapErr(err)
	}
	for j, i := range idx {
		p.ops[i].Result = ops[j].Result
	}
	return nil
}
