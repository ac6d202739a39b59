package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlserver/rlserver/bench/load"
	"github.com/rlserver/rlserver/internal/rlproc"
)

// server is the rlserver (or redis-server) child process.
type server struct {
	addr string
	p    *rlproc.Proc
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
	return launch(dir, "rlserver", bin, func(port, addr string) []string {
		return append([]string{"--listen", addr, "--http", "", "--data-dir", dataDir,
			"--log-level", "warn", "--maxmemory", o.maxmemory, "--procs", strconv.Itoa(o.procs)}, extra...)
	})
}

// startRedis starts redis-server bounded by o.maxmemory, evicting by
// volatile-ttl as rlserver does, without persistence.
func startRedis(o options, dir string) (*server, error) {
	return launch(dir, "redis-server", o.redisServer, func(port, addr string) []string {
		return []string{"--port", port, "--bind", "127.0.0.1", "--dir", dir,
			"--maxmemory", o.maxmemory, "--maxmemory-policy", "volatile-ttl", "--save", "", "--appendonly", "no"}
	})
}

// launch starts bin with args(port, addr) on a free port, its output to
// <dir>/<name>.log, and waits up to 10 s until it answers PING there
// (rlproc.OnFreeAddrs: rlserver is started again on another port should
// another process have taken its own).
func launch(dir, name, bin string, args func(port, addr string) []string) (*server, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	s := &server{log: logf}
	s.p, err = rlproc.OnFreeAddrs(1, func(addrs []string) (*rlproc.Proc, error) {
		s.addr = addrs[0]
		_, port, _ := net.SplitHostPort(s.addr)
		p, err := rlproc.Start(name, bin, args(port, s.addr), logf)
		if err != nil {
			return nil, err
		}
		return p, p.WaitPing(s.addr, 10*time.Second, func() error { return rlproc.Ping(s.addr) })
	})
	if err == nil {
		s.cli, err = load.Dial(s.addr, 10*time.Second)
	}
	if err != nil {
		if s.p != nil {
			s.p.Kill()
		}
		logf.Close()
		return nil, err
	}
	return s, nil
}

// stop closes the client, sends SIGTERM and waits for a clean exit
// (status 0 within 15 s; killed after); it reports why not.
func (s *server) stop() error {
	s.once.Do(func() {
		s.cli.Close()
		s.err = s.p.Stop(15 * time.Second)
		s.log.Close()
	})
	return s.err
}

// rss returns the server's resident memory in bytes.
func (s *server) rss() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.p.Pid()))
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
