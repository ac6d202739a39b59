package httpapi

import (
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/rlheader"
	"github.com/rlserver/rlserver/rules"
)

// Checker decides checks for POST /v1/check and /v1/checkrules. A
// shards.Store satisfies it; errors that start with an upper-case Redis
// code (WRONGTYPE ...) become 409.
type Checker interface {
	Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error)
	CheckRules(q *rules.Query, now int64) error
}

func (a *api) routeChecks(mux *http.ServeMux) {
	a.handle(mux, "POST /v1/check", "check", a.touching(a.check))
	mux.Handle("/v1/check", methodNotAllowed("POST"))
	a.handle(mux, "POST /v1/checkrules", "checkrules", a.touching(a.checkRules))
	mux.Handle("/v1/checkrules", methodNotAllowed("POST"))
	a.handle(mux, "/v1/forward-auth", "forward_auth", a.touching(a.forwardAuth)) // any method: gateways send GET, HEAD, POST...
	// and /v1/forward-auth/..., Envoy's ext_authz: see New
}

// checkRequest is the body of POST /v1/check. Cost defaults to 1.
type checkRequest struct {
	Key    string `json:"key"`
	Algo   string `json:"algo"`
	Limit  int64  `json:"limit"`
	Window string `json:"window"`
	Cost   *int64 `json:"cost"`
	Burst  int64  `json:"burst"`
}

// checkResponse is the body of a check: RL.CHECK's reply, by name.
type checkResponse struct {
	Allowed      bool  `json:"allowed"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMs int64 `json:"retry_after_ms"`
	ResetAfterMs int64 `json:"reset_after_ms"`
}

// ruleCheckResponse adds the id of the most restrictive rule (null if no
// rule matched).
type ruleCheckResponse struct {
	checkResponse
	Rule *string `json:"rule"`
}

// POST /v1/check {"key","algo","limit","window","cost","burst"}: 200 if
// allowed, 429 if denied, with the rate-limit headers.
func (a *api) check(w http.ResponseWriter, r *http.Request) {
	var req checkRequest
	err := a.authorize(r, accessCheck, "checking")
	if err == nil {
		err = decode(w, r, &req)
	}
	var algo engine.Algo
	var p engine.Params
	if err == nil {
		algo, p, err = a.validateCheck(&req)
	}
	now := a.cfg.Clock()
	var res engine.Result
	if err == nil {
		res, err = a.cfg.Checker.Check([]byte(req.Key), algo, p, *req.Cost, now)
	}
	if err == nil {
		err = a.sync(r.Context(), false)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.CountCheck(algo, res.Allowed)
	}
	writeDecision(w, res, p, rlheader.PolicyName(algo.String(), p.Limit, time.Duration(p.Window), p.Burst), now, response(res),
		http.StatusTooManyRequests)
}

// validateCheck checks req field by field, like RL.CHECK's arguments.
func (a *api) validateCheck(req *checkRequest) (engine.Algo, engine.Params, error) {
	p := engine.Params{Limit: req.Limit, Burst: req.Burst}
	if req.Key == "" || len(req.Key) > a.cfg.MaxKeyBytes {
		return 0, p, badRequest("key", "want 1 to "+itoa(int64(a.cfg.MaxKeyBytes))+" bytes")
	}
	algo, ok := engine.ParseAlgo([]byte(req.Algo))
	if !ok {
		return 0, p, badRequest("algo", rules.ErrAlgo.Error()+", got "+quote(req.Algo))
	}
	if req.Limit <= 0 || req.Limit > engine.MaxLimit || (algo == engine.Log && req.Limit > a.cfg.MaxLogLimit) {
		return 0, p, badRequest("limit", "want a positive integer no larger than 2^48 ("+
			itoa(a.cfg.MaxLogLimit)+" for log, --max-log-limit), got "+itoa(req.Limit))
	}
	if p.Window, ok = engine.ParseWindow([]byte(req.Window)); !ok {
		return 0, p, badRequest("window", rules.ErrWindow.Error()+", got "+quote(req.Window))
	}
	if req.Burst < 0 || (req.Burst != 0 && !algo.Bucket()) {
		return 0, p, badRequest("burst", rules.ErrBurst.Error())
	}
	if req.Cost == nil {
		req.Cost = new(int64)
		*req.Cost = 1
	}
	if !engine.ValidCost(*req.Cost) {
		return 0, p, badRequest("cost", "want a non-negative integer no larger than 2^48")
	}
	switch err := p.Validate(algo); {
	case errors.Is(err, engine.ErrSpan):
		return 0, p, badRequest("burst", err.Error())
	case err != nil:
		return 0, p, badRequest("limit", err.Error())
	}
	return algo, p, nil
}

// checkRulesRequest is the body of POST /v1/checkrules. Cost defaults to 1.
type checkRulesRequest struct {
	Target string            `json:"target"`
	Tier   string            `json:"tier"`
	IDs    map[string]string `json:"ids"`
	Cost   *int64            `json:"cost"`
}

// POST /v1/checkrules {"target","tier","ids":{"user":"u1"},"cost"}: 200 if
// allowed (also when no rule matched), 429 if denied, with the headers of
// the most restrictive rule.
func (a *api) checkRules(w http.ResponseWriter, r *http.Request) {
	var req checkRulesRequest
	err := a.authorize(r, accessCheck, "checking against the rules")
	if err == nil {
		err = decode(w, r, &req)
	}
	var q rules.Query
	if err == nil {
		err = a.buildQuery(&req, &q)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	a.decideRules(w, r, &q, http.StatusTooManyRequests, true)
}

// decideRules checks q, built by buildQuery, against the rules as
// RL.CHECKRULES does (through the Checker, which coordinates the groups
// of a cluster), counts it in the metrics and writes the decision: 200 if
// allowed, denyStatus if denied, with the headers and body of the most
// restrictive rule (without allowedBody, a 200 has no body). POST
// /v1/checkrules and /v1/forward-auth both end here.
func (a *api) decideRules(w http.ResponseWriter, r *http.Request, q *rules.Query, denyStatus int, allowedBody bool) {
	now := a.cfg.Clock()
	err := a.cfg.Checker.CheckRules(q, now)
	if err == nil {
		err = a.sync(r.Context(), false)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.CountRuleCheck(q)
	}
	res, rule := q.Reply()
	body := ruleCheckResponse{checkResponse: response(res)}
	var p engine.Params
	var policy string
	switch {
	case q.Blocked: // denied by a block: no rule, no policy
		name := q.BlockName()
		body.Rule = &name
	case rule != nil:
		body.Rule, p, policy = &rule.Rule.ID, rule.Params, rule.Rule.ID
	}
	if rule != nil && rule.Rule.Shadow {
		// A shadow rule (reported only when no enforcing rule matched)
		// limits nothing: its figures stay in the body, out of the headers,
		// which would advertise a limit that is not enforced.
		p, policy = engine.Params{}, ""
		res.Limit = -1
	}
	if res.Allowed && !allowedBody {
		writeDecision(w, res, p, policy, now, nil, denyStatus)
		return
	}
	writeDecision(w, res, p, policy, now, body, denyStatus)
}

func (a *api) buildQuery(req *checkRulesRequest, q *rules.Query) error {
	q.Reset()
	q.Target, q.Tier, q.Cost = []byte(req.Target), []byte(req.Tier), 1
	if len(req.Target) > a.cfg.MaxKeyBytes || len(req.Tier) > a.cfg.MaxKeyBytes {
		return badRequest("", "target or tier is longer than the limit of "+itoa(int64(a.cfg.MaxKeyBytes))+" bytes (--max-key-bytes)")
	}
	if req.Cost != nil {
		q.Cost = *req.Cost
	}
	if !engine.ValidCost(q.Cost) {
		return badRequest("cost", "want a non-negative integer no larger than 2^48")
	}
	if len(req.IDs) == 0 {
		return badRequest("ids", `want at least one identifier, such as {"user": "u1"}`)
	}
	types := make([]string, 0, len(req.IDs))
	for t := range req.IDs {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		v := req.IDs[t]
		if t == "" || v == "" || len(v)+rules.MaxNameLen+1 > a.cfg.MaxKeyBytes {
			return badRequest("ids."+t, "want a non-empty type and a value of 1 to "+
				itoa(int64(a.cfg.MaxKeyBytes-rules.MaxNameLen-1))+" bytes")
		}
		q.AddID([]byte(t), []byte(v))
	}
	return nil
}

func response(r engine.Result) checkResponse {
	return checkResponse{Allowed: r.Allowed, Limit: r.Limit, Remaining: r.Remaining,
		RetryAfterMs: ceilMillis(r.RetryAfter), ResetAfterMs: ceilMillis(r.ResetAfter)}
}

// writeDecision writes the rate-limit headers (p gives the policy named
// policy; a zero p leaves RateLimit-Policy out) and body: 200 if allowed,
// denyStatus (429, or what a forward-auth route asks for) if denied. A nil
// body is an empty one.
func writeDecision(w http.ResponseWriter, r engine.Result, p engine.Params, policy string, now int64, body any, denyStatus int) {
	rlheader.Set(w.Header(), rlheader.Values{
		Allowed: r.Allowed, Limit: r.Limit, Remaining: r.Remaining,
		RetryAfter: time.Duration(r.RetryAfter), ResetAfter: time.Duration(r.ResetAfter),
		Policy: policy, Window: time.Duration(p.Window), Quota: p.Limit, Now: time.Unix(0, now),
	})
	status := http.StatusOK
	if !r.Allowed {
		status = denyStatus
	}
	if body == nil {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, body)
}

// ceilMillis rounds ns up to whole milliseconds, as RL.CHECK's reply; -1
// (never) stays -1.
func ceilMillis(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	return (ns + 999_999) / 1_000_000
}
