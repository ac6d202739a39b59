package envoyrls_test

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/rlserver/rlserver/envoyrls"
)

// TestOnCallSeesEachShouldRateLimit: ServerOptions.OnCall runs once for
// each ShouldRateLimit call, answered or refused, and not for health
// checks (a probe must not count as traffic).
func TestOnCallSeesEachShouldRateLimit(t *testing.T) {
	var calls atomic.Int64
	r := startRLS(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
		envoyrls.ServerOptions{OnCall: func() { calls.Add(1) }})
	r.ask("d", desc("k", "v"))
	r.ask("d", desc("k", "v")) // over the limit: still a call
	hc := grpc_health_v1.NewHealthClient(r.conn)
	if _, err := hc.Check(context.Background(), &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("OnCall ran %d times for two ShouldRateLimit calls and a health check, want 2", n)
	}
}
