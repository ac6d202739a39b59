package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/internal/libscripts"
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/values"
)

// libText reads a library's script from the installed library.
func libText(tb testing.TB, library, name string) string {
	tb.Helper()
	text, err := libscripts.Text(library, name)
	if err != nil {
		tb.Skipf("%s %s: %v", library, name, err)
	}
	return text
}

// TestScriptRunsByPath checks INFO's Scripts section and the
// rlserver_script_runs_total metric: ulule/limiter's incr runs natively,
// a hand-written script in the interpreter, and with InterpretAllScripts
// both run in the interpreter.
func TestScriptRunsByPath(t *testing.T) {
	ctx := context.Background()
	incr := libText(t, libscripts.Ulule, "incr")
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("InterpretAllScripts=%v", all), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			_, addr := startServer(t, Config{Registerer: reg, InterpretAllScripts: all})
			c := newClient(t, addr, 2)
			sha, err := c.ScriptLoad(ctx, incr).Result()
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := c.EvalSha(ctx, sha, []string{"k"}, 1, 60000).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if v, err := c.Eval(ctx, incr, []string{"k"}, 1, 60000).Int64Slice(); err != nil || v[0] != 4 || v[1] < 59000 {
				t.Fatalf("EVAL of the body: %v %v, want [4 ~60000]", v, err)
			}
			for range 2 {
				if err := c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"k"}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			native, interpreted := 4, 2
			if all {
				native, interpreted = 0, 6
			}
			info := c.Info(ctx, "scripts").Val()
			wants := []string{"# Scripts", fmt.Sprintf("scripts_interpreted:%d\r\n", interpreted), fmt.Sprintf("scripts_native:%d\r\n", native)}
			if !all {
				wants = append(wants, fmt.Sprintf("scripts_native_ulule_limiter.incr:%d\r\n", native))
			}
			for _, want := range wants {
				if !strings.Contains(info, want) {
					t.Errorf("INFO scripts lacks %q:\n%s", want, info)
				}
			}
			if !all && !strings.Contains(info, "scripts_native_redis_rate.allowN:0\r\n") {
				t.Errorf("INFO scripts does not list redis_rate.allowN:\n%s", info)
			}
			want := fmt.Sprintf(`rlserver_script_runs_total{library="",path="interpreted",script=""} %d`, interpreted)
			if !all {
				want += fmt.Sprintf("\n"+`rlserver_script_runs_total{library="ulule_limiter",path="native",script="incr"} %d`, native)
			}
			if got := filterLines(t, reg, `path="interpreted"`, `script="incr"`); got != want {
				t.Fatalf("metrics:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// filterLines renders the metric's series whose labels contain one of
// the given strings, one a line.
func filterLines(t *testing.T, reg *prometheus.Registry, contains ...string) string {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		if mf.GetName() != "rlserver_script_runs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			line := fmt.Sprintf("rlserver_script_runs_total{%s} %g", strings.Join(ls, ","), m.GetCounter().GetValue())
			for _, c := range contains {
				if strings.Contains(line, c) {
					lines = append(lines, line)
					break
				}
			}
		}
	}
	return strings.Join(lines, "\n")
}

// evalClient sends batches of pipelined EVALSHAs of one script over
// distinct keys and reads their replies (lines lines each).
type evalClient struct {
	nc      net.Conn
	batches [][]byte
	buf     []byte
	next    int
	lines   int
}

func newEvalClient(tb testing.TB, addr, body string, args []string, lines, depth, keys int) *evalClient {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	c := &evalClient{nc: nc, buf: make([]byte, 64<<10), lines: lines}
	sha := script.SHA([]byte(body))
	if _, err := nc.Write([]byte(resp("SCRIPT", "LOAD", body))); err != nil {
		tb.Fatal(err)
	}
	n, err := nc.Read(c.buf)
	if err != nil || !bytes.Contains(c.buf[:n], []byte(sha)) {
		tb.Fatalf("SCRIPT LOAD: %q %v", c.buf[:n], err)
	}
	for k := 0; k < keys; k += depth {
		var b bytes.Buffer
		for i := 0; i < depth; i++ {
			b.WriteString(resp(append([]string{"EVALSHA", sha, "1", fmt.Sprintf("key:%012d", k+i)}, args...)...))
		}
		c.batches = append(c.batches, b.Bytes())
	}
	return c
}

func (c *evalClient) roundTrip(tb testing.TB, depth int) {
	batch := c.batches[c.next]
	c.next = (c.next + 1) % len(c.batches)
	if _, err := c.nc.Write(batch); err != nil {
		tb.Fatal(err)
	}
	for lines := 0; lines < c.lines*depth; {
		n, err := c.nc.Read(c.buf)
		if err != nil {
			tb.Fatal(err)
		}
		if bytes.IndexByte(c.buf[:n], '-') == 0 {
			tb.Fatalf("error reply: %q", c.buf[:n])
		}
		lines += bytes.Count(c.buf[:n], []byte{'\n'})
	}
}

// libCalls are library scripts called as the libraries call them, with
// the lines of their replies.
var libCalls = []struct {
	name, library, script string
	args                  []string
	lines                 int
	// allocs is what one native EVALSHA may allocate in the whole process:
	// nothing but, for redis_rate, the bytes of the string SET stores
	// (values never rewrite stored bytes, which replies may share; Redis
	// too allocates a new string).
	allocs float64
}{
	{"redis_rate.allowN", libscripts.RedisRate, "allowN", []string{"1000000", "1000000", "60", "1"}, 7, 1.02},
	{"ulule_limiter.incr", libscripts.Ulule, "incr", []string{"1", "60000"}, 3, 0.02},
}

// BenchmarkConnNativeScript measures EVALSHA of the libraries' scripts
// over a real connection, natively and interpreted, pipelined 1 and 16
// deep over 10,000 keys. -benchmem counts every allocation of the
// process, server and client.
func BenchmarkConnNativeScript(b *testing.B) {
	for _, lc := range libCalls {
		body := libText(b, lc.library, lc.script)
		for _, all := range []bool{false, true} {
			path := "native"
			if all {
				path = "interpreted"
			}
			for _, depth := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/%s/P%d", lc.name, path, depth), func(b *testing.B) {
					_, addr := startServer(b, Config{Limiter: shards.New(0), InterpretAllScripts: all})
					c := newEvalClient(b, addr, body, lc.args, lc.lines, depth, 10000)
					for range c.batches {
						c.roundTrip(b, depth)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i += depth {
						c.roundTrip(b, depth)
					}
				})
			}
		}
	}
}

// TestNativeScriptAllocations counts the allocations of the whole process
// per native EVALSHA in steady state (keys existing): the native path
// allocates nothing, its reply included (lent by the server).
func TestNativeScriptAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it is given")
	}
	for _, lc := range libCalls {
		t.Run(lc.name, func(t *testing.T) {
			_, addr := startServer(t, Config{Limiter: shards.New(0)})
			const depth = 16
			c := newEvalClient(t, addr, libText(t, lc.library, lc.script), lc.args, lc.lines, depth, 4096)
			for i := 0; i < 2*len(c.batches); i++ {
				c.roundTrip(t, depth)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const batches = 1000
			for i := 0; i < batches; i++ {
				c.roundTrip(t, depth)
			}
			runtime.ReadMemStats(&after)
			per := float64(after.Mallocs-before.Mallocs) / (batches * depth)
			t.Logf("%.2f allocations per EVALSHA", per)
			if per > lc.allocs {
				t.Fatalf("%.3f allocations per EVALSHA of %s, want at most %.2f", per, lc.name, lc.allocs)
			}
		})
	}
}

// BenchmarkEvalNative measures a native EVALSHA from parsed arguments to
// reply (evalInto: parse, lookup, transaction, handler, commands), without
// the connection, over 10,000 keys, with RL.CHECK's dispatch beside it for
// reference (runCheck through the same server).
func BenchmarkEvalNative(b *testing.B) {
	for _, lc := range libCalls {
		b.Run(lc.name, func(b *testing.B) {
			s, _ := startServer(b, Config{Limiter: shards.New(0)})
			body := libText(b, lc.library, lc.script)
			sha, bad := s.scripts.Load([]byte(body))
			if bad != nil {
				b.Fatal(bad)
			}
			var cmds [][][]byte
			for k := range 10000 {
				args := [][]byte{[]byte("EVALSHA"), []byte(sha), []byte("1"), []byte(fmt.Sprintf("key:%012d", k))}
				for _, a := range lc.args {
					args = append(args, []byte(a))
				}
				cmds = append(cmds, args)
			}
			now := time.Now().UnixNano()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				er := s.getEvalRun(true)
				r, err := s.evalInto(er, nil, 2, cmds[i%len(cmds)], now)
				if err != nil || r.Kind != values.Array {
					b.Fatalf("%v %v", r, err)
				}
				s.putEvalRun(er)
			}
		})
	}
}

// TestNativeReadOnlyRefusesWrites: EVALSHA_RO of ulule/limiter's incr is
// refused at its INCRBY with the interpreter's error whichever path runs it
// (Exec.CallCommand checks what redis.call checks), and writes nothing.
func TestNativeReadOnlyRefusesWrites(t *testing.T) {
	ctx := context.Background()
	incr := libText(t, libscripts.Ulule, "incr")
	var errs [2]string
	for i, all := range []bool{false, true} {
		_, addr := startServer(t, Config{InterpretAllScripts: all})
		c := newClient(t, addr, 2)
		sha, err := c.ScriptLoad(ctx, incr).Result()
		if err != nil {
			t.Fatal(err)
		}
		err = c.EvalShaRO(ctx, sha, []string{"k"}, 1, 60000).Err()
		if err == nil || !strings.Contains(err.Error(), "Write commands are not allowed from read-only scripts") {
			t.Fatalf("InterpretAllScripts=%v: EVALSHA_RO of incr: %v, want the read-only error", all, err)
		}
		errs[i] = err.Error()
		if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
			t.Fatalf("InterpretAllScripts=%v: EXISTS k after the refused run: %v %v, want 0", all, n, err)
		}
	}
	if errs[0] != errs[1] {
		t.Fatalf("native and interpreted errors differ:\n%s\n%s", errs[0], errs[1])
	}
}
