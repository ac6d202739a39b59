// Package reftest compares rlserver's Envoy rate limit service with
// envoyproxy/ratelimit side by side: its tests build the reference from
// the Go module proxy (once; the module and build caches keep it), run it
// backed by redis-server and rlserver's binary with the same YAML, send
// both the same requests over gRPC (and POST /json), and compare the
// answers field by field (codes, current_limit, limit_remaining,
// duration_until_reset within a second) and the Prometheus metrics.
//
// RLS_VERSION picks the reference's version; a machine that cannot build
// it skips the tests with the reason.
package reftest
