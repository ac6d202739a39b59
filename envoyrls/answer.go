package envoyrls

import (
	"math"
	"net/http"
	"strconv"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/rlheader"
)

// answer builds the response from the charged plan and counts the
// metrics.
func (s *Service) answer(p *plan, req *pb.RateLimitRequest, now int64) *pb.RateLimitResponse {
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK,
		Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(p.descs))}
	charged := !p.deny
	for i := range p.slots {
		if sl := &p.slots[i]; sl.op < 0 {
			sl.result = zeroLimit(sl.limit, sl.hits, now)
		} else if !sl.result.Allowed && !p.descs[sl.desc].shadow && s.cfg.Charging == ChargeAllOrNothing {
			charged = false
		}
	}
	var head *slot // the slot the RateLimit headers describe
	for i := range p.descs {
		dp := &p.descs[i]
		st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		resp.Statuses[i] = st
		if dp.unlimited {
			st.LimitRemaining = math.MaxUint32
			continue
		}
		var worst *slot
		for j := dp.first; j < dp.first+dp.n; j++ {
			sl := &p.slots[j]
			s.metrics.count(req.Domain, dp.metricKey, sl, dp.shadow, charged, s.cfg.NearLimitRatio)
			if worst == nil || moreRestrictive(sl, worst) {
				worst = sl
			}
		}
		if worst == nil {
			continue
		}
		s.fill(st, worst, now)
		if worst.result.Allowed || dp.shadow {
			st.Code = pb.RateLimitResponse_OK
		} else {
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		}
		if !dp.shadow && (head == nil || moreRestrictive(worst, head)) {
			head = worst
		}
	}
	if head != nil {
		resp.ResponseHeadersToAdd = s.headers(head, p.descs[head.desc].metricKey, now)
	}
	return resp
}

// zeroLimit is the result of a requests_per_unit 0 limit: over the limit
// unless the descriptor only looks (hits_addend 0).
func zeroLimit(l interface{ Window() int64 }, hits, now int64) engine.Result {
	w := l.Window()
	return engine.Result{Allowed: hits == 0, ResetAfter: w - now%w}
}

// moreRestrictive reports whether a's result is worse than b's: over the
// limit beats within it, then fewer remaining.
func moreRestrictive(a, b *slot) bool {
	if a.result.Allowed != b.result.Allowed {
		return !a.result.Allowed
	}
	return a.result.Remaining < b.result.Remaining
}

// fill writes a slot's limit, remaining and reset into st (OVER_LIMIT if
// it is over; the caller turns shadow mode's into OK).
func (s *Service) fill(st *pb.RateLimitResponse_DescriptorStatus, sl *slot, now int64) {
	l := sl.limit
	st.CurrentLimit = &pb.RateLimitResponse_RateLimit{RequestsPerUnit: uint32(l.RequestsPerUnit),
		Unit: pb.RateLimitResponse_RateLimit_Unit(l.Unit), Name: l.Name}
	if sl.result.Allowed {
		st.LimitRemaining = clampU32(sl.result.Remaining)
	} else {
		st.Code = pb.RateLimitResponse_OVER_LIMIT
	}
	st.DurationUntilReset = resetOf(sl, now)
}

// resetOf is duration_until_reset: for fixed windows (and limits of 0),
// the whole seconds until the window ends, as envoyproxy/ratelimit counts
// them; for the other algorithms, until the full allowance is back.
func resetOf(sl *slot, now int64) *durationpb.Duration {
	if sl.op < 0 || sl.limit.Algo == engine.Fixed {
		w := sl.limit.Window()
		return &durationpb.Duration{Seconds: (w - now%w + 1e9 - 1) / 1e9}
	}
	return durationpb.New(time.Duration(sl.result.ResetAfter))
}

// headers are the draft-10 RateLimit and RateLimit-Policy fields for the
// most restrictive limit of the request.
func (s *Service) headers(sl *slot, metricKey string, now int64) []*core.HeaderValue {
	h := http.Header{}
	r := sl.result
	limit := r.Limit
	if sl.op < 0 {
		limit = 0
	}
	reset := r.ResetAfter
	if sl.op < 0 || sl.limit.Algo == engine.Fixed {
		reset = resetOf(sl, now).AsDuration().Nanoseconds()
	}
	rlheader.Set(h, rlheader.Values{Allowed: r.Allowed, Limit: limit, Remaining: max(r.Remaining, 0),
		RetryAfter: time.Duration(r.RetryAfter), ResetAfter: time.Duration(reset),
		Policy: policyName(sl.limit, metricKey), Window: time.Duration(sl.limit.Window()),
		Quota: sl.limit.RequestsPerUnit, Now: time.Unix(0, now)})
	var out []*core.HeaderValue
	for _, k := range []string{"RateLimit-Policy", "RateLimit"} {
		if v := h.Get(k); v != "" {
			out = append(out, &core.HeaderValue{Key: k, Value: v})
		}
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
