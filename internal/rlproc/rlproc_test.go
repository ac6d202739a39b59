package rlproc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/rlproc"
)

// sh starts /bin/sh -c script.
func sh(t *testing.T, script string) *rlproc.Proc {
	t.Helper()
	p, err := rlproc.Start("sh", "/bin/sh", []string{"-c", script}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

var never = func() error { return errors.New("no answer") }

func TestWaitPingNoticesAnExitAndGivesTheLog(t *testing.T) {
	t.Parallel()
	p := sh(t, "echo boom >&2; exit 3")
	err := p.WaitPing("127.0.0.1:1", 10*time.Second, never)
	if !errors.Is(err, rlproc.ErrExited) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("WaitPing = %v, want ErrExited with the exit status and the log", err)
	}
	if p.Alive() || p.Err() == nil {
		t.Fatalf("Alive %v, Err %v after the exit", p.Alive(), p.Err())
	}
}

func TestWaitPingTimesOut(t *testing.T) {
	t.Parallel()
	p := sh(t, "echo waiting >&2; exec sleep 60")
	err := p.WaitPing("127.0.0.1:1", 50*time.Millisecond, never)
	if err == nil || errors.Is(err, rlproc.ErrExited) || !strings.Contains(err.Error(), "did not answer PING on 127.0.0.1:1") ||
		!strings.Contains(err.Error(), "waiting") {
		t.Fatalf("WaitPing = %v, want a timeout naming the address, with the log", err)
	}
	if !p.Alive() {
		t.Fatal("the process was stopped by a timed-out WaitPing")
	}
}

func TestStopReportsTheExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script, want string
	}{
		{"clean", `trap "exit 0" TERM`, ""},
		{"status 4", `trap "exit 4" TERM`, "exit after SIGTERM: exit status 4"},
		{"ignores SIGTERM", `trap "" TERM`, "no exit within 200ms of SIGTERM (killed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sh(t, tc.script+"; echo up >&2; while :; do sleep 0.01; done")
			for !strings.Contains(p.Log().String(), "up") { // its trap is set
				time.Sleep(time.Millisecond)
			}
			err := p.Stop(200 * time.Millisecond)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Stop = %v, want %q", err, tc.want)
			}
			if p.Alive() {
				t.Fatal("alive after Stop")
			}
		})
	}
}

func TestOnFreeAddrsStartsAgainWhenAPortWasTaken(t *testing.T) {
	t.Parallel()
	var tries [][]string
	p, err := rlproc.OnFreeAddrs(2, func(addrs []string) (*rlproc.Proc, error) {
		tries = append(tries, addrs)
		script := "exec sleep 60"
		if len(tries) == 1 {
			script = "echo 'listen on " + addrs[1] + " (--http): bind: address already in use' >&2; exit 1"
		}
		p := sh(t, script)
		if len(tries) == 1 {
			return p, p.WaitPing(addrs[0], 10*time.Second, never)
		}
		return p, nil
	})
	if err != nil || p == nil || len(tries) != 2 || tries[0][0] == tries[1][0] || tries[0][1] == tries[1][1] {
		t.Fatalf("OnFreeAddrs = %v, %v after tries %v; want a second try on other addresses", p, err, tries)
	}

	tries = nil
	_, err = rlproc.OnFreeAddrs(1, func(addrs []string) (*rlproc.Proc, error) {
		tries = append(tries, addrs)
		p := sh(t, "echo 'listen on 127.0.0.1:1 (--pprof): bind: address already in use' >&2; exit 1")
		return p, p.WaitPing(addrs[0], 10*time.Second, never)
	})
	if !errors.Is(err, rlproc.ErrExited) || len(tries) != 1 {
		t.Fatalf("a port not its own taken: %v after %d tries, want the exit after one", err, len(tries))
	}
}

func TestKillDoesNotWaitForAChildHoldingItsOutput(t *testing.T) {
	t.Parallel()
	p := sh(t, "sleep 5 & echo up >&2; exec sleep 60")
	for !strings.Contains(p.Log().String(), "up") {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	p.Kill()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Kill took %v, waiting for the child that holds the pipe", took)
	}
}

// TestSwitchesOfCountsAThreadThatSleeps: a shell that sleeps in a loop is
// switched out at least once a sleep, so its count grows.
func TestSwitchesOfCountsAThreadThatSleeps(t *testing.T) {
	t.Parallel()
	p := sh(t, "while :; do sleep 0.01; done")
	first := rlproc.SwitchesOf(p.Pid())
	var last uint64
	deadline := time.Now().Add(10 * time.Second)
	for last < first+3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		last = rlproc.SwitchesOf(p.Pid())
	}
	if last < first+3 { // a shell just started may not have been switched out yet: first may be 0
		t.Fatalf("context switches of a sleeping shell: %d, then %d", first, last)
	}
	if n := rlproc.SwitchesOf(-1); n != 0 {
		t.Fatalf("SwitchesOf(-1) = %d, want 0", n)
	}
}
