package envoyrls_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/envoyrls"
	"github.com/rlserver/rlserver/internal/h2flood"
	"github.com/rlserver/rlserver/internal/testutil"
)

// refused reads rlserver_grpc_calls_refused_total{reason}.
func refused(t *testing.T, r *rls, reason string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rlserver_grpc_calls_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// withToken adds the bearer token to ctx.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// TestTokenOnHeaders: with tokens set, a call without one is refused on
// its headers, before its message (which stalled calls never send): the
// server ends every such stream at once instead of keeping a goroutine
// waiting for it (before: none ended). Health's Check stays open; Watch
// and reflection, which hold a stream, need the token.
func TestTokenOnHeaders(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{Tokens: []string{"tok"}})
	for _, token := range []string{"", "wrong"} {
		f := h2flood.Stall(r.addr, h2flood.ShouldRateLimit, token, 2, 20)
		testutil.WaitFor(t, 10*time.Second, "the server to end 40 calls with token "+token, func() bool { return f.Ended.Load() == 40 })
		f.Close()
	}
	if n := refused(t, r, "unauthenticated"); n != 80 {
		t.Errorf("refused{unauthenticated} = %v, want 80", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.call(rlsRequest("api", desc("remote_address", "a"))); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ShouldRateLimit without the token: %v", err)
	}
	hc := healthpb.NewHealthClient(r.conn)
	if h, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Check without the token: %v %v", h, err)
	}
	for _, token := range []string{"", "tok"} {
		cctx := ctx
		if token != "" {
			cctx = withToken(ctx, token)
		}
		want := codes.Unauthenticated
		if token != "" {
			want = codes.OK
		}
		w, err := hc.Watch(cctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if status.Code(err) != want {
			t.Errorf("health Watch with token %q: %v, want %v", token, err, want)
		}
		if got := reflectionCode(cctx, r.conn); got != want {
			t.Errorf("reflection with token %q: %v, want %v", token, got, want)
		}
	}
}

// rlsRequest builds a request of descriptors.
func rlsRequest(domain string, descs ...*rlpb.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: descs}
}

// reflectionCode lists the services by reflection and returns the code.
func reflectionCode(ctx context.Context, conn *grpc.ClientConn) codes.Code {
	s, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return status.Code(err)
	}
	s.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}) // io.EOF if refused: Recv has the status
	_, err = s.Recv()
	s.CloseSend()
	return status.Code(err)
}

// TestStalledCallsEnd: calls with the token that send their headers and
// never their message are ended after the message timeout (before: held
// for ever), and counted.
func TestStalledCallsEnd(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{Tokens: []string{"tok"}, MessageTimeout: 200 * time.Millisecond})
	start := time.Now()
	f := h2flood.Stall(r.addr, h2flood.ShouldRateLimit, "tok", 2, 10)
	defer f.Close()
	testutil.WaitFor(t, 10*time.Second, "the server to end 20 stalled calls", func() bool { return f.Ended.Load() == 20 })
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("stalled calls ended after %v, before the message timeout", took)
	}
	if n := refused(t, r, "no_message"); n != 20 {
		t.Errorf("refused{no_message} = %v, want 20", n)
	}
	ctx, cancel := context.WithTimeout(withToken(context.Background(), "tok"), 10*time.Second)
	defer cancel()
	if resp, err := r.client.ShouldRateLimit(ctx, rlsRequest("api", desc("remote_address", "fine"))); err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("after the stalled calls: %v %v", resp, err)
	}
}

// TestStalledCallsGiveWay: with 16 calls in flight at most (4 of them
// waiting for their message, 1 health check without a token), 3
// connections of 32 stalled calls hold 4 places and a few goroutines, and
// a client's calls are still answered, each taking a stalled call's
// place; stalled health checks without a token take only their own pool's
// place, and a health check is still answered beside them.
func TestStalledCallsGiveWay(t *testing.T) {
	r := startRLS(t, semantics, envoyrls.ServerOptions{Tokens: []string{"tok"}, MaxCalls: 16, MessageTimeout: time.Minute})
	base := runtime.NumGoroutine()
	f := h2flood.Stall(r.addr, h2flood.ShouldRateLimit, "tok", 3, 32)
	defer f.Close()
	testutil.WaitFor(t, 10*time.Second, "92 of 96 stalled calls evicted", func() bool { return f.Ended.Load() == 92 })
	anon := h2flood.Stall(r.addr, healthpb.Health_Check_FullMethodName, "", 1, 10)
	defer anon.Close()
	testutil.WaitFor(t, 10*time.Second, "9 of 10 stalled health checks evicted", func() bool { return anon.Ended.Load() == 9 })
	if n := f.Ended.Load(); n != 92 {
		t.Fatalf("health checks without the token evicted %d calls with it", n-92)
	}
	// The client's goroutines (a reader per connection) and the server's
	// (three per connection, one per call it holds), once the evicted
	// calls' goroutines are gone (before: one per stalled call).
	limit := base + 4*4 + 4 + 1 + 4
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("at most %d goroutines beside 106 stalled calls", limit), func() bool { return runtime.NumGoroutine() <= limit })
	ctx, cancel := context.WithTimeout(withToken(context.Background(), "tok"), 10*time.Second)
	defer cancel()
	for i := 0; i < 10; i++ {
		if _, err := r.client.ShouldRateLimit(ctx, rlsRequest("api", desc("remote_address", "fine"))); err != nil {
			t.Fatalf("call %d beside the stalled calls: %v", i, err)
		}
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer hcancel()
	h, err := healthpb.NewHealthClient(r.conn).Check(hctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Check without the token beside stalled ones: %v %v", h, err)
	}
	// 92 and 9 evicted by the floods, one by the client's first call (the
	// others found a place free), one by the health check.
	if n := refused(t, r, "evicted"); n != 92+9+1+1 {
		t.Errorf("refused{evicted} = %v, want %d", n, 92+9+1+1)
	}
}
