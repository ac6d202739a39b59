package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/internal/rlproc"
)

// server is a child process speaking RESP on addr.
type server struct {
	name  string
	addr  string
	pprof string // rlserver only: address of /debug/pprof and /debug/gc
	bin   string // the binary it runs
	p     *rlproc.Proc
	cli   *load.Client
}

// startServer starts bin with args(addrs), addrs being ports free
// addresses (addrs[0] the RESP one), its output to logw, and waits up to
// 10 s until it answers PING (rlproc.OnFreeAddrs: rlserver is started
// again on others should another process have taken one of its ports).
func startServer(name, bin string, ports int, logw io.Writer, args func(addrs []string) []string) (*server, error) {
	s := &server{name: name, bin: bin}
	p, err := rlproc.OnFreeAddrs(ports, func(addrs []string) (*rlproc.Proc, error) {
		s.addr = addrs[0]
		p, err := rlproc.Start(name, bin, args(addrs), logw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return p, p.WaitPing(s.addr, 10*time.Second, func() error { return rlproc.Ping(s.addr) })
	})
	if err == nil {
		s.p = p
		s.cli, err = load.Dial(s.addr, 10*time.Second)
	}
	if err != nil {
		if p != nil {
			p.Kill()
		}
		return nil, err
	}
	return s, nil
}

// startRLServer starts rlserver with --procs procs under name, with its
// pprof address.
func startRLServer(name, bin, dir string, procs int, logw io.Writer, extra ...string) (*server, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	var pprof string
	s, err := startServer(name, abs, 2, logw, func(addrs []string) []string {
		pprof = addrs[1]
		return append([]string{"--listen", addrs[0], "--http", "",
			"--data-dir", filepath.Join(dir, name+"-data"), "--log-level", "warn",
			"--pprof", addrs[1], "--procs", strconv.Itoa(procs)}, extra...)
	})
	if err == nil {
		s.pprof = pprof
	}
	return s, err
}

// startRedis starts redis-server under name, with dir (made here) as its
// --dir directory, without RDB snapshots; extra sets its persistence
// (--appendonly ...).
func startRedis(name, bin, dir string, logw io.Writer, extra ...string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return startServer(name, bin, 1, logw, func(addrs []string) []string {
		_, port, _ := net.SplitHostPort(addrs[0])
		return append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "",
			"--protected-mode", "no", "--daemonize", "no", "--dir", dir, "--loglevel", "warning"}, extra...)
	})
}

// stop closes the client, sends SIGTERM and waits up to 10 s for the exit
// (killed after).
func (s *server) stop() {
	s.cli.Close()
	s.p.Stop(10 * time.Second)
}

// kill kills the server (kill -9) and closes the client.
func (s *server) kill() {
	s.p.Kill()
	s.cli.Close()
}

// cpuTime returns the CPU time (user + system) the server process has used.
func (s *server) cpuTime() time.Duration { return s.p.CPU() }

// cpuSplit returns the CPU time the server process has used in user mode
// and in the kernel (system time).
func (s *server) cpuSplit() (user, kernel time.Duration) { return s.p.CPUSplit() }

// heapAfterGC returns rlserver's live heap after a forced collection.
func (s *server) heapAfterGC() (int64, error) {
	resp, err := http.Get("http://" + s.pprof + "/debug/gc")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "heap_alloc:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("/debug/gc: no heap_alloc in %q", body)
}

// usedMemory returns INFO memory's used_memory.
func (s *server) usedMemory() (int64, error) {
	v, err := s.cli.InfoField("memory", "used_memory")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

func (s *server) dbsize() (int64, error) {
	v, err := s.cli.Do("DBSIZE")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}
