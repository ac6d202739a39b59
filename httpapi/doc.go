// Package httpapi serves rlserver's HTTP endpoints: the rule API (GET,
// POST /rules; GET, PUT, DELETE /rules/{id}), checks (POST /v1/check and
// /v1/checkrules, answering 200 or 429 with X-RateLimit-*, RateLimit,
// RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-10) and
// Retry-After headers, counted in the RESP server's check metrics),
// forward auth for gateways (/v1/forward-auth, any method: the request a
// Caddy, Traefik or nginx gateway describes in X-Forwarded-* headers,
// believed from --trusted-proxies only, its target cleaned once, checked
// as RL.CHECKRULES checks it; see forward.go and forwarded.go), /healthz,
// /readyz,
// /metrics, the live status page (GET /status and its figures, GET
// /v1/stats; see StatusPage) and, on a cluster node, GET /cluster and
// DELETE /cluster/nodes/{id}. Bodies are strict JSON: unknown fields,
// wrong types and malformed input are 400 with {"error": "..."} naming the
// field. Each endpoint asks for a bearer token by its kind (see access
// and authorize): checks and rule reads the password, changes and the
// cluster's state the admin token, /metrics none unless MetricsAuth,
// /v1/stats the password as rule reads do, the health endpoints and the
// status page's files never; a 401 names what it refused.
//
// It works against the small interfaces it declares (Checker, RuleStore,
// Metrics),
// never against concrete state, and turns errors into statuses in one
// place, writeError.
package httpapi
