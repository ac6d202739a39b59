package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/internal/testutil"
)

// envoyYAML limits remote_address to 5 per 366 days (the days are aligned
// to the Unix epoch like every fixed window: see testutil.NoRollover).
const envoyYAML = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: day, unit_multiplier: 366, requests_per_unit: 5}
  - key: user
    rate_limit: {unit: day, requests_per_unit: 1000, algorithm: sliding}
`

// rlsClient dials a node's --grpc address with a real client of the
// protos Envoy uses; token, if set, goes as the bearer metadata.
func rlsClient(t *testing.T, addr, token string) (pb.RateLimitServiceClient, *grpc.ClientConn) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := pb.NewRateLimitServiceClient(conn)
	if token == "" {
		return c, conn
	}
	return authed{c, token}, conn
}

// authed adds the bearer token to every call.
type authed struct {
	pb.RateLimitServiceClient
	token string
}

func (a authed) ShouldRateLimit(ctx context.Context, in *pb.RateLimitRequest, opts ...grpc.CallOption) (*pb.RateLimitResponse, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+a.token)
	return a.RateLimitServiceClient.ShouldRateLimit(ctx, in, opts...)
}

func rlsReq(domain string, kv ...string) *pb.RateLimitRequest {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return &pb.RateLimitRequest{Domain: domain, Descriptors: []*rlpb.RateLimitDescriptor{d}}
}

func shouldRateLimit(t *testing.T, c pb.RateLimitServiceClient, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := shouldRateLimitErr(c, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// shouldRateLimitErr is shouldRateLimit returning its error, for
// goroutines other than the test's.
func shouldRateLimitErr(c pb.RateLimitServiceClient, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.ShouldRateLimit(ctx, req)
}

// TestEnvoyRLSBinary: the binary serves the RLS on --grpc with
// --envoy-config: the bearer token of --requirepass, health, POST /json
// (200, then 429), a changed file picked up within seconds, a bad file
// (on change and on SIGHUP) keeping the last good config and counted.
func TestEnvoyRLSBinary(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "rls.yaml")
	if err := os.WriteFile(conf, []byte(envoyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr := testutil.FreeAddr(t)
	p := startProc(t, bin, t.TempDir(), "--grpc", grpcAddr, "--envoy-config", conf, "--requirepass", "s3cret")
	anon, conn := rlsClient(t, grpcAddr, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := anon.ShouldRateLimit(ctx, rlsReq("edge", "remote_address", "a")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	c, _ := rlsClient(t, grpcAddr, "s3cret")
	for i := 0; i < 4; i++ {
		if r := shouldRateLimit(t, c, rlsReq("edge", "remote_address", "a")); r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != uint32(4-i) {
			t.Fatalf("hit %d: %v", i, r)
		}
	}
	// POST /json: the 5th hit is allowed, the 6th is 429.
	for _, want := range []int{200, 429} {
		req, _ := http.NewRequest("POST", "http://"+p.http+"/json", strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"a"}]}]}`))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || resp.Header.Get("RateLimit-Policy") == "" {
			t.Fatalf("POST /json: %d %v, want %d", resp.StatusCode, resp.Header, want)
		}
	}
	// Without the token: a 401 whose JSON reads as written.
	resp, err := http.Post("http://"+p.http+"/json", "application/json", strings.NewReader(`{"domain":"edge"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(body), "Bearer <--requirepass>") {
		t.Fatalf("POST /json without the token: %d %s", resp.StatusCode, body)
	}
	// A changed file is picked up within seconds.
	if err := os.WriteFile(conf, []byte(strings.Replace(envoyYAML, "requests_per_unit: 5", "requests_per_unit: 50", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "the changed limit", func() bool {
		return shouldRateLimit(t, c, rlsReq("edge", "remote_address", "b")).Statuses[0].CurrentLimit.GetRequestsPerUnit() == 50
	})
	// A bad file keeps the last good configuration, on change and on SIGHUP.
	if err := os.WriteFile(conf, []byte("domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "the bad file's error in the log", func() bool {
		return strings.Contains(p.logs.String(), "rls.yaml") && strings.Contains(p.logs.String(), "line=4 field=descriptors[0].rate_limit.unit")
	})
	p.process.Signal(syscall.SIGHUP)
	testutil.WaitFor(t, 15*time.Second, "two failed loads counted", func() bool {
		return strings.Contains(httpGet(t, "http://"+p.http+"/metrics"), `ratelimit_service_config_load_total{result="error"} 2`)
	})
	if r := shouldRateLimit(t, c, rlsReq("edge", "remote_address", "b")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 50 {
		t.Fatalf("after a bad file: %v", r)
	}
	m := httpGet(t, "http://"+p.http+"/metrics")
	if !strings.Contains(m, `ratelimit_service_rate_limit_over_limit{domain="edge",key1="remote_address"} `) ||
		!strings.Contains(m, `ratelimit_service_rate_limit_within_limit{domain="edge",key1="remote_address"} `) ||
		!strings.Contains(m, `rlserver_rls_rate_limit_within_limit{domain="edge",key="remote_address"} `) {
		t.Fatalf("metrics:\n%s", grepLines(m, "ratelimit_service"))
	}
	p.stop()
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestEnvoyRLSCluster: three nodes serve the RLS; a descriptor's counter
// lives in its slot's group, so hits sent to any node count together,
// and a request whose descriptors live in several groups is never
// admitted over a limit.
func TestEnvoyRLSCluster(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	conf := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(conf, []byte(envoyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	var ids, raft, peers, grpcs []string
	for i := 0; i < 3; i++ {
		ids = append(ids, fmt.Sprintf("n%d", i+1))
		raft = append(raft, testutil.FreeAddr(t))
		grpcs = append(grpcs, testutil.FreeAddr(t))
		peers = append(peers, ids[i]+"="+raft[i])
	}
	procs := make([]*proc, 3)
	errs := make([]error, 3)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procs[i], errs[i] = startProcErr(t, bin, dirs[i], "--node-id", ids[i], "--raft-addr", raft[i], "--peers", strings.Join(peers, ","),
				"--groups", "8", "--grpc", grpcs[i], "--envoy-config", conf)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil { // a node did not start
		t.Fatal(err)
	}
	waitBalanced(t, procs, 30*time.Second)
	var clients []pb.RateLimitServiceClient
	for _, a := range grpcs {
		c, _ := rlsClient(t, a, "")
		clients = append(clients, c)
	}
	// 5 per 366 days for each address, asked round-robin of the three nodes.
	for _, addr := range []string{"10.1.1.1", "10.1.1.2", "10.1.1.3"} {
		var codes []string
		for i := 0; i < 7; i++ {
			r := shouldRateLimit(t, clients[i%3], rlsReq("edge", "remote_address", addr))
			codes = append(codes, r.OverallCode.String())
		}
		if got := strings.Join(codes, " "); got != "OK OK OK OK OK OVER_LIMIT OVER_LIMIT" {
			t.Fatalf("%s: %s", addr, got)
		}
	}
	// Many descriptors in one request land in several groups: concurrent
	// requests from every node never admit more than 5 for any of them.
	var mu sync.Mutex
	admitted := map[string]int{}
	var cwg sync.WaitGroup
	for w := 0; w < 6; w++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for i := 0; i < 6; i++ {
				req := &pb.RateLimitRequest{Domain: "edge"}
				var names []string
				for k := 0; k < 6; k++ {
					v := fmt.Sprintf("m%d", (w+k+i)%8)
					names = append(names, v)
					req.Descriptors = append(req.Descriptors, rlsReq("edge", "remote_address", v).Descriptors[0])
				}
				r, err := shouldRateLimitErr(clients[(w+i)%3], req)
				if err != nil {
					t.Errorf("ShouldRateLimit: %v", err)
					return
				}
				if r.OverallCode == pb.RateLimitResponse_OK {
					mu.Lock()
					for _, n := range names {
						admitted[n]++
					}
					mu.Unlock()
				}
			}
		}()
	}
	cwg.Wait()
	var keys []string
	for k, n := range admitted {
		if n > 5 {
			t.Errorf("%s admitted %d times, limit 5", k, n)
		}
		keys = append(keys, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(keys)
	t.Logf("admitted per descriptor: %v", keys)
}
