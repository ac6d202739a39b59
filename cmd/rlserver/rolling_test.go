package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/logbuf"
	"github.com/rlserver/rlserver/internal/redistest"
)

// portBase returns a port p such that p+1, p+2 and p+3 are free on
// 127.0.0.1 (scripts/cluster.sh gives node i the port BASE+i).
func portBase(t *testing.T) int {
	t.Helper()
	for range 100 {
		p, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		for i := 1; i <= 3 && ok; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
			if ok = err == nil; ok {
				l.Close()
			}
		}
		if ok {
			return p
		}
	}
	t.Fatal("no three free ports in a row")
	return 0
}

// TestRollingRestartScript runs what the README shows: scripts/cluster.sh
// (make cluster) starts three nodes, and scripts/rolling-restart.sh (make
// rolling-restart) stops each with SIGTERM and starts it again with
// --data-dir alone, waiting for the leaders to come back (the admin token,
// which GET /cluster asks for, comes from RLSERVER_ADMIN_TOKEN), while go-redis's
// ClusterClient and redis-py's RedisCluster, both with default options,
// check at a steady rate: no error, every admission counted once. Then
// Ctrl-C (SIGINT) on cluster.sh stops every node, the restarted ones too.
func TestRollingRestartScript(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	resp, httpBase, raft := portBase(t), portBase(t), portBase(t)
	const token = "rolling-t0ken" // secrets come from the environment, which restarted nodes inherit
	env := append(os.Environ(), "RLSERVER="+bin, "CLUSTER_DIR="+dir, "RESP_BASE="+strconv.Itoa(resp),
		"HTTP_BASE="+strconv.Itoa(httpBase), "RAFT_BASE="+strconv.Itoa(raft), "CLUSTERFLAGS=--groups 8",
		"RLSERVER_ADMIN_TOKEN="+token)
	cl := exec.Command("../../scripts/cluster.sh")
	cl.Env = env
	cl.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as a terminal runs it: Ctrl-C reaches the group
	logs := &logbuf.Buffer{}
	cl.Stdout, cl.Stderr = logs, logs
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cl.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cl.Process.Pid, syscall.SIGKILL)
		for i := 1; i <= 3; i++ {
			if b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("n%d.pid", i))); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
	var nodes []*proc
	var addrs []string
	for i := 1; i <= 3; i++ {
		p := &proc{t: t, resp: fmt.Sprintf("127.0.0.1:%d", resp+i), http: fmt.Sprintf("127.0.0.1:%d", httpBase+i), token: token}
		nodes, addrs = append(nodes, p), append(addrs, p.resp)
	}
	waitBalanced(t, nodes, 30*time.Second)
	ph := &phases{}
	ph.begin("running")
	goL := startGoLoad(t, "go", addrs, 8, 240, 2*time.Millisecond)
	pyL := startPyLoad(t, "py", addrs, 60, 300)
	time.Sleep(time.Second)
	ph.begin("make rolling-restart")
	rr := exec.Command("../../scripts/rolling-restart.sh")
	rr.Env = env
	if out, err := rr.CombinedOutput(); err != nil {
		t.Fatalf("rolling-restart.sh: %v\n%s\ncluster.sh:\n%s", err, out, logs)
	}
	ph.begin("after")
	time.Sleep(time.Second)
	results := []loadResult{goL.stop(), pyL.stop()}
	lost := leadsLost(t, filepath.Join(dir, "n1.log"), filepath.Join(dir, "n2.log"), filepath.Join(dir, "n3.log"))
	assertNoErrorsAndCounted(t, addrs, ph, lost, results...)

	syscall.Kill(-cl.Process.Pid, syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("cluster.sh did not stop within 30 s of Ctrl-C\n%s", logs)
	}
	for i := 1; i <= 3; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("n%d.pid", i)))
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			t.Errorf("n%d (pid %d) still runs after Ctrl-C on cluster.sh", i, pid)
		}
	}
	if strings.Contains(logs.String(), "panic:") {
		t.Fatalf("a node panicked:\n%s", logs)
	}
}
