package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
)

// floodSeconds is how long TestMaxMemoryBoundsTheProcess floods each node
// (RL_TEST_FLOOD_SECONDS; the measurements ran 60 s: make flood).
func floodSeconds() time.Duration {
	if s := os.Getenv("RL_TEST_FLOOD_SECONDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return time.Duration(n) * time.Second
		}
	}
	return 15 * time.Second
}

// TestMaxMemoryBoundsTheProcess floods a node bounded by --maxmemory 64mb
// with new keys — redis-benchmark -c 50 -P 16 -r 100000000 of RL.CHECK
// key:__rand_int__ token 100 1h, far more keys than fit — in memory,
// durable in fast mode and durable in strong mode, and samples its resident
// memory every second: the peak must stay under 1.25 × --maxmemory + 32 MiB
// (112 MiB). Before the memory budget the durable node grew to 194 MB and
// the in-memory one to 119 MB. A bystander charges a key of its own all the
// while: every charge must find its count (the key is never evicted), and
// in strong mode the count it was last told survives a kill -9. make test
// floods the strong node; TestLongMaxMemoryBoundsTheProcess, in make
// test-long, all three.
func TestMaxMemoryBoundsTheProcess(t *testing.T) {
	alone(t)
	testMaxMemoryBounds(t, "strong")
}

// TestLongMaxMemoryBoundsTheProcess is TestMaxMemoryBoundsTheProcess in
// memory, durable fast and durable strong: make test-long runs it.
func TestLongMaxMemoryBoundsTheProcess(t *testing.T) {
	testutil.LongOnly(t)
	testMaxMemoryBounds(t, "memory", "fast", "strong")
}

// testMaxMemoryBounds floods a node in each of the modes named.
func testMaxMemoryBounds(t *testing.T, modes ...string) {
	bench := testutil.RequireTool(t, "redis-benchmark", "apt-get install redis-tools")
	bin := buildStaticBinary(t)
	const maxMemory = 64 << 20
	bound := int64(maxMemory + maxMemory/4 + 32<<20)
	for _, mode := range []struct {
		name  string
		flags []string
	}{
		{"memory", []string{"--data-dir", ""}},
		{"fast", nil},
		{"strong", []string{"--consistency", "strong"}},
	} {
		if !slices.Contains(modes, mode.name) {
			continue
		}
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startProc(t, bin, dir, append([]string{"--maxmemory", "64mb"}, mode.flags...)...)
			by := startBystander(t, p)
			rss := sampleRSS(p.process.Pid(), time.Second)
			flood := exec.Command(bench, "-h", "127.0.0.1", "-p", p.resp[strings.LastIndexByte(p.resp, ':')+1:],
				"-c", "50", "-P", "16", "-r", "100000000", "-l", "-q", "RL.CHECK", "key:__rand_int__", "token", "100", "1h")
			if err := flood.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(floodSeconds())
			flood.Process.Kill()
			flood.Wait()
			peak, samples := rss.stop()
			checks, last := by.stop()
			info, err := p.client.Info(context.Background(), "memory", "stats").Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: peak RSS %.1f MB (%d samples; bound %.1f MB), used_memory %.1f MB (overhead %.1f MB), evicted %d keys, processed %d commands; bystander: %d checks, each exact",
				mode.name, float64(peak)/1e6, samples, float64(bound)/1e6, float64(infoField(info, "used_memory"))/1e6,
				float64(infoField(info, "used_memory_overhead"))/1e6, infoField(info, "evicted_keys"), infoField(info, "total_commands_processed"), checks)
			if peak > bound {
				t.Errorf("peak RSS %d bytes > 1.25 × --maxmemory + 32 MiB = %d", peak, bound)
			}
			if infoField(info, "evicted_keys") <= 0 {
				t.Errorf("no key was evicted: the flood did not reach --maxmemory")
			}
			if mode.name == "strong" {
				p.kill()
				began := time.Now()
				p = restartProc(t, p, append([]string{"--listen", p.resp, "--http", p.http, "--maxmemory", "64mb"}, mode.flags...)...)
				t.Logf("restarted after kill -9 in %v", time.Since(began).Round(time.Millisecond))
				got := p.do("RL.CHECK", "bystander", "fixed", 1000000, testutil.NoRollover, "COST", 0).([]any)
				if got[2].(int64) != last {
					t.Errorf("after kill -9 the bystander has %v remaining; it was told %d", got[2], last)
				}
			}
			p.stop()
		})
	}
}

// buildStaticBinary builds rlserver as the image and make build do
// (CGO_ENABLED=0, -trimpath), once per test run: its memory is all the Go runtime's,
// which a cgo build's Pebble would partly take from C.
func buildStaticBinary(t testing.TB) string {
	t.Helper()
	return staticBuild.get(t)
}

// bystander charges one key of its own every 50 ms while a test floods the
// node, and checks that each charge finds the count the last one left.
type bystander struct {
	done   chan struct{}
	wg     sync.WaitGroup
	checks int
	last   int64 // the remaining count the node last answered
}

func startBystander(t *testing.T, p *proc) *bystander {
	b := &bystander{done: make(chan struct{}), last: -1}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			select {
			case <-b.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			v, err := p.client.Do(context.Background(), "RL.CHECK", "bystander", "fixed", 1000000, testutil.NoRollover).Slice()
			if err != nil {
				t.Errorf("bystander: %v", err)
				return
			}
			rem := v[2].(int64)
			if b.last >= 0 && rem != b.last-1 {
				t.Errorf("bystander: %d remaining after %d: its key lost its count", rem, b.last)
				return
			}
			b.last, b.checks = rem, b.checks+1
		}
	}()
	return b
}

// stop ends the bystander and returns its checks and the last remaining.
func (b *bystander) stop() (int, int64) {
	close(b.done)
	b.wg.Wait()
	return b.checks, b.last
}

// rssSampler reads a process's resident memory (VmRSS) at an interval.
type rssSampler struct {
	done    chan struct{}
	wg      sync.WaitGroup
	peak    int64
	samples int
}

func sampleRSS(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				if n := procStatus(pid, "VmRSS"); n > 0 {
					s.peak, s.samples = max(s.peak, n), s.samples+1
				}
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak and how many samples it saw.
func (s *rssSampler) stop() (int64, int) {
	close(s.done)
	s.wg.Wait()
	return s.peak, s.samples
}

// procStatus returns a field of /proc/<pid>/status given in kB (VmRSS,
// VmHWM), in bytes; 0 if it cannot be read.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
