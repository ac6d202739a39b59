// Package httpapi serves rlserver's HTTP endpoints: the rule API (GET,
// POST /rules; GET, PUT, DELETE /rules/{id}), checks (POST /v1/check and
// /v1/checkrules, answering 200 or 429 with X-RateLimit-*, RateLimit,
// RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-10) and
// Retry-After headers, counted in the RESP server's check metrics),
// /healthz, /readyz and
// /metrics. Bodies are strict JSON: unknown fields, wrong types and
// malformed input are 400 with {"error": "..."} naming the field.
//
// It works against the small interfaces it declares (Checker, RuleStore,
// Metrics),
// never against concrete state, and turns errors into statuses in one
// place, writeError.
package httpapi
