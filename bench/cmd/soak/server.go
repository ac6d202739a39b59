package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/internal/rlproc"
)

// server is the rlserver child process.
type server struct {
	addr string
	cmd  *exec.Cmd
	cli  *load.Client // for INFO
	log  *os.File
	once sync.Once
	err  error // of stop
}

func startServer(o options, dir string) (*server, error) {
	bin, err := filepath.Abs(o.rlserver)
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	var extra []string
	switch o.mode {
	case "memory":
		dataDir = ""
	case "fast", "strong":
		extra = []string{"--consistency", o.mode}
	default:
		return nil, fmt.Errorf("-mode %q: want memory, fast or strong", o.mode)
	}
	return launch(dir, "rlserver", bin, func(port int, addr string) []string {
		return append([]string{"--listen", addr, "--http", "", "--data-dir", dataDir,
			"--log-level", "warn", "--maxmemory", o.maxmemory, "--procs", strconv.Itoa(o.procs)}, extra...)
	})
}

// startRedis starts redis-server bounded by o.maxmemory, evicting by
// volatile-ttl as rlserver does, without persistence.
func startRedis(o options, dir string) (*server, error) {
	return launch(dir, "redis-server", o.redisServer, func(port int, addr string) []string {
		return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--maxmemory", o.maxmemory, "--maxmemory-policy", "volatile-ttl", "--save", "", "--appendonly", "no"}
	})
}

// launch starts bin with args(port, addr) on a free port, its output to
// <dir>/<name>.log, and waits until it answers there.
func launch(dir, name, bin string, args func(port int, addr string) []string) (*server, error) {
	port, err := rlproc.FreePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	s := &server{addr: "127.0.0.1:" + strconv.Itoa(port), log: logf}
	s.cmd = exec.Command(bin, args(port, s.addr)...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	if s.cli, err = load.Dial(s.addr, 10*time.Second); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s did not start on %s: %w", name, s.addr, err)
	}
	return s, nil
}

// stop sends SIGTERM and waits for a clean exit (status 0 within 15 s);
// it reports why not.
func (s *server) stop() error {
	s.once.Do(func() {
		if s.cli != nil { // nil when it never answered
			s.cli.Close()
		}
		s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- s.cmd.Wait() }()
		select {
		case s.err = <-done:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			s.err = errors.New("rlserver did not stop within 15 s of SIGTERM")
			<-done
		}
		s.log.Close()
	})
	return s.err
}

// rss returns the server's resident memory in bytes.
func (s *server) rss() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// info returns INFO's integer fields.
func (s *server) info() (map[string]int64, error) {
	text, err := s.cli.Do("INFO")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out, nil
}

// Sample is one reading of the server.
type Sample struct {
	At         float64 `json:"at_s"`
	RSS        int64   `json:"rss"`
	UsedMemory int64   `json:"used_memory"`
	Keys       int64   `json:"keys"`
	Evicted    int64   `json:"evicted_keys"`
	Commands   int64   `json:"total_commands_processed"`
}

// sampler reads the server every interval until stopped.
type sampler struct {
	stopc   chan struct{}
	done    chan struct{}
	samples []Sample
}

func (s *server) sample(every time.Duration) *sampler {
	sm := &sampler{stopc: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(sm.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if smp, err := s.read(time.Since(start)); err == nil {
				sm.samples = append(sm.samples, smp)
			}
			select {
			case <-sm.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return sm
}

func (s *server) read(at time.Duration) (Sample, error) {
	rss, err := s.rss()
	if err != nil {
		return Sample{}, err
	}
	info, err := s.info()
	if err != nil {
		return Sample{}, err
	}
	return Sample{At: at.Seconds(), RSS: rss, UsedMemory: info["used_memory"], Keys: info["keys"],
		Evicted: info["evicted_keys"], Commands: info["total_commands_processed"]}, nil
}

// stop ends the sampling (after one last sample) and returns the samples.
func (sm *sampler) stop() []Sample {
	close(sm.stopc)
	<-sm.done
	return sm.samples
}
