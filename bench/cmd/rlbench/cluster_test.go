package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/bench/nodes"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/slots"
)

// fakeCluster is a Redis Cluster of n in-process nodes that own slot
// ranges set by the test. A node answers CLUSTER SLOTS with the current
// ranges; RL.CHECK with *1 :0 (which rlbench counts as denied) and
// CL.THROTTLE with *1 :1 (denied too), so a run counts every reply as
// denied only if each reached its own request; a key of a slot it does
// not own with MOVED; and TRYAGAIN while its tryAgain count lasts.
type fakeCluster struct {
	mu     sync.Mutex
	owner  [16384]int // node index
	nodes  []*fakeNode
	wrong  atomic.Int64 // requests that reached a node not owning their slot
	served atomic.Int64
}

type fakeNode struct {
	addr     string
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	tryAgain atomic.Int64
}

func newFakeCluster(t *testing.T, n int) *fakeCluster {
	fc := &fakeCluster{}
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nd := &fakeNode{addr: ln.Addr().String(), ln: ln}
		fc.nodes = append(fc.nodes, nd)
		go func() {
			for {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				nd.mu.Lock()
				nd.conns = append(nd.conns, nc)
				nd.mu.Unlock()
				go fc.serve(i, nc)
			}
		}()
		t.Cleanup(func() { fc.kill(i) })
	}
	for s := range fc.owner {
		fc.owner[s] = s * n / 16384
	}
	return fc
}

// kill closes node i's listener and connections.
func (fc *fakeCluster) kill(i int) {
	nd := fc.nodes[i]
	nd.ln.Close()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, c := range nd.conns {
		c.Close()
	}
}

// give moves the slots [from, to] to node i.
func (fc *fakeCluster) give(from, to, i int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for s := from; s <= to; s++ {
		fc.owner[s] = i
	}
}

func (fc *fakeCluster) slotsReply() string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var ranges []string
	for s := 0; s < 16384; {
		e := s
		for e+1 < 16384 && fc.owner[e+1] == fc.owner[s] {
			e++
		}
		host, port, _ := net.SplitHostPort(fc.nodes[fc.owner[s]].addr)
		ranges = append(ranges, fmt.Sprintf("*3\r\n:%d\r\n:%d\r\n*3\r\n$%d\r\n%s\r\n:%s\r\n$2\r\nid\r\n", s, e, len(host), host, port))
		s = e + 1
	}
	return fmt.Sprintf("*%d\r\n%s", len(ranges), strings.Join(ranges, ""))
}

func (fc *fakeCluster) serve(me int, nc net.Conn) {
	defer nc.Close()
	rd := bufio.NewReader(nc)
	w := bufio.NewWriter(nc)
	for {
		args, err := readCommand(rd)
		if err != nil {
			return
		}
		var reply string
		switch name := strings.ToUpper(args[0]); {
		case name == "CLUSTER":
			reply = fc.slotsReply()
		case fc.nodes[me].tryAgain.Add(-1) >= 0:
			reply = "-TRYAGAIN the slot's group is electing a leader\r\n"
		default:
			slot := slots.Of([]byte(args[1]))
			fc.mu.Lock()
			owner := fc.owner[slot]
			fc.mu.Unlock()
			switch {
			case owner != me:
				fc.wrong.Add(1)
				reply = fmt.Sprintf("-MOVED %d %s\r\n", slot, fc.nodes[owner].addr)
			case name == "CL.THROTTLE":
				fc.served.Add(1)
				reply = "*1\r\n:1\r\n"
			default:
				fc.served.Add(1)
				reply = "*1\r\n:0\r\n"
			}
		}
		w.WriteString(reply)
		if rd.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || line[0] != '*' {
		return nil, fmt.Errorf("bad request %q", line)
	}
	args := make([]string, n)
	for i := range args {
		hdr, err := rd.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, _ := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		b := make([]byte, size+2)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

func mixedTemplates(t *testing.T) []*load.Template {
	a, err := load.ParseTemplate("RL.CHECK a:" + load.RandInt + " token 100 60")
	if err != nil {
		t.Fatal(err)
	}
	b, err := load.ParseTemplate("CL.THROTTLE b:" + load.RandInt + " 99 100 60 1")
	if err != nil {
		t.Fatal(err)
	}
	return []*load.Template{a, b}
}

// TestClusterRouting: a steady map. Every request reaches the node that
// owns its slot (no MOVED), and every reply is counted against its own
// request's template (all denied) although a batch is split three ways.
func TestClusterRouting(t *testing.T) {
	fc := newFakeCluster(t, 3)
	res, err := load.Run(context.Background(), load.Config{Addr: fc.nodes[1].addr, Conns: 4, Pipeline: 16,
		Requests: 20000, Keys: 5000, Templates: mixedTemplates(t), Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 20000 || res.Errors != 0 || res.Denied != res.Requests {
		t.Fatalf("requests %d errors %d denied %d (first error %q): a reply was matched to another request",
			res.Requests, res.Errors, res.Denied, res.FirstError)
	}
	if c := res.Cluster; c == nil || len(c.Nodes) != 3 || c.Redirects != 0 || fc.wrong.Load() != 0 {
		t.Fatalf("cluster %+v, %d requests at the wrong node", res.Cluster, fc.wrong.Load())
	}
	if fc.served.Load() != 20000 {
		t.Fatalf("the nodes served %d requests, want 20000", fc.served.Load())
	}
}

// TestClusterRoutingFollowsChanges: during the run a range of slots
// moves (MOVED, counted as redirects), a node answers TRYAGAIN for a
// while, and another dies, its slots going to a survivor 30 ms later
// (connection errors meanwhile). Every request is answered, none with an
// error.
func TestClusterRoutingFollowsChanges(t *testing.T) {
	fc := newFakeCluster(t, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(50 * time.Millisecond)
		fc.give(0, 3000, 1) // from node 0
		time.Sleep(50 * time.Millisecond)
		fc.nodes[1].tryAgain.Store(20)
		time.Sleep(50 * time.Millisecond)
		fc.kill(2)
		time.Sleep(30 * time.Millisecond)
		fc.give(10923, 16383, 0) // node 2's slots
	}()
	res, err := load.Run(context.Background(), load.Config{Addr: fc.nodes[0].addr, Conns: 4, Pipeline: 8,
		Duration: 400 * time.Millisecond, Templates: mixedTemplates(t), Keys: 5000, Cluster: true})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cluster
	if res.Errors != 0 || res.Denied != res.Requests || c.Redirects == 0 || c.TryAgain != 20 || c.ConnErrors == 0 {
		t.Fatalf("requests %d errors %d (%q) denied %d, cluster %+v", res.Requests, res.Errors, res.FirstError, res.Denied, c)
	}
	// Requests in flight on the node that died were served, perhaps, and
	// sent again: 4 connections × 8 at most.
	if n := fc.served.Load(); int64(res.Total) > n || n-int64(res.Total) > 32 {
		t.Fatalf("%d replies counted, the nodes served %d", res.Total, n)
	}
	t.Logf("%d requests; %d redirects, %d TRYAGAIN, %d connection errors, %d slot map loads",
		res.Total, c.Redirects, c.TryAgain, c.ConnErrors, c.Refreshes)
}

// TestClusterRealNodes runs rlbench -cluster against three rlserver
// processes: no error, no redirect, every node used.
func TestClusterRealNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three rlserver processes")
	}
	dir := t.TempDir()
	server := filepath.Join(dir, "rlserver")
	if out, err := exec.Command("go", "build", "-o", server, "../../../cmd/rlserver").CombinedOutput(); err != nil {
		t.Fatalf("go build rlserver: %v\n%s", err, out)
	}
	// Three nodes on free ports (a node is started again on others should
	// another process take one), each waited for by PING; their output goes
	// to the test's stderr, as before.
	ns, err := nodes.Start(nodes.Spec{Bin: server, Dir: dir, Nodes: 3, Cluster: true, Log: os.Stderr, Flags: []string{"--groups", "4"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range ns {
		defer nd.Kill()
	}
	waitBalanced(t, ns[0].HTTP, 30*time.Second)
	out, err := exec.Command("go", "run", ".", "-cluster", "-addr", ns[2].RESP, "-c", "4", "-P", "16", "-r", "10000",
		"-d", "500ms", "-warmup", "100ms", "-json", "-").Output()
	if err != nil {
		t.Fatalf("rlbench -cluster: %v\n%s", err, out)
	}
	var res load.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("rlbench -json: %v\n%s", err, out)
	}
	if res.Requests == 0 || res.Errors != 0 || res.Cluster == nil || len(res.Cluster.Nodes) != 3 || res.Cluster.Redirects != 0 {
		t.Fatalf("%d requests, %d errors (first: %s), cluster %+v", res.Requests, res.Errors, res.FirstError, res.Cluster)
	}
}

// waitBalanced polls GET /cluster until every group has one ready
// replica, its first voter.
func waitBalanced(t *testing.T, http_ string, d time.Duration) {
	t.Helper()
	testutil.WaitForErr(t, d, "the cluster to balance", func() error {
		var r struct {
			OK     bool `json:"ok"`
			Groups []struct {
				Voters   []string `json:"voters"`
				Replicas []struct {
					Node  string `json:"node"`
					Ready bool   `json:"ready"`
				} `json:"replicas"`
			} `json:"groups"`
		}
		resp, err := http.Get("http://" + http_ + "/cluster")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
		}
		ok := err == nil && r.OK && len(r.Groups) > 0
		for _, g := range r.Groups {
			ready := 0
			for _, rep := range g.Replicas {
				if rep.Ready {
					ready++
					ok = ok && rep.Node == g.Voters[0]
				}
			}
			ok = ok && ready == 1
		}
		if !ok {
			return fmt.Errorf("%+v %v", r, err)
		}
		return nil
	})
}
