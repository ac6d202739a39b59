package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/rules"
)

// Forward auth: gateways that ask an HTTP endpoint before each request
// (Caddy forward_auth, Traefik ForwardAuth, nginx auth_request, Envoy
// ext_authz over HTTP) describe the request in headers. /v1/forward-auth
// turns them into the query of RL.CHECKRULES and answers with the
// decision: the gateway passes the request on a 2xx and hands any other
// answer to its client. An allowed request's 200 carries the rate-limit
// headers and no body: gateways read none, and Caddy closes the
// connection of an auth answer whose body it has not read, which would
// cost a new connection per request.

// forwardRoute is what the query parameters of the auth URL say about a
// gateway route: which headers carry what, the default tier, the cost,
// the methods checked and the status of a denial.
type forwardRoute struct {
	uriHeaders   []string // the headers that may carry the target (see forwarded.target)
	methodHeader string
	ipHeader     string // "" counts no ip
	userHeader   string // "" counts no user
	apiKeyHeader string // "" counts no apikey
	tierHeader   string // "" reads no tier
	tier         string
	cost         int64
	methods      []string // nil: every method
	denyStatus   int
}

// The headers read when the auth URL names no others.
const (
	defaultURIHeader    = "X-Forwarded-Uri"
	defaultOrigURI      = "X-Original-URI" // nginx's usual name
	defaultMethodHeader = "X-Forwarded-Method"
	defaultIPHeader     = "X-Forwarded-For"
	defaultUserHeader   = "X-User-Id"
	defaultAPIKeyHeader = "X-Api-Key"
	defaultTierHeader   = "X-Tier"
	defaultTier         = "default"
)

// forwardParams are the query parameters /v1/forward-auth knows; any
// other is refused, so that a misspelt one does not go unnoticed.
var forwardParams = map[string]bool{
	"uri_header": true, "method_header": true, "ip_header": true, "user_header": true,
	"apikey_header": true, "tier_header": true, "tier": true, "cost": true, "methods": true,
	"deny_status": true,
}

// forwardAuth answers /v1/forward-auth (any method): the request the
// gateway describes is checked against the rules as RL.CHECKRULES checks
// it. 200 if allowed (also when no rule matched, or its method is not
// among ?methods), with the rate-limit headers and no body; else 429 (or
// ?deny_status), with the rate-limit headers and the body of POST
// /v1/checkrules. A request that cannot be described, or not believed
// (see the trust model in forwarded.go), is 400 with {"error": "..."}.
func (a *api) forwardAuth(w http.ResponseWriter, r *http.Request) {
	if err := a.authorize(r, accessCheck, "checking a forwarded request"); err != nil {
		writeError(w, err)
		return
	}
	f, err := a.readForwarded(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if f.route.methods != nil {
		m, err := f.method()
		if err != nil {
			writeError(w, err)
			return
		}
		if !f.route.checks(m) {
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusOK)
			return
		}
	}
	req, err := a.describe(&f)
	var q rules.Query
	if err == nil {
		err = a.buildQuery(&req, &q)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	a.decideRules(w, r, &q, f.route.denyStatus, false)
}

// parseForwardRoute reads the query parameters of the auth URL. A header
// parameter given empty (?user_header=) turns that identifier off.
func parseForwardRoute(v url.Values) (forwardRoute, error) {
	rt := defaultRoute()
	for name, vals := range v {
		if !forwardParams[name] {
			return rt, badRequest("query parameter "+quote(name), "unknown; want uri_header, method_header, ip_header, "+
				"user_header, apikey_header, tier_header, tier, cost, methods or deny_status")
		}
		if len(vals) != 1 {
			return rt, badRequest("query parameter "+name, "given more than once")
		}
	}
	headers := []struct {
		param    string
		dst      *string
		required bool
	}{{"method_header", &rt.methodHeader, true}, {"ip_header", &rt.ipHeader, false},
		{"user_header", &rt.userHeader, false}, {"apikey_header", &rt.apiKeyHeader, false},
		{"tier_header", &rt.tierHeader, false}}
	for _, h := range headers {
		if !v.Has(h.param) {
			continue
		}
		name := v.Get(h.param)
		if (name != "" || h.required) && !validHeaderName(name) {
			return rt, badRequest(h.param, "want a header name, got "+quote(name))
		}
		*h.dst = name
	}
	if v.Has("uri_header") {
		name := v.Get("uri_header")
		if !validHeaderName(name) {
			return rt, badRequest("uri_header", "want a header name, got "+quote(name))
		}
		rt.uriHeaders = []string{name}
	}
	if v.Has("tier") {
		rt.tier = v.Get("tier")
		if !rules.ValidName(rt.tier) {
			return rt, badRequest("tier", "want 1 to 64 letters, digits, '-', '_' or '.', got "+quote(rt.tier))
		}
	}
	if v.Has("cost") {
		n, err := strconv.ParseInt(v.Get("cost"), 10, 64)
		if err != nil || n < 0 {
			return rt, badRequest("cost", "want a non-negative integer no larger than 2^48, got "+quote(v.Get("cost")))
		}
		rt.cost = n // buildQuery checks the bound
	}
	if v.Has("methods") {
		rt.methods = []string{}
		for _, m := range strings.Split(v.Get("methods"), ",") {
			if m = strings.TrimSpace(m); m != "" {
				rt.methods = append(rt.methods, strings.ToUpper(m))
			}
		}
	}
	if v.Has("deny_status") {
		switch s := v.Get("deny_status"); s {
		case "429", "403", "401":
			rt.denyStatus, _ = strconv.Atoi(s)
		default:
			return rt, badRequest("deny_status", "want 429 (the default), 403 (for nginx's auth_request) or 401, got "+quote(s))
		}
	}
	return rt, nil
}

// defaultRoute is the route of an auth URL with no query: the headers
// the gateways of the README send, tier "default", cost 1, every method
// checked, 429 for a denial.
func defaultRoute() forwardRoute {
	return forwardRoute{
		uriHeaders: []string{defaultURIHeader, defaultOrigURI}, methodHeader: defaultMethodHeader,
		ipHeader: defaultIPHeader, userHeader: defaultUserHeader, apiKeyHeader: defaultAPIKeyHeader,
		tierHeader: defaultTierHeader, tier: defaultTier, cost: 1, denyStatus: http.StatusTooManyRequests,
	}
}

// checks reports whether requests of method are checked on this route.
func (rt *forwardRoute) checks(method string) bool {
	for _, m := range rt.methods {
		if strings.EqualFold(m, method) {
			return true
		}
	}
	return false
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
