// Package rlproc starts real rlserver processes and watches them: the one
// harness under cmd/rlserver's tests (their proc) and the benchmarks'
// bench/nodes. It starts a binary with its arguments and keeps its output
// (Start, Proc.Log), waits until it answers PING while noticing an exit
// (Proc.WaitPing), starts it again on other ports when another process
// took one of those it was given (OnFreeAddrs), stops it with SIGTERM and
// reports how it exited (Proc.Stop), kills it (Proc.Kill), tells whether a
// SIGSTOP has stopped it (Proc.Stopped), and reads its CPU time (CPUOf)
// and its threads' context switches (SwitchesOf).
// FreePort picks the ports of every server a test or a benchmark starts.
// It imports neither testing nor anything of the commands: a test wraps it
// in its testing.TB, a benchmark binary uses it as it is.
package rlproc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/internal/logbuf"
)

// Proc is one process started by Start.
type Proc struct {
	name string
	cmd  *exec.Cmd
	log  *logbuf.Buffer
	done chan struct{} // closed once the process has exited
	err  error         // of Wait, once done is closed
}

// Start starts bin with args; name names it in the errors of its methods
// ("rlserver", "n2"). Its stdout and stderr go to its Log and, if out is
// not nil, to out as well (a benchmark's log file).
func Start(name, bin string, args []string, out io.Writer) (*Proc, error) {
	p := &Proc{name: name, log: &logbuf.Buffer{}, done: make(chan struct{})}
	var w io.Writer = p.log
	if out != nil {
		w = io.MultiWriter(p.log, out)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = w, w
	// Once the process has exited, its output is copied for a second at
	// most: a child it left behind holding the pipe does not keep Exited
	// open.
	p.cmd.WaitDelay = time.Second
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// Log returns what the process has written to stdout and stderr so far,
// and goes on collecting it.
func (p *Proc) Log() *logbuf.Buffer { return p.log }

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited returns a channel that is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Alive reports whether the process has not exited.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Err returns how the process exited (os/exec's error of Wait: nil for
// status 0); nil while it runs.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// ErrExited is the error WaitPing wraps when the process exited before it
// answered.
var ErrExited = errors.New("exited at start")

// WaitPing calls ping (a PING to the process's RESP address: Ping, or a
// client the caller keeps) every 10 ms until it succeeds. It returns an
// error, followed by the process's log, if the process exits first or
// does not answer within d; the process then runs on, if it does.
func (p *Proc) WaitPing(addr string, d time.Duration, ping func() error) error {
	deadline := time.Now().Add(d)
	for ping() != nil {
		select {
		case <-p.done:
			return fmt.Errorf("%s %w: %v\n%s", p.name, ErrExited, p.err, p.log)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer PING on %s within %v\n%s", p.name, addr, d, p.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Stop sends SIGTERM and waits up to d for the process to exit. It
// returns nil if it exited with status 0, else an error naming how it
// exited, or that it did not within d (it is then killed). Of a process
// that had exited already, Stop returns how it exited, nil for status 0.
func (p *Proc) Stop(d time.Duration) error {
	if !p.Alive() {
		if p.err != nil {
			return fmt.Errorf("%s exited: %w", p.name, p.err)
		}
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: exit after SIGTERM: %w", p.name, p.err)
		}
		return nil
	case <-time.After(d):
		p.Kill()
		return fmt.Errorf("%s: no exit within %v of SIGTERM (killed)", p.name, d)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// CPU returns the CPU time (user + system) the process has used (see
// CPUOf).
func (p *Proc) CPU() time.Duration { return CPUOf(p.Pid()) }

// CPUSplit returns the CPU time the process has used in user mode and in
// the kernel (see CPUSplitOf).
func (p *Proc) CPUSplit() (user, system time.Duration) { return CPUSplitOf(p.Pid()) }

// Stopped reports whether every thread of the process is stopped (state T
// in /proc/<pid>/task/*/stat), as a SIGSTOP leaves it once the kernel has
// stopped them all: until then a thread may still answer a request.
func (p *Proc) Stopped() bool {
	tasks := taskDirs(p.Pid())
	if len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		if f := statFields(task + "/stat"); len(f) == 0 || f[0] != "T" {
			return false
		}
	}
	return true
}

// taskDirs returns the /proc directories of process pid's threads
// (/proc/<pid>/task/<tid>), or nil if they cannot be listed.
func taskDirs(pid int) []string {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, len(tasks))
	for i, task := range tasks {
		out[i] = dir + "/" + task.Name()
	}
	return out
}

// Attempts is how many times OnFreeAddrs tries.
const Attempts = 3

// OnFreeAddrs calls start with n addresses 127.0.0.1:port on free ports
// (FreePort), for the process start starts (and waits for) on them. A
// free port may be taken by another process before the new one binds it;
// when start fails with a process whose log says so ("listen on <one of
// them>: ... address already in use"), that process is killed and start
// is called again with n fresh addresses, Attempts times in all. Any other
// failure is returned as it is. start returns the process it started
// (nil if it started none) with its error.
func OnFreeAddrs(n int, start func(addrs []string) (*Proc, error)) (*Proc, error) {
	for attempt := 1; ; attempt++ {
		addrs := make([]string, n)
		for i := range addrs {
			port, err := FreePort()
			if err != nil {
				return nil, err
			}
			addrs[i] = "127.0.0.1:" + strconv.Itoa(port)
		}
		p, err := start(addrs)
		if err == nil || p == nil || attempt == Attempts || !p.tookPort(addrs) {
			return p, err
		}
		p.Kill()
	}
}

// tookPort reports whether p's log says another process had one of addrs.
func (p *Proc) tookPort(addrs []string) bool {
	log := p.log.String()
	if !strings.Contains(log, "address already in use") {
		return false
	}
	for _, a := range addrs {
		if strings.Contains(log, "listen on "+a) {
			return true
		}
	}
	return false
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for
// a server the caller is about to start. It draws ports below the kernel's
// ephemeral range: another test that listens on port 0, closes, and starts
// its own server there can then never be handed this port in between (and
// talk to the wrong server), nor can this one take that test's port. It
// never hands out the same port twice in one process (until most of the
// range has been handed out): a cluster's nodes, picked one after another
// before any of them listens, each get a port of their own, and a node that
// is down for a restart keeps its port.
func FreePort() (int, error) {
	lo, hi := 20000, ephemeralLow()
	for range 100 {
		if hi-lo < 1000 {
			break
		}
		port := lo + rand.IntN(hi-lo)
		if !handOut(port, hi-lo) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// handOut records port as handed out and reports whether it was not
// already; once three quarters of a range of size ports are out, it
// forgets them all.
func handOut(port, size int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil || len(handedOut.ports) > size*3/4 {
		handedOut.ports = make(map[int]bool)
	}
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}

// ephemeralLow returns the first port of Linux's ephemeral range, 32768 if
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

// Ping sends PING to the Redis-protocol server at addr and returns nil if it
// answers +PONG within a second.
func Ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// CPUOf returns the CPU time (user + system) of process pid, from
// /proc/<pid>/stat (0 if it cannot be read).
func CPUOf(pid int) time.Duration {
	user, system := CPUSplitOf(pid)
	return user + system
}

// CPUSplitOf returns the CPU time of process pid in user mode and in the
// kernel (its system calls, and the network stack's work they do), from
// /proc/<pid>/stat (0 if it cannot be read).
func CPUSplitOf(pid int) (user, system time.Duration) {
	f := statFields(fmt.Sprintf("/proc/%d/stat", pid))
	if len(f) < 13 {
		return 0, 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut) * time.Second / 100, time.Duration(st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// SwitchesOf returns how many times the threads of process pid have been
// switched out so far (the voluntary and involuntary context switches of
// each /proc/<pid>/task/<tid>/status), or 0 if it cannot be read. An idle
// process's CPU is mostly its wake-ups, and this count is a steadier
// measure of them than its CPU time on a busy machine. A thread that
// exits takes its count with it.
func SwitchesOf(pid int) uint64 {
	var n uint64
	for _, task := range taskDirs(pid) {
		b, err := os.ReadFile(task + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			name, val, ok := strings.Cut(line, ":")
			if ok && (name == "voluntary_ctxt_switches" || name == "nonvoluntary_ctxt_switches") {
				v, _ := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
				n += v
			}
		}
	}
	return n
}

// statFields returns the fields of a /proc stat file (a process's or a
// thread's) after the command name, from the state on; nil if it cannot be
// read. The name is in parentheses and may hold spaces and parentheses:
// "pid (comm) S ppid ...".
func statFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 > len(b) {
		return nil
	}
	return strings.Fields(string(b[i+2:]))
}
