package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/internal/rlproc"
)

// server is a child process speaking RESP on addr.
type server struct {
	name  string
	addr  string
	pprof string // rlserver only: address of /debug/pprof and /debug/gc
	cmd   *exec.Cmd
	cli   *load.Client
}

func startServer(name string, dir string, logw io.Writer, argv func(port, pprofPort int) []string) (*server, error) {
	port, err := rlproc.FreePort()
	if err != nil {
		return nil, err
	}
	pport, err := rlproc.FreePort()
	if err != nil {
		return nil, err
	}
	args := argv(port, pport)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logw, logw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
	if strings.HasPrefix(name, "rlserver") {
		s.pprof = "127.0.0.1:" + strconv.Itoa(pport)
	}
	if s.cli, err = load.Dial(s.addr, 10*time.Second); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s did not start on %s: %w", name, s.addr, err)
	}
	if _, err := s.cli.Do("PING"); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s: PING: %w", name, err)
	}
	return s, nil
}

// startRLServer starts rlserver with --procs procs under name.
func startRLServer(name, bin, dir string, procs int, logw io.Writer, extra ...string) (*server, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	return startServer(name, dir, logw, func(port, pport int) []string {
		return append([]string{abs, "--listen", "127.0.0.1:" + strconv.Itoa(port), "--http", "",
			"--data-dir", filepath.Join(dir, name+"-data"), "--log-level", "warn",
			"--pprof", "127.0.0.1:" + strconv.Itoa(pport), "--procs", strconv.Itoa(procs)}, extra...)
	})
}

// startRedis starts redis-server under name, with dir (made here) as its
// working and --dir directory, without RDB snapshots; extra sets its
// persistence (--appendonly ...).
func startRedis(name, bin, dir string, logw io.Writer, extra ...string) (*server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return startServer(name, dir, logw, func(port, _ int) []string {
		return append([]string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--protected-mode", "no", "--daemonize", "no", "--dir", dir, "--loglevel", "warning"}, extra...)
	})
}

func (s *server) stop() {
	if s.cli != nil {
		s.cli.Close()
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// cpuTime returns the CPU time (user + system) the server process has used.
func (s *server) cpuTime() time.Duration { return rlproc.CPUOf(s.cmd.Process.Pid) }

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
