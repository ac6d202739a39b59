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
