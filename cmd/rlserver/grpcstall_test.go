package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/h2flood"
	"github.com/rlserver/rlserver/internal/testutil"
)

// floodScale returns the connections and streams per connection of the
// stalled-stream tests: RLSERVER_FLOOD=CONNSxSTREAMS (200x256 is the
// issue's figure) or the quick default.
func floodScale(t *testing.T, conns, streams int) (int, int) {
	v := os.Getenv("RLSERVER_FLOOD")
	if v == "" {
		return conns, streams
	}
	c, s, ok := strings.Cut(v, "x")
	nc, err1 := strconv.Atoi(c)
	ns, err2 := strconv.Atoi(s)
	if !ok || err1 != nil || err2 != nil || nc < 2 || ns < 1 {
		t.Fatalf("RLSERVER_FLOOD=%q: want CONNSxSTREAMS, e.g. 200x256", v)
	}
	return nc, ns
}

// vmRSS returns the resident memory of process pid, in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	n := procStatus(pid, "VmRSS")
	if n <= 0 {
		t.Fatalf("no VmRSS in /proc/%d/status", pid)
	}
	return n
}

// goroutines returns the node's go_goroutines from /metrics.
func goroutines(t *testing.T, p *proc) int {
	t.Helper()
	for _, l := range strings.Split(httpGet(t, "http://"+p.http+"/metrics"), "\n") {
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	t.Fatal("no go_goroutines in /metrics")
	return 0
}

// respP99 times n RL.CHECKs of c, one at a time, and returns the 99th
// percentile.
func respP99(t *testing.T, c *redis.Client, n int) time.Duration {
	t.Helper()
	d := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := c.Do(context.Background(), "RL.CHECK", "bystander", "fixed", 1000000000, testutil.NoRollover).Err(); err != nil {
			t.Fatalf("bystander RL.CHECK: %v", err)
		}
		d = append(d, time.Since(start))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)*99/100]
}

// settle polls the node's goroutines until they stop growing for 300 ms
// (at most 5 s): the server has taken in what the flood sent.
func settle(t *testing.T, p *proc) int {
	t.Helper()
	last, since := goroutines(t, p), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && time.Since(since) < 300*time.Millisecond; {
		time.Sleep(50 * time.Millisecond)
		if n := goroutines(t, p); n > last {
			last, since = n, time.Now()
		}
	}
	return last
}

// TestGRPCStalledStreams: connections that open ShouldRateLimit streams
// and never send the message, half of them with the password and half
// without, hold a bounded and small share of a real node: its resident
// memory and goroutines grow by little, a RESP bystander keeps its p99
// against a reference taken in the same run, and an Envoy-like client is
// still answered. RLSERVER_FLOOD=200x256 runs the figure.
func TestGRPCStalledStreams(t *testing.T) {
	alone(t)
	conns, streams := floodScale(t, 40, 256)
	bin := buildBinary(t)
	conf := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(conf, []byte(envoyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr := testutil.FreeAddr(t)
	p := startProc(t, bin, t.TempDir(), "--grpc", grpcAddr, "--envoy-config", conf, "--requirepass", "s3cret")
	envoy, _ := rlsClient(t, grpcAddr, "s3cret")
	shouldRateLimit(t, envoy, rlsReq("edge", "user", "warm"))
	respP99(t, p.client, 200) // warm up
	refP99 := respP99(t, p.client, 500)
	rss0, g0 := vmRSS(t, p.process.Pid()), goroutines(t, p)

	start := time.Now()
	na := conns / 2
	authed := h2flood.Stall(grpcAddr, h2flood.ShouldRateLimit, "s3cret", na, streams)
	defer authed.Close()
	anon := h2flood.Stall(grpcAddr, h2flood.ShouldRateLimit, "", conns-na, streams)
	defer anon.Close()
	g1 := settle(t, p)
	rss1 := vmRSS(t, p.process.Pid())
	duringP99 := respP99(t, p.client, 500)
	if r := shouldRateLimit(t, envoy, rlsReq("edge", "user", "alice")); r.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("an Envoy call beside the flood: %v", r)
	}
	rss1 = max(rss1, vmRSS(t, p.process.Pid()))
	held := time.Since(start)
	grow := rss1 - rss0
	t.Logf("%d connections x %d stalled streams (half with the password): RSS %d -> %d MiB (+%d MiB), goroutines %d -> %d, "+
		"RESP p99 %v alone, %v beside the flood; streams ended by the server %d, connections closed %d, held %v",
		conns, streams, rss0>>20, rss1>>20, grow>>20, g0, g1, refP99, duringP99, authed.Ended.Load()+anon.Ended.Load(),
		authed.Gone.Load()+anon.Gone.Load(), held.Round(time.Millisecond))
	// Bounds: tens of KiB per connection (its buffers and three
	// goroutines) and the calls the server admits at once (at most 1024,
	// of which 256 waiting for their message), with the garbage of the
	// streams it refused or ended; not a goroutine and buffers per stream
	// (before: +121 MiB and 10,398 goroutines at 40x256, +584 MiB and
	// 51,838 at 200x256).
	if limit := int64(conns)*256<<10 + 24<<20; grow > limit {
		t.Errorf("RSS grew by %d MiB beside %d stalled streams, want at most %d MiB", grow>>20, conns*streams, limit>>20)
	}
	if limit := g0 + 4*conns + 1024; g1 > limit {
		t.Errorf("goroutines %d -> %d beside %d stalled streams, want at most %d", g0, g1, conns*streams, limit)
	}
	if limit := 5*refP99 + 20*time.Millisecond; duringP99 > limit {
		t.Errorf("RESP p99 %v beside the flood, %v alone: want at most %v", duringP99, refP99, limit)
	}
}

// healthz reports whether GET /healthz at addr answers 200 within 5 s.
func healthz(addr string) error {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz: %s", res.Status)
	}
	return nil
}

// authedCheck dials a new go-redis client with the password and runs one
// RL.CHECK.
func authedCheck(addr, pass string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: pass, MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second})
	defer c.Close()
	return c.Do(context.Background(), "RL.CHECK", "budget", "fixed", 1000, testutil.NoRollover).Err()
}

// TestGRPCBudgetLeavesRESPAndHealthz: gRPC connections without the
// password count in a budget of their own (--grpc-maxclients), so that
// more of them than --maxclients leave an authenticated go-redis client
// and GET /healthz served (before, they took --maxclients' places and
// locked both out); and the budget bounds them: beyond it a connection is
// closed, and once the flood leaves, an Envoy client is answered.
func TestGRPCBudgetLeavesRESPAndHealthz(t *testing.T) {
	parallel(t)
	bin := buildBinary(t)
	conf := filepath.Join(t.TempDir(), "rls.yaml")
	if err := os.WriteFile(conf, []byte(envoyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcAddr := testutil.FreeAddr(t)
	p := startProc(t, bin, t.TempDir(), "--grpc", grpcAddr, "--envoy-config", conf, "--requirepass", "s3cret", "--maxclients", "20")
	flood := h2flood.Stall(grpcAddr, h2flood.ShouldRateLimit, "", 40, 1)
	defer flood.Close()
	testutil.WaitFor(t, 10*time.Second, "the server to take in or close the flood's connections", func() bool { return flood.Served.Load()+flood.Gone.Load() == 40 })
	if err := authedCheck(p.resp, "s3cret"); err != nil {
		t.Errorf("a go-redis client beside 40 unauthenticated gRPC connections (--maxclients 20): %v", err)
	}
	if err := healthz(p.http); err != nil {
		t.Errorf("beside 40 unauthenticated gRPC connections (--maxclients 20): %v", err)
	}
	t.Logf("40 unauthenticated gRPC connections: %d served, %d closed, %d calls refused", flood.Served.Load(), flood.Gone.Load(), flood.Ended.Load())
	flood.Close()
	p.stop()

	grpcAddr = testutil.FreeAddr(t)
	p = startProc(t, bin, t.TempDir(), "--grpc", grpcAddr, "--envoy-config", conf, "--requirepass", "s3cret", "--grpc-maxclients", "10")
	flood = h2flood.Stall(grpcAddr, h2flood.ShouldRateLimit, "", 30, 1)
	defer flood.Close()
	testutil.WaitFor(t, 10*time.Second, "20 of 30 gRPC connections closed (--grpc-maxclients 10)", func() bool { return flood.Gone.Load() >= 20 })
	if err := authedCheck(p.resp, "s3cret"); err != nil {
		t.Errorf("a go-redis client beside a full gRPC budget: %v", err)
	}
	if err := healthz(p.http); err != nil {
		t.Errorf("beside a full gRPC budget: %v", err)
	}
	if g := flood.Gone.Load(); g != 20 {
		t.Errorf("%d of 30 gRPC connections closed with --grpc-maxclients 10, want 20", g)
	}
	if m := httpGet(t, "http://"+p.http+"/metrics"); !strings.Contains(m, "\nrlserver_grpc_connections 10\n") {
		t.Errorf("/metrics: %q, want rlserver_grpc_connections 10", grepLines(m, "rlserver_grpc_connections"))
	}
	flood.Close()
	envoy, _ := rlsClient(t, grpcAddr, "s3cret")
	testutil.WaitFor(t, 10*time.Second, "an Envoy call answered once the flood left", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := envoy.ShouldRateLimit(ctx, rlsReq("edge", "user", "alice"))
		return err == nil && r.OverallCode == pb.RateLimitResponse_OK
	})
	p.stop()
}
