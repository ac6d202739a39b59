package envoyrls_test

import (
	"context"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/rlserver/rlserver/envoyrls"
	"github.com/rlserver/rlserver/internal/testcert"
)

// TestReflectionAndHealth: grpcurl and grpc_health_probe work as they do
// against envoyproxy/ratelimit: server reflection lists the rate limit
// service and health, and health answers SERVING for the service.
func TestReflectionAndHealth(t *testing.T) {
	r := startRLS(t, "domain: d\n", envoyrls.ServerOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := rpb.NewServerReflectionClient(r.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the list: %v, want EOF", err)
	}
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	sort.Strings(names)
	got := strings.Join(names, " ")
	for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health"} {
		if !strings.Contains(got, want) {
			t.Errorf("reflection lists %q, without %s", got, want)
		}
	}
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		h, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v, want SERVING", svc, h, err)
		}
	}
}

// TestTLS: with a TLS configuration the service is served over TLS only:
// a client that trusts the certificate is answered, a plaintext one is not.
func TestTLS(t *testing.T) {
	certs := testcert.New(t)
	r := startRLS(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
		envoyrls.ServerOptions{TLS: certs.ServerConfig(false)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{desc("k", "v")}}
	if _, err := r.client.ShouldRateLimit(ctx, req); err == nil {
		t.Fatal("a plaintext client was answered by a TLS server")
	}
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(credentials.NewTLS(certs.ClientConfig(false))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewRateLimitServiceClient(conn)
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := c.ShouldRateLimit(ctx, req)
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("over TLS, request %d: %v %v, want %v", i+1, resp.GetOverallCode(), err, want)
		}
	}
}
