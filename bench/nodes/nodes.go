// Package nodes starts rlserver processes for the benchmark tools — a
// standalone node or the nodes of one cluster — on free local ports, and
// reads what they report: GET /cluster, and their CPU time from /proc.
// It runs the binary it is given, through internal/rlproc (the harness
// cmd/rlserver's tests use too), and imports nothing else of rlserver's.
package nodes

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlserver/rlserver/internal/rlproc"
)

// Node is one rlserver process.
type Node struct {
	Name  string // n1, n2, ... (the --node-id of a cluster node)
	RESP  string // --listen
	HTTP  string // --http
	Raft  string // --raft-addr ("" for a standalone node)
	Pprof string // --pprof
	Dir   string // --data-dir
	p     *rlproc.Proc
}

// Spec says what to start.
type Spec struct {
	Bin   string    // the rlserver binary
	Dir   string    // data directories are made under it, one per node
	Nodes int       // 1 without Cluster
	Log   io.Writer // the processes' stdout and stderr
	// Cluster starts Nodes nodes with --node-id, --peers and --raft-addr;
	// otherwise one standalone node.
	Cluster bool
	Flags   []string // given to every node
}

// Start starts the nodes of s and waits until each answers PING. Their
// ports are picked free; should another process take a node's RESP,
// HTTP or pprof port before it binds it, the node is started again on
// others (rlproc.OnFreeAddrs). A failed start's error ends with that
// node's log.
func Start(s Spec) ([]*Node, error) {
	n := s.Nodes
	if !s.Cluster || n < 1 {
		n = 1
	}
	bin, err := filepath.Abs(s.Bin)
	if err != nil {
		return nil, err
	}
	ns := make([]*Node, n)
	var peers []string
	for i := range ns {
		nd := &Node{Name: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(s.Dir, fmt.Sprintf("n%d", i+1))}
		if s.Cluster {
			p, err := rlproc.FreePort()
			if err != nil {
				return nil, err
			}
			nd.Raft = "127.0.0.1:" + strconv.Itoa(p)
			peers = append(peers, nd.Name+"="+nd.Raft)
		}
		ns[i] = nd
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range ns {
		wg.Go(func() { errs[i] = nd.start(bin, s, peers) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		StopAll(ns)
		return nil, err
	}
	return ns, nil
}

// start starts nd on free ports and waits up to 20 s for PING.
func (nd *Node) start(bin string, s Spec, peers []string) error {
	_, err := rlproc.OnFreeAddrs(3, func(addrs []string) (*rlproc.Proc, error) {
		nd.RESP, nd.HTTP, nd.Pprof = addrs[0], addrs[1], addrs[2]
		args := []string{"--listen", nd.RESP, "--http", nd.HTTP, "--pprof", nd.Pprof, "--data-dir", nd.Dir, "--log-level", "warn"}
		if s.Cluster {
			args = append(args, "--node-id", nd.Name, "--raft-addr", nd.Raft, "--peers", strings.Join(peers, ","))
		}
		p, err := rlproc.Start(nd.Name, bin, append(args, s.Flags...), s.Log)
		if err != nil {
			return nil, err
		}
		nd.p = p
		return p, p.WaitPing(nd.RESP, 20*time.Second, func() error { return rlproc.Ping(nd.RESP) })
	})
	return err
}

// Pid returns the process id.
func (nd *Node) Pid() int { return nd.p.Pid() }

// Alive reports whether the process has not exited.
func (nd *Node) Alive() bool { return nd.p.Alive() }

// Stop sends SIGTERM and waits up to 15 s for the process to exit; it
// returns an error unless it exited with status 0 (it is killed if it
// did not exit). Of a node that had exited already, it returns how.
func (nd *Node) Stop() error { return nd.p.Stop(15 * time.Second) }

// Kill sends SIGKILL and waits for the process to be gone.
func (nd *Node) Kill() { nd.p.Kill() }

// StopAll stops every node still running and returns the first error.
func StopAll(ns []*Node) error {
	var first error
	for _, nd := range ns {
		if nd == nil || nd.p == nil {
			continue
		}
		if err := nd.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CPU returns the CPU time (user + system) the process has used.
func (nd *Node) CPU() time.Duration { return nd.p.CPU() }

// CPUs returns the CPU time of each node.
func CPUs(ns []*Node) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, nd := range ns {
		out[i] = nd.CPU()
	}
	return out
}

// errNotBalanced is returned by WaitBalanced at its deadline.
var errNotBalanced = errors.New("nodes: the cluster did not balance")
