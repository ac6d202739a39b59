// Package httpapi serves rlserver's HTTP endpoints: /healthz (the process
// is up), /readyz (it can serve checks) and /metrics (Prometheus). It works
// against the small interfaces it declares, never against concrete state.
package httpapi
