package envoyrls_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rlserver/rlserver/envoyrls"
	"github.com/rlserver/rlserver/envoyrls/config"
	"github.com/rlserver/rlserver/internal/testserver"
	"github.com/rlserver/rlserver/shards"
)

// t0 is the fake clock's start: 17 s into a minute (and an hour, a day).
var t0 = time.Unix(1_700_000_040+17, 0)

// rls is a service on a store, served over gRPC on 127.0.0.1.
type rls struct {
	t      testing.TB
	svc    *envoyrls.Service
	store  *shards.Store
	clock  *testserver.Clock
	reg    *prometheus.Registry
	client pb.RateLimitServiceClient
	conn   *grpc.ClientConn
	addr   string
}

// startRLS serves yaml (one file) with opt, the service's Config changed
// by mods.
func startRLS(t testing.TB, yaml string, opt envoyrls.ServerOptions, mods ...func(*envoyrls.Config)) *rls {
	t.Helper()
	r := &rls{t: t, store: shards.New(16), clock: testserver.NewClock(t0), reg: prometheus.NewRegistry()}
	cfg := envoyrls.Config{Limiter: r.store, Clock: r.clock.Now, Registerer: r.reg}
	for _, m := range mods {
		m(&cfg)
	}
	r.svc = envoyrls.New(cfg)
	if yaml != "" {
		c := config.Empty()
		if err := config.Parse(c, "test.yaml", []byte(yaml), config.Options{}); err != nil {
			t.Fatal(err)
		}
		r.svc.SetConfig(c)
	}
	if opt.Registerer == nil {
		opt.Registerer = r.reg
	}
	gs := envoyrls.NewGRPCServer(r.svc, opt)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	r.addr = ln.Addr().String()
	r.conn = dial(t, r.addr)
	r.client = pb.NewRateLimitServiceClient(r.conn)
	return r
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// ask sends one request and fails the test on an error.
func (r *rls) ask(domain string, descs ...*rlpb.RateLimitDescriptor) *pb.RateLimitResponse {
	r.t.Helper()
	resp, err := r.call(&pb.RateLimitRequest{Domain: domain, Descriptors: descs})
	if err != nil {
		r.t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

func (r *rls) call(req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.client.ShouldRateLimit(ctx, req)
}

// writeFile writes content to dir/name.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// allOrNothing sets ChargeAllOrNothing.
func allOrNothing(c *envoyrls.Config) { c.Charging = envoyrls.ChargeAllOrNothing }
