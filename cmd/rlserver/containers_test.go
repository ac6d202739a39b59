package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testutil"
)

// TestContainerRestarts: three nodes in containers of our image, set up
// as docker-compose.yml sets them up (each announces 127.0.0.1 and
// publishes its RESP and HTTP ports on the same numbers, so a client on
// this machine uses the addresses the nodes hand out), in strong mode,
// under a steady load from go-redis's ClusterClient with default options.
// Each node in turn is stopped — `docker kill` (SIGKILL) and `docker stop`
// (SIGTERM) alternating — and started again with `docker start`, as
// `docker-compose start` does, twice (a kill and a stop; eight times in
// TestLongContainerRestarts, which make test-long runs). Every start must come up and
// serve (four of eleven such restarts crashed before: a peer's status
// call reached a group whose raft was not open yet), `docker stop` must
// end in exit code 0, no log may hold a panic, a SIGTERM must show the
// client no error, and no acknowledged admission may be lost.
func TestContainerRestarts(t *testing.T) {
	alone(t)
	testContainerRestarts(t, 2)
}

// TestLongContainerRestarts is TestContainerRestarts with eight restarts:
// make test-long runs it.
func TestLongContainerRestarts(t *testing.T) {
	testutil.LongOnly(t)
	testContainerRestarts(t, 8)
}

// testContainerRestarts stops or kills a node and starts it again, cycles
// times, each node in turn.
func testContainerRestarts(t *testing.T, cycles int) {
	testutil.RequireDocker(t)
	env := newPartEnv(t)
	nodes := startComposeNodes(t, env, 3, "--consistency", "strong")
	var addrs []string
	for _, nd := range nodes {
		addrs = append(addrs, nd.hostRESP)
	}
	waitPartBalanced(t, nodes[0], 60*time.Second)
	load := startGoLoad(t, "ctr", addrs, churnWorkers, 120, 2*time.Millisecond)
	ph := &phases{}
	kills := 0
	var kinds []string
	done := map[string]restart{} // by phase, for its errors' report
	for cycle := 0; cycle < cycles; cycle++ {
		nd := nodes[cycle%len(nodes)]
		kind := "stop"
		if cycle%2 == 0 {
			kind, kills = "kill", kills+1
		}
		phase := fmt.Sprintf("docker %s %s (%d)", kind, nd.name, cycle+1)
		ph.begin(phase)
		began := time.Now()
		kinds = append(kinds, kind)
		mustDocker(t, kind, nd.container)
		stopped := time.Since(began)
		code := mustDocker(t, "wait", nd.container)
		if kind == "stop" && code != "0" {
			t.Fatalf("%s exited %s after docker stop (SIGTERM), want 0\n%s", nd.name, code, containerLogs(nd))
		}
		exited := time.Since(began)
		mustDocker(t, "start", nd.container)
		started := time.Since(began)
		testutil.WaitFor(t, 30*time.Second, nd.name+" serving again after docker "+kind, func() bool {
			r, err := partReport(nd, "")
			return err == nil && r.Serving && len(r.Errors) == 0
		})
		done[phase] = restart{nd, [2]time.Time{began, time.Now()}, fmt.Sprintf("docker %s returned %v into it, wait %v, start %v, serving %v",
			kind, stopped.Round(time.Millisecond), exited.Round(time.Millisecond), started.Round(time.Millisecond),
			time.Since(began).Round(time.Millisecond))}
		// A kill's errors (EOF from docker's proxy on the pooled
		// connections, TRYAGAIN in the election) must end, and the checks
		// sent during it come back, before the next phase begins, or a stop
		// would be blamed for them (errors are counted in the phase their
		// check was sent in, too).
		if kind == "kill" && !load.quiet(700*time.Millisecond, 20*time.Second) {
			t.Errorf("the clients still saw errors, or waited on checks, 20 s after docker kill %s and its restart", nd.name)
		}
	}
	time.Sleep(time.Second)
	res := load.stop()
	for _, nd := range nodes {
		if logs := containerLogs(nd); strings.Contains(logs, "panic:") {
			t.Fatalf("%s panicked:\n%s", nd.name, logs)
		}
	}
	if dump := os.Getenv("RLSERVER_TEST_DUMP"); dump != "" {
		for _, nd := range nodes {
			os.WriteFile(filepath.Join(dump, nd.name+".log"), []byte(containerLogs(nd)), 0o644)
		}
		var b strings.Builder
		for _, e := range res.errs {
			fmt.Fprintf(&b, "%s %s (sent during %s): %s\n", e.at.Format("15:04:05.000"), ph.of(e.at), ph.of(e.sent()), e.err)
		}
		os.WriteFile(filepath.Join(dump, "errors.txt"), []byte(b.String()), 0o644)
	}
	stopErrs := 0
	logged := map[string]bool{}
	for _, e := range res.errs {
		if name, into := ph.into(e.at); strings.HasPrefix(name, "docker stop") && !sentDuringKill(ph, e) {
			r := done[name]
			if stopErrs++; stopErrs <= 5 {
				t.Errorf("an error %v into %s, of a check sent %v before (%s): %s", into.Round(time.Millisecond), name,
					e.at.Sub(e.sent()).Round(time.Millisecond), r.steps, e.describe(e.at.Add(-into)))
			}
			if !logged[name] && r.node != nil {
				logged[name] = true
				t.Logf("%s's log during %s:\n%s", r.node.name, name, logBetween(containerLogs(r.node), r.span))
			}
		}
	}
	acked, extra := assertNothingLost(t, addrs, res, kills, churnWorkers)
	t.Logf("%d restarts in containers (%d docker kill, %d docker stop): %d checks, %d admissions acknowledged and counted "+
		"(%d more charged); errors: %d after a kill, %d after a stop", len(kinds), kills, len(kinds)-kills, res.checks, acked,
		extra, len(res.errs)-stopErrs, stopErrs)
}

// restart is what one phase of testContainerRestarts did: the node it
// stopped or killed, from when to when it served again, and its steps'
// times.
type restart struct {
	node  *partNode
	span  [2]time.Time
	steps string
}

// sentDuringKill reports whether e's check was sent during a docker kill:
// such a check may retry for seconds (EOF from docker's proxy, a HELLO
// held while the container starts, then MOVED) and end with an error in
// the next phase, and it is the kill's.
func sentDuringKill(ph *phases, e loadError) bool {
	return strings.HasPrefix(ph.of(e.sent()), "docker kill")
}

// logBetween returns the lines of a node's log whose time= lies within
// span (and a second after it), at most 80 of them.
func logBetween(logs string, span [2]time.Time) string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		ts, _, ok := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil || at.Before(span[0]) || at.After(span[1].Add(time.Second)) {
			continue
		}
		if out = append(out, line); len(out) == 80 {
			break
		}
	}
	return strings.Join(out, "\n")
}

// startComposeNodes starts n containers as docker-compose.yml does: node
// i listens on 0.0.0.0:P and 0.0.0.0:H, publishes them on the same ports
// of 127.0.0.1 and announces 127.0.0.1; the nodes reach each other as
// nX:7379 on the cluster network. Its data is in a volume of its own, so
// that it survives a docker stop or kill.
func startComposeNodes(t *testing.T, e *partEnv, n int, extra ...string) []*partNode {
	var peers []string
	for i := 1; i <= n; i++ {
		peers = append(peers, fmt.Sprintf("n%d=n%d:7379", i, i))
	}
	t.Cleanup(e.removeContainers)
	for i := 1; i <= n; i++ {
		nd := &partNode{name: fmt.Sprint("n", i), container: fmt.Sprintf("%s-n%d", e.prefix, i),
			hostRESP: testutil.FreeAddr(t), hostHTTP: testutil.FreeAddr(t)}
		nd.resp = nd.hostRESP
		e.nodes = append(e.nodes, nd)
		_, rport, _ := strings.Cut(nd.hostRESP, ":")
		_, hport, _ := strings.Cut(nd.hostHTTP, ":")
		args := []string{"create", "--name", nd.container, "--label", "rlserver-test=" + e.prefix,
			"--network", e.clients, "-p", nd.hostRESP + ":" + rport, "-p", nd.hostHTTP + ":" + hport, "-v", "/data",
			"-e", "RLSERVER_NODE_ID=" + nd.name, "-e", "RLSERVER_PEERS=" + strings.Join(peers, ","),
			"-e", "RLSERVER_RAFT_ADDR=0.0.0.0:7379", "-e", "RLSERVER_RAFT_ADVERTISE=" + nd.name + ":7379",
			"-e", "RLSERVER_LISTEN=0.0.0.0:" + rport, "-e", "RLSERVER_HTTP=0.0.0.0:" + hport,
			"-e", "RLSERVER_ANNOUNCE=127.0.0.1", e.image}
		mustDocker(t, append(args, extra...)...)
		mustDocker(t, "network", "connect", "--alias", nd.name, e.cluster, nd.container)
		mustDocker(t, "start", nd.container)
		nd.client = redis.NewClient(&redis.Options{Addr: nd.hostRESP})
		t.Cleanup(func() { nd.client.Close() })
	}
	return e.nodes
}

// containerLogs returns a container's log.
func containerLogs(nd *partNode) string {
	out, _ := exec.Command("docker", "logs", nd.container).CombinedOutput()
	return string(out)
}
