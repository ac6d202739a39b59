package main

import (
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gomaxprocsOf reads p's GOMAXPROCS from its /metrics (an HTTP request,
// which does not wake a resting node as a RESP request does).
func gomaxprocsOf(t *testing.T, p *proc) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\d+)$`).FindStringSubmatch(httpGet(t, "http://"+p.http+"/metrics"))
	if m == nil {
		t.Fatal("no go_sched_gomaxprocs_threads in /metrics")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// waitGomaxprocs waits up to 30 s for p's GOMAXPROCS to satisfy ok. It
// reads /metrics every 100 ms, not at testutil.WaitFor's pace (up to 20 a
// second): each read costs the node CPU, and a node kept above a quarter of
// a core (rest.Busy) by its reader would not rest.
func waitGomaxprocs(t *testing.T, p *proc, what string, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n := gomaxprocsOf(t, p); !ok(n); n = gomaxprocsOf(t, p) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: GOMAXPROCS still %d after 30 s", what, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIdleNodeRestsOnOneCore: a node left alone for --rest-after runs Go
// code on one core (GOMAXPROCS 1), a RESP request gives it every core back
// at once (a PING costs too little CPU for the governor's ticks to notice:
// only the request's own wake can), and it rests again when left alone;
// an HTTP check wakes it the same way (reading /metrics does not). A
// node started with --procs keeps what the operator chose. INFO reports the
// setting in its server section.
func TestIdleNodeRestsOnOneCore(t *testing.T) {
	parallel(t)
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: a node runs on one core anyway")
	}
	bin := buildBinary(t)
	p := startProc(t, bin, t.TempDir(), "--rest-after", "1s", "--grpc", "")
	fixed := startProc(t, bin, t.TempDir(), "--rest-after", "1s", "--procs", "2", "--grpc", "")
	waitGomaxprocs(t, p, "left alone", func(n int) bool { return n == 1 })
	if n := gomaxprocsOf(t, fixed); n != 2 {
		t.Fatalf("the node started with --procs 2 runs on %d cores", n)
	}
	if got := p.do("PING"); got != "PONG" {
		t.Fatalf("PING: %v", got)
	}
	waitGomaxprocs(t, p, "after a PING", func(n int) bool { return n >= 2 })
	waitGomaxprocs(t, p, "left alone again", func(n int) bool { return n == 1 })
	if body, code := httpDo(t, "POST", "http://"+p.http+"/v1/check", `{"key":"rest","algo":"token","limit":10,"window":"1m"}`); code != 200 {
		t.Fatalf("POST /v1/check: %d %s", code, body)
	}
	waitGomaxprocs(t, p, "after an HTTP check", func(n int) bool { return n >= 2 })
	waitGomaxprocs(t, p, "left alone a third time", func(n int) bool { return n == 1 })
	info, _ := p.do("INFO", "server").(string)
	if !regexp.MustCompile(`\r\ngomaxprocs:\d+\r\n`).MatchString(info) {
		t.Fatalf("INFO server has no gomaxprocs field:\n%s", info)
	}
	if strings.Count(p.logs.String(), "panic") > 0 {
		t.Fatalf("the node's log has a panic:\n%s", p.logs.String())
	}
	if n := gomaxprocsOf(t, fixed); n != 2 {
		t.Fatalf("the node started with --procs 2 runs on %d cores at the end of the test", n)
	}
}
