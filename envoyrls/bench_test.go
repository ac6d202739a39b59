package envoyrls_test

import (
	"context"
	"testing"

	"github.com/rlserver/rlserver/envoyrls"
)

// BenchmarkGRPCShouldRateLimit: one ShouldRateLimit over a real gRPC
// connection on 127.0.0.1, callers in parallel.
func BenchmarkGRPCShouldRateLimit(b *testing.B) {
	r := startRLS(b, semantics, envoyrls.ServerOptions{})
	req := rlsRequest("api", desc("sliding", "x"))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.client.ShouldRateLimit(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCharging: one ShouldRateLimit of two fixed-window descriptors,
// in process, under each charging mode (compare the modes' ns/op and
// allocs/op against one another in the same run).
func BenchmarkCharging(b *testing.B) {
	for _, c := range []envoyrls.Charging{envoyrls.ChargeEach, envoyrls.ChargeStopWhenOver, envoyrls.ChargeAllOrNothing} {
		b.Run(c.String(), func(b *testing.B) {
			r := startRLS(b, semantics, envoyrls.ServerOptions{}, func(cfg *envoyrls.Config) { cfg.Charging = c })
			req := rlsRequest("api", desc("remote_address", "b1"), desc("plan", "premium"))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := r.svc.ShouldRateLimit(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
