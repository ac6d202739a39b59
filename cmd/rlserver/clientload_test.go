package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testutil"
)

// The clients users run, driven at a steady rate while the cluster moves:
// go-redis's ClusterClient and redis-py's RedisCluster, each with its
// default options (only the nodes' addresses are given). Each checks its
// keys in turn with a limit no test reaches (fixed, in windows of 366
// days: see testutil.NoRollover), and counts the admissions acknowledged per key
// and every error that reaches it; the tests then compare each key's
// count with what RL.PEEK says was charged.

// loadResult is what one client saw.
type loadResult struct {
	name   string
	acked  map[string]int64
	checks int64
	errs   []loadError
}

// loadError is an error that reached the application.
type loadError struct {
	at time.Time // when the error reached the application
	// start is when the application sent the check (go-redis only; zero
	// for redis-py): a check can retry for seconds, from one phase of a
	// test into the next.
	start time.Time
	err   string
	// trail is what each node the client tried answered, for go-redis's
	// ClusterClient (see attemptHook): which node a failed check went to,
	// and when, says why it failed.
	trail []attempt
}

// attempt is one node's answer to one try of a command.
type attempt struct {
	at, end time.Time
	addr    string
	cmd     string // RL.CHECK, or what the client sent for itself (CLUSTER SLOTS, COMMAND)
	err     string
}

// trailKey is the context key of a command's *[]attempt.
type trailKey struct{}

// attemptHook records, in the trail of the command's context, every
// call of a node's client by the ClusterClient: the node's address,
// when, and its error (its own retries on one connection pool are inside
// one attempt).
type attemptHook struct{ addr string }

func (h attemptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h attemptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		if tr, ok := ctx.Value(trailKey{}).(*[]attempt); ok {
			a := attempt{at: start, end: time.Now(), addr: h.addr, cmd: cmd.FullName(), err: "ok"}
			if err != nil {
				a.err = err.Error()
			}
			*tr = append(*tr, a)
		}
		return err
	}
}

func (h attemptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// describe prints e and its trail, times relative to since.
func (e loadError) describe(since time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", e.err)
	for _, a := range e.trail {
		fmt.Fprintf(&b, "; %v-%v %s to %s: %s", a.at.Sub(since).Round(time.Millisecond), a.end.Sub(since).Round(time.Millisecond), a.cmd, a.addr, a.err)
	}
	return b.String()
}

// loadLimit is the limit of the load's keys: one no test reaches.
const loadLimit = 1000000

// goLoad is a go-redis ClusterClient with default options, checking keys
// from several goroutines.
type goLoad struct {
	name   string
	client *redis.ClusterClient
	stopCh chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  map[string]int64
	errs   []loadError
	checks atomic.Int64
	// began holds, for each worker, when its check under way was sent (ns
	// since the Unix epoch; 0 between checks): see quiet.
	began []atomic.Int64
}

// startGoLoad starts workers goroutines, each checking its share of keys
// keys (prefix:w:k), pausing pause between two checks.
func startGoLoad(t *testing.T, name string, addrs []string, workers, keys int, pause time.Duration) *goLoad {
	l := &goLoad{name: name, client: redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}),
		stopCh: make(chan struct{}), acked: map[string]int64{}, began: make([]atomic.Int64, workers)}
	l.client.OnNewNode(func(rdb *redis.Client) { rdb.AddHook(attemptHook{rdb.Options().Addr}) })
	t.Cleanup(func() { l.client.Close() })
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stopCh:
					return
				default:
				}
				key := fmt.Sprintf("%s:%d:%d", name, w, i%(keys/workers))
				var trail []attempt
				ctx := context.WithValue(context.Background(), trailKey{}, &trail)
				start := time.Now()
				l.began[w].Store(start.UnixNano())
				v, err := l.client.Do(ctx, "RL.CHECK", key, "fixed", loadLimit, testutil.NoRollover).Slice()
				l.began[w].Store(0)
				l.checks.Add(1)
				l.mu.Lock()
				if err != nil {
					l.errs = append(l.errs, loadError{at: time.Now(), start: start, err: err.Error(), trail: trail})
				} else if v[0] == int64(1) {
					l.acked[key]++
				}
				l.mu.Unlock()
				time.Sleep(pause)
			}
		}()
	}
	return l
}

// errCount returns the number of errors seen so far.
func (l *goLoad) errCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.errs)
}

// quiet waits until no error has come for d and no check sent more than d
// ago is still under way (at most max), so that the errors of one phase
// are not counted in the next; it reports whether the load went quiet
// before max.
func (l *goLoad) quiet(d, max time.Duration) bool {
	deadline := time.Now().Add(max)
	n, since := l.errCount(), time.Now()
	for time.Since(since) < d || l.oldestUnderWay() > d {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
		if m := l.errCount(); m != n {
			n, since = m, time.Now()
		}
	}
	return true
}

// oldestUnderWay returns how long ago the oldest check under way was
// sent, 0 if none is.
func (l *goLoad) oldestUnderWay() time.Duration {
	var oldest time.Duration
	for i := range l.began {
		if ns := l.began[i].Load(); ns != 0 {
			oldest = max(oldest, time.Since(time.Unix(0, ns)))
		}
	}
	return oldest
}

// sent returns when e's check was sent, or, when that is not known, when
// its error came.
func (e loadError) sent() time.Time {
	if e.start.IsZero() {
		return e.at
	}
	return e.start
}

func (l *goLoad) stop() loadResult {
	close(l.stopCh)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return loadResult{name: l.name, acked: l.acked, checks: l.checks.Load(), errs: l.errs}
}

// pyLoad is redis-py's RedisCluster with default options, in Debian's
// python3 (testdata/clusterload.py).
type pyLoad struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   bytes.Buffer
	errw  bytes.Buffer
}

// startPyLoad starts redis-py checking keys keys (prefix:k) at about rate
// checks a second.
func startPyLoad(t *testing.T, name string, addrs []string, keys int, rate float64) *pyLoad {
	py := testutil.RequirePython(t, "redis.cluster") // redis-py with its RedisCluster
	l := &pyLoad{t: t, name: name}
	l.cmd = exec.Command(py, "testdata/clusterload.py", strings.Join(addrs, ","), name, fmt.Sprint(keys), fmt.Sprint(rate))
	l.cmd.Stdout, l.cmd.Stderr = &l.out, &l.errw
	var err error
	if l.stdin, err = l.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.cmd.Process.Kill() })
	return l
}

func (l *pyLoad) stop() loadResult {
	l.stdin.Close()
	if err := l.cmd.Wait(); err != nil {
		l.t.Fatalf("clusterload.py: %v\n%s", err, l.errw.String())
	}
	var out struct {
		Acked  map[string]int64 `json:"acked"`
		Checks int64            `json:"checks"`
		Errors [][2]any         `json:"errors"`
	}
	if err := json.Unmarshal(l.out.Bytes(), &out); err != nil {
		l.t.Fatalf("clusterload.py printed %q: %v\n%s", l.out.String(), err, l.errw.String())
	}
	r := loadResult{name: l.name, acked: out.Acked, checks: out.Checks}
	for _, e := range out.Errors {
		at, _ := e[0].(float64)
		r.errs = append(r.errs, loadError{at: time.Unix(0, int64(at*1e9)), err: fmt.Sprint(e[1])})
	}
	return r
}

// phases names the moments of a test, to say when each error came.
type phases struct {
	mu    sync.Mutex
	names []string
	at    []time.Time
}

func (p *phases) begin(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names, p.at = append(p.names, name), append(p.at, time.Now())
}

// of returns the phase under way at t.
func (p *phases) of(t time.Time) string {
	name, _ := p.lookup(t)
	return name
}

// into returns the phase under way at t and how far into it t is.
func (p *phases) into(t time.Time) (string, time.Duration) {
	name, start := p.lookup(t)
	if start.IsZero() {
		return name, 0
	}
	return name, t.Sub(start)
}

func (p *phases) lookup(t time.Time) (string, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name, start := "before", time.Time{}
	for i, at := range p.at {
		if !t.Before(at) {
			name, start = p.names[i], at
		}
	}
	return name, start
}

// assertNoErrorsAndCounted fails the test if any client saw an error, and
// checks that every key's charge, as RL.PEEK reports it through a
// ClusterClient, equals the admissions its client was told of: nothing
// acknowledged lost, nothing counted twice. That is what planned moves
// promise; lost (see leadsLost) is how many leads were lost otherwise
// meanwhile, to a machine too busy for the nodes' heartbeats: what that
// costs (a TRYAGAIN, a charge retried, in fast mode a charge forgotten) is
// then reported, not failed, since no planned move caused it.
func assertNoErrorsAndCounted(t *testing.T, addrs []string, ph *phases, lost int, results ...loadResult) {
	t.Helper()
	errorf := t.Errorf
	if lost > 0 {
		t.Logf("%d leads were lost to missed heartbeats (a busy machine) besides the planned moves: what they cost is reported, not failed", lost)
		errorf = t.Logf
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	for _, r := range results {
		byPhase := map[string]int{}
		for _, e := range r.errs {
			byPhase[ph.of(e.at)]++
		}
		var total int64
		for _, n := range r.acked {
			total += n
		}
		t.Logf("%s: %d checks, %d admissions acknowledged on %d keys, %d errors %v", r.name, r.checks, total, len(r.acked),
			len(r.errs), byPhase)
		if len(r.errs) > 0 {
			shown := r.errs
			if len(shown) > 5 {
				shown = shown[:5]
			}
			for _, e := range shown {
				errorf("%s saw an error during %q: %s", r.name, ph.of(e.at), e.err)
			}
		}
		if r.checks < 100 {
			t.Errorf("%s made only %d checks", r.name, r.checks)
		}
		keys := make([]string, 0, len(r.acked))
		for k := range r.acked {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		wrong := 0
		for _, k := range keys {
			v, err := c.Do(context.Background(), "RL.PEEK", k, "fixed", loadLimit, testutil.NoRollover).Slice()
			if err != nil {
				t.Fatalf("RL.PEEK %s: %v", k, err)
			}
			if used := loadLimit - v[2].(int64); used != r.acked[k] {
				if wrong++; wrong <= 5 {
					errorf("%s is charged %d, but %d admissions were acknowledged", k, used, r.acked[k])
				}
			}
		}
		if wrong > 0 {
			errorf("%s: %d of %d keys are not charged exactly what was acknowledged", r.name, wrong, len(keys))
		}
	}
}

// assertNothingLost checks, after kills in strong mode, that every key
// of r is charged at least the admissions acknowledged (RL.PEEK through
// a ClusterClient), and in all at most that plus the checks whose outcome
// the client could not know: those that ended in an error, and one in
// flight per worker per kill (go-redis retries a command whose connection
// broke, and the first try may have been committed). It returns the
// admissions acknowledged and the charges beyond them.
func assertNothingLost(t *testing.T, addrs []string, r loadResult, kills, workers int) (acked, extra int64) {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	for k, n := range r.acked {
		v, err := c.Do(context.Background(), "RL.PEEK", k, "fixed", loadLimit, testutil.NoRollover).Slice()
		if err != nil {
			t.Fatalf("RL.PEEK %s: %v", k, err)
		}
		used := loadLimit - v[2].(int64)
		if used < n {
			t.Errorf("%s is charged %d, but %d admissions were acknowledged: some were lost", k, used, n)
		}
		acked, extra = acked+n, extra+used-n
	}
	if bound := int64(len(r.errs) + kills*workers); extra > bound {
		t.Errorf("%d charges more than acknowledged; at most %d checks (%d errors, %d kills × %d in flight) had an unknown outcome",
			extra, bound, len(r.errs), kills, workers)
	}
	return acked, extra
}

// testLogs holds the logs of every process a test started (by the name
// of the top-level test), for leadsLost.
var testLogs struct {
	sync.Mutex
	m map[string][]fmt.Stringer
}

// noteLogs records logs as those of a process t started.
func noteLogs(t testing.TB, logs fmt.Stringer) {
	top, _, _ := strings.Cut(t.Name(), "/")
	testLogs.Lock()
	defer testLogs.Unlock()
	if testLogs.m == nil {
		testLogs.m = map[string][]fmt.Stringer{}
	}
	testLogs.m[top] = append(testLogs.m[top], logs)
}

// leadsLost counts, in the logs of the processes t started and in files,
// the group leads lost without a hand-over (a node that stopped leading
// and rebuilt its state from the log): a lease that ran out because a
// busy machine kept a node from its heartbeats. A planned move loses
// none; a lost lead may answer TRYAGAIN to the changes in flight (and a
// client's retry may charge one twice), and in fast mode forget the last
// ones acknowledged, as after a crash.
func leadsLost(t testing.TB, files ...string) int {
	top, _, _ := strings.Cut(t.Name(), "/")
	testLogs.Lock()
	var logs []string
	for _, l := range testLogs.m[top] {
		logs = append(logs, l.String())
	}
	testLogs.Unlock()
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			logs = append(logs, string(b))
		}
	}
	n := 0
	for _, l := range logs {
		n += strings.Count(l, "no longer leading; state rebuilt from the log")
	}
	return n
}
