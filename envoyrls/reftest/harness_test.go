package reftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/internal/redistest"
	"github.com/rlserver/rlserver/internal/rlproc"
	"github.com/rlserver/rlserver/internal/testutil"
)

// refVersion is the envoyproxy/ratelimit version compared with (its
// main branch as of 2026-01; it has no newer tag), RLS_VERSION another.
const refVersion = "v1.4.1-0.20260122083618-3fb702589d36"

var (
	buildOnce         sync.Once
	refBin, oursBin   string
	buildErr, skipWhy string
	binDir            string
)

// TestMain removes the binaries built for the run.
func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "reftest")
	if err != nil {
		panic(err)
	}
	binDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// binaries builds (once) the reference, kept in the user's cache directory
// by version, and rlserver; it skips the test when the reference cannot
// be built, and fails it when rlserver cannot. Without redis-server, on
// which the reference keeps its counts, it fails as internal/redistest
// does (skips with RLSERVER_SKIP_REDIS=1).
func binaries(t *testing.T) (ref, ours string) {
	t.Helper()
	redistest.Require(t)
	buildOnce.Do(func() {
		v := os.Getenv("RLS_VERSION")
		if v == "" {
			v = refVersion
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir := filepath.Join(cache, "rlserver-reftest", "envoyproxy-ratelimit@"+v)
		refBin = filepath.Join(dir, "service_cmd")
		if _, err := os.Stat(refBin); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "install", "github.com/envoyproxy/ratelimit/src/service_cmd@"+v)
			cmd.Dir = os.TempDir() // outside this module
			cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
			if out, err := cmd.CombinedOutput(); err != nil {
				skipWhy = fmt.Sprintf("envoyproxy/ratelimit@%s cannot be built on this machine (go install: %v):\n%s", v, err, tail(out))
				return
			}
		}
		oursBin = filepath.Join(binDir, "rlserver")
		cmd := exec.Command("go", "build", "-o", oursBin, "github.com/rlserver/rlserver/cmd/rlserver")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Sprintf("go build rlserver: %v\n%s", err, out)
		}
	})
	if skipWhy != "" {
		t.Skip("no side-by-side comparison: " + skipWhy)
	}
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return refBin, oursBin
}

func tail(b []byte) string {
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return string(b)
}

// side is one of the two services.
type side struct {
	name    string
	client  pb.RateLimitServiceClient
	httpURL string // base URL of POST /json
	metrics string // URL of its Prometheus exposition
	proc    *rlproc.Proc
}

// pair is the reference and rlserver serving the same YAML file.
type pair struct {
	t         *testing.T
	ref, ours *side
	yamlPath  string
}

// opts are a pair's extras: environment variables given to both, flags
// to rlserver, and how long the test's steps need to stay in one minute
// (0: 5 s; see awayFromBoundary).
type opts struct {
	env   []string
	args  []string
	steps time.Duration
}

// startPair starts redis-server, the reference on it and rlserver, both
// on the domain's YAML, waits until both answer for domain, and then, if
// needed, for a minute boundary (awayFromBoundary), so that the test's
// steps stay in one minute.
func startPair(t *testing.T, domain, yaml string, o opts) *pair {
	t.Helper()
	refPath, oursPath := binaries(t)
	w := t.TempDir()
	cfgDir := filepath.Join(w, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &pair{t: t, yamlPath: filepath.Join(cfgDir, "rls.yaml")}
	p.write(yaml)

	redisAddr := redistest.Start(t)

	// The reference runs in w, with its settings in its environment: env(1)
	// sets them, as rlproc.Start starts a binary with arguments alone.
	grpcRef, httpRef, debugRef, promRef := testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)
	refEnv := append([]string{"-C", w, "USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL=" + redisAddr, "RUNTIME_ROOT=" + filepath.Join(w, "runtime"),
		"RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(httpRef), "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(grpcRef),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(debugRef),
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:" + strconv.Itoa(promRef),
		// Its counters reach its exporter when its stats are flushed, every
		// 10 s by default: TestMetricsNames waited up to that for them.
		"STATS_FLUSH_INTERVAL=500ms"}, o.env...)
	p.ref = &side{name: "envoyproxy/ratelimit", httpURL: fmt.Sprintf("http://127.0.0.1:%d", httpRef),
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", promRef)}
	p.ref.proc = start(t, p.ref.name, "env", append(refEnv, refPath))
	p.ref.client = dial(t, fmt.Sprintf("127.0.0.1:%d", grpcRef))

	// rlserver on free ports, started again on others should another
	// process take one (rlproc.OnFreeAddrs), waited for by PING.
	var grpcOurs, httpOurs string
	ours, err := rlproc.OnFreeAddrs(3, func(addrs []string) (*rlproc.Proc, error) {
		respOurs := addrs[0]
		httpOurs, grpcOurs = addrs[1], addrs[2]
		args := append([]string{"--listen", respOurs, "--http", httpOurs, "--grpc", grpcOurs, "--data-dir", "",
			"--envoy-config", p.yamlPath, "--log-level", "warn"}, o.args...)
		rp, err := rlproc.Start("rlserver", "env", append(append(append([]string{}, o.env...), oursPath), args...), nil)
		if err != nil {
			return nil, err
		}
		return rp, rp.WaitPing(respOurs, 20*time.Second, func() error { return rlproc.Ping(respOurs) })
	})
	if ours != nil {
		t.Cleanup(func() { stopped(t, "rlserver", ours) })
	}
	if err != nil {
		t.Fatal(err)
	}
	p.ours = &side{name: "rlserver", httpURL: "http://" + httpOurs, metrics: "http://" + httpOurs + "/metrics", proc: ours}
	p.ours.client = dial(t, grpcOurs)

	for _, s := range []*side{p.ref, p.ours} {
		p.waitLoaded(s, domain)
	}
	if o.steps == 0 {
		o.steps = 5 * time.Second
	}
	awayFromBoundary(t, o.steps)
	return p
}

// start starts bin with args (rlproc.Start) until the test ends.
func start(t *testing.T, name, bin string, args []string) *rlproc.Proc {
	t.Helper()
	p, err := rlproc.Start(name, bin, args, nil)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { stopped(t, name, p) })
	return p
}

// stopped kills p, and logs the end of its output if the test failed.
func stopped(t *testing.T, name string, p *rlproc.Proc) {
	p.Kill()
	if t.Failed() {
		t.Logf("%s's output:\n%s", name, tail([]byte(p.Log().String())))
	}
}

func dial(t *testing.T, addr string) pb.RateLimitServiceClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

// waitLoaded waits until s answers for domain with a limit for the probe
// descriptor [probe=x] (every scenario's YAML has it, with hits 0 looked
// at only): its configuration is loaded.
func (p *pair) waitLoaded(s *side, domain string) {
	p.waitProbe(s, domain, 0)
}

// waitProbe waits until s answers the probe with requests_per_unit want
// (0: any).
func (p *pair) waitProbe(s *side, domain string, want uint32) {
	p.t.Helper()
	err := testutil.Poll(20*time.Second, func() error {
		if !s.proc.Alive() {
			return testutil.Stop(fmt.Errorf("%s exited: %v", s.name, s.proc.Err()))
		}
		d := desc("probe", "x")
		d.HitsAddend = zero()
		resp, err := p.call(s, &pb.RateLimitRequest{Domain: domain, Descriptors: []*rlpb.RateLimitDescriptor{d}})
		if err == nil && resp.Statuses[0].CurrentLimit != nil && (want == 0 || resp.Statuses[0].CurrentLimit.RequestsPerUnit == want) {
			return nil
		}
		return errors.New(fmt.Sprint(resp, err))
	})
	if err != nil {
		p.t.Fatalf("%s did not load the configuration of %s (probe limit %d): %v\n%s", s.name, domain, want, err, tail([]byte(s.proc.Log().String())))
	}
}

// write replaces the YAML file, as an operator's deploy does (a new file
// renamed over the old one).
func (p *pair) write(yaml string) {
	p.t.Helper()
	tmp := filepath.Join(filepath.Dir(filepath.Dir(p.yamlPath)), "rls.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(yaml), 0o644); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Rename(tmp, p.yamlPath); err != nil {
		p.t.Fatal(err)
	}
}

func (p *pair) call(s *side, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.client.ShouldRateLimit(ctx, req)
}

// step is one request and what the test expects both to answer (nil:
// only that they agree).
type step struct {
	what string
	req  *pb.RateLimitRequest
	want *pb.RateLimitResponse
}

// run sends each step to both services, in turn, and fails on the first
// field where they differ, or differ from want.
func (p *pair) run(steps ...step) {
	p.t.Helper()
	for i, st := range steps {
		ref, rerr := p.call(p.ref, st.req)
		ours, oerr := p.call(p.ours, st.req)
		where := fmt.Sprintf("step %d (%s)", i, st.what)
		if status.Code(rerr) != status.Code(oerr) {
			p.t.Fatalf("%s: error %v from the reference, %v from rlserver", where, rerr, oerr)
		}
		if rerr != nil {
			continue
		}
		if d := diff(ref, ours); d != "" {
			p.t.Fatalf("%s: the answers differ: %s\nreference: %v\nrlserver:  %v", where, d, ref, ours)
		}
		if st.want != nil {
			if d := diff(st.want, ours); d != "" {
				p.t.Fatalf("%s: both answer %v; the test wants %v (%s)", where, ours, st.want, d)
			}
		}
	}
}

// diff compares two responses as a client of the protocol sees them:
// the overall code, and for each status its code, current_limit
// (requests_per_unit, unit, name), limit_remaining and
// duration_until_reset within a second.
func diff(a, b *pb.RateLimitResponse) string {
	if a.OverallCode != b.OverallCode {
		return fmt.Sprintf("overall_code %v vs %v", a.OverallCode, b.OverallCode)
	}
	if len(a.Statuses) != len(b.Statuses) {
		return fmt.Sprintf("%d statuses vs %d", len(a.Statuses), len(b.Statuses))
	}
	for i := range a.Statuses {
		x, y := a.Statuses[i], b.Statuses[i]
		switch {
		case x.Code != y.Code:
			return fmt.Sprintf("descriptor %d: code %v vs %v", i, x.Code, y.Code)
		case (x.CurrentLimit == nil) != (y.CurrentLimit == nil):
			return fmt.Sprintf("descriptor %d: current_limit %v vs %v", i, x.CurrentLimit, y.CurrentLimit)
		case x.CurrentLimit != nil && (x.CurrentLimit.RequestsPerUnit != y.CurrentLimit.RequestsPerUnit ||
			x.CurrentLimit.Unit != y.CurrentLimit.Unit || x.CurrentLimit.Name != y.CurrentLimit.Name):
			return fmt.Sprintf("descriptor %d: current_limit %v vs %v", i, x.CurrentLimit, y.CurrentLimit)
		case x.LimitRemaining != y.LimitRemaining:
			return fmt.Sprintf("descriptor %d: limit_remaining %d vs %d", i, x.LimitRemaining, y.LimitRemaining)
		case (x.DurationUntilReset == nil) != (y.DurationUntilReset == nil):
			return fmt.Sprintf("descriptor %d: duration_until_reset %v vs %v", i, x.DurationUntilReset, y.DurationUntilReset)
		case x.DurationUntilReset != nil && abs(x.DurationUntilReset.AsDuration()-y.DurationUntilReset.AsDuration()) > time.Second:
			return fmt.Sprintf("descriptor %d: duration_until_reset %v vs %v", i, x.DurationUntilReset.AsDuration(), y.DurationUntilReset.AsDuration())
		}
	}
	return ""
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// awayFromBoundary waits, if needed, so that the next need stays in one
// minute (and so one hour): both services count fixed windows on the wall
// clock. startPair calls it once the pair has started, so that need
// covers a test's steps and not the start.
func awayFromBoundary(t *testing.T, need time.Duration) {
	now := time.Now()
	into := time.Duration(now.UnixNano() % int64(time.Minute))
	if into+need > time.Minute-time.Second {
		wait := time.Minute - into + 500*time.Millisecond
		t.Logf("waiting %v for the next minute", wait.Round(time.Millisecond))
		time.Sleep(wait)
	}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// req is a request of domain with descs.
func req(domain string, descs ...*rlpb.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: descs}
}

// postJSON posts body to s's /json and returns the status, content type
// and body.
func postJSON(t *testing.T, s *side, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(s.httpURL+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b.String()
}
