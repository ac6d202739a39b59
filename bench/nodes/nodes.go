// Package nodes starts rlserver processes for the benchmark tools — a
// standalone node or the nodes of one cluster — on free local ports, and
// reads what they report: GET /cluster, and their CPU time from /proc.
// It runs the binary it is given and imports nothing of rlserver's.
package nodes

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/bench/load"
)

// Node is one rlserver process.
type Node struct {
	Name  string // n1, n2, ... (the --node-id of a cluster node)
	RESP  string // --listen
	HTTP  string // --http
	Raft  string // --raft-addr ("" for a standalone node)
	Pprof string // --pprof
	Dir   string // --data-dir
	cmd   *exec.Cmd
	done  chan struct{}
	err   error // of Wait, once done is closed
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

// Start starts the nodes of s and waits until each answers PING.
func Start(s Spec) ([]*Node, error) {
	n := s.Nodes
	if !s.Cluster || n < 1 {
		n = 1
	}
	ns := make([]*Node, n)
	var peers []string
	for i := range ns {
		nd := &Node{Name: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(s.Dir, fmt.Sprintf("n%d", i+1))}
		addrs := []*string{&nd.RESP, &nd.HTTP, &nd.Pprof}
		if s.Cluster {
			addrs = append(addrs, &nd.Raft)
		}
		for _, a := range addrs {
			p, err := FreePort()
			if err != nil {
				return nil, err
			}
			*a = "127.0.0.1:" + strconv.Itoa(p)
		}
		if s.Cluster {
			peers = append(peers, nd.Name+"="+nd.Raft)
		}
		ns[i] = nd
	}
	for _, nd := range ns {
		args := []string{"--listen", nd.RESP, "--http", nd.HTTP, "--pprof", nd.Pprof, "--data-dir", nd.Dir, "--log-level", "warn"}
		if s.Cluster {
			args = append(args, "--node-id", nd.Name, "--raft-addr", nd.Raft, "--peers", strings.Join(peers, ","))
		}
		if err := nd.start(s.Bin, s.Log, append(args, s.Flags...)); err != nil {
			StopAll(ns)
			return nil, err
		}
	}
	for _, nd := range ns {
		if err := nd.waitPing(20 * time.Second); err != nil {
			StopAll(ns)
			return nil, err
		}
	}
	return ns, nil
}

func (nd *Node) start(bin string, logw io.Writer, args []string) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	nd.cmd = exec.Command(abs, args...)
	nd.cmd.Stdout, nd.cmd.Stderr = logw, logw
	if err := nd.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	nd.done = make(chan struct{})
	go func() { nd.err = nd.cmd.Wait(); close(nd.done) }()
	return nil
}

func (nd *Node) waitPing(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if c, err := load.Dial(nd.RESP, 100*time.Millisecond); err == nil {
			_, err = c.Do("PING")
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-nd.done:
			return fmt.Errorf("%s exited at start: %v", nd.Name, nd.err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer PING on %s within %v", nd.Name, nd.RESP, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pid returns the process id.
func (nd *Node) Pid() int { return nd.cmd.Process.Pid }

// Alive reports whether the process has not exited.
func (nd *Node) Alive() bool {
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits up to 15 s for the process to exit; it
// returns an error unless it exited with status 0 (it is then killed).
func (nd *Node) Stop() error {
	if !nd.Alive() {
		return nd.exitErr()
	}
	nd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nd.done:
		return nd.exitErr()
	case <-time.After(15 * time.Second):
		nd.cmd.Process.Kill()
		<-nd.done
		return fmt.Errorf("%s did not exit within 15 s of SIGTERM", nd.Name)
	}
}

func (nd *Node) exitErr() error {
	if nd.err != nil {
		return fmt.Errorf("%s: %w", nd.Name, nd.err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (nd *Node) Kill() {
	nd.cmd.Process.Kill()
	<-nd.done
}

// StopAll stops every node still running and returns the first error.
func StopAll(ns []*Node) error {
	var first error
	for _, nd := range ns {
		if nd == nil || nd.cmd == nil {
			continue
		}
		if err := nd.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CPU returns the CPU time (user + system) the process has used.
func (nd *Node) CPU() time.Duration { return CPUOf(nd.Pid()) }

// CPUOf returns the CPU time (user + system) of process pid, from
// /proc/<pid>/stat (0 if it cannot be read).
func CPUOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// CPUs returns the CPU time of each node.
func CPUs(ns []*Node) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, nd := range ns {
		out[i] = nd.CPU()
	}
	return out
}

// FreePort returns a TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// errNotBalanced is returned by WaitBalanced at its deadline.
var errNotBalanced = errors.New("nodes: the cluster did not balance")
