package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// flood runs redis-benchmark's key flood of command against addr for o.d.
func flood(o options, addr string, command ...string) error {
	host, port, _ := net.SplitHostPort(addr)
	args := append([]string{"-h", host, "-p", port, "-c", strconv.Itoa(o.clients), "-P", strconv.Itoa(o.pipeline),
		"-r", strconv.Itoa(o.keys), "-l", "-q"}, command...)
	cmd := exec.Command(o.bench, args...)
	cmd.Stdout, cmd.Stderr = nil, os.Stderr
	fmt.Fprintf(os.Stderr, "soak: %s for %v\n", strings.Join(cmd.Args, " "), o.d)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return fmt.Errorf("redis-benchmark ended early: %v", err)
	case <-time.After(o.d):
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	return nil
}

// bystander checks its own key (fixed, 10^9 per day) and PINGs, one round
// trip at a time, requiring every remaining count to be one less than the
// one before (a new window, which the reset announces, starts over).
type bystander struct {
	nc      net.Conn
	stopc   chan struct{}
	done    chan struct{}
	res     BystanderResult
	lastErr error
}

// BystanderResult is what the bystander saw.
type BystanderResult struct {
	Checks    int64   `json:"checks"`
	Exact     bool    `json:"exact"`
	WorstMs   float64 `json:"worst_ms"`
	FirstMiss string  `json:"first_miss,omitempty"`
}

func startBystander(addr string) (*bystander, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &bystander{nc: nc, stopc: make(chan struct{}), done: make(chan struct{}), res: BystanderResult{Exact: true}}
	go b.run()
	return b, nil
}

func (b *bystander) run() {
	defer close(b.done)
	rd := newLines(b.nc)
	want, lastReset := int64(-1), int64(-1)
	req := "*5\r\n$8\r\nRL.CHECK\r\n$9\r\nbystander\r\n$5\r\nfixed\r\n$10\r\n1000000000\r\n$2\r\n1d\r\n*1\r\n$4\r\nPING\r\n"
	for {
		select {
		case <-b.stopc:
			return
		default:
		}
		start := time.Now()
		b.nc.SetDeadline(start.Add(30 * time.Second))
		if _, err := b.nc.Write([]byte(req)); err != nil {
			b.miss(err.Error())
			return
		}
		lines, err := rd.read(7)
		if err != nil {
			b.miss(err.Error())
			return
		}
		b.res.WorstMs = max(b.res.WorstMs, float64(time.Since(start))/1e6)
		remaining, _ := strconv.ParseInt(strings.TrimPrefix(lines[3], ":"), 10, 64)
		reset, _ := strconv.ParseInt(strings.TrimPrefix(lines[5], ":"), 10, 64)
		if lastReset >= 0 && reset > lastReset {
			want = -1 // a new window
		}
		if lines[0] != "*5" || lines[1] != ":1" || lines[6] != "+PONG" || (want >= 0 && remaining != want) {
			b.miss(fmt.Sprintf("check %d: %q, want remaining %d then +PONG", b.res.Checks, lines, want))
		}
		want, lastReset = remaining-1, reset
		b.res.Checks++
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *bystander) miss(why string) {
	if b.res.Exact {
		b.res.Exact, b.res.FirstMiss = false, why
	}
}

func (b *bystander) stop() BystanderResult {
	close(b.stopc)
	<-b.done
	b.nc.Close()
	return b.res
}

// lines reads CRLF-terminated reply lines.
type lines struct {
	nc  net.Conn
	buf []byte
}

func newLines(nc net.Conn) *lines { return &lines{nc: nc} }

func (l *lines) read(n int) ([]string, error) {
	var out []string
	tmp := make([]byte, 4096)
	for len(out) < n {
		if i := strings.Index(string(l.buf), "\r\n"); i >= 0 {
			out = append(out, string(l.buf[:i]))
			l.buf = l.buf[i+2:]
			continue
		}
		m, err := l.nc.Read(tmp)
		if err != nil {
			return out, err
		}
		if m == 0 {
			return out, errors.New("no progress")
		}
		l.buf = append(l.buf, tmp[:m]...)
	}
	return out, nil
}
