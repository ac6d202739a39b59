package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/clock"
	"github.com/rlserver/rlserver/internal/testutil"
)

// The tests of this file step the wall clock of a real node through
// --test-clock-shift-file, as NTP, an operator or a resumed VM would, and
// check what decisions do. Windows are a second long so that a test runs
// in seconds; the steps are of an hour and a day.

// setShift writes d into p's shift file and waits until p has read it (it
// logs each new shift).
func setShift(t *testing.T, p *proc, file string, d time.Duration) {
	t.Helper()
	line := "shift=" + d.String()
	seen := strings.Count(p.logs.String(), line)
	if err := os.WriteFile(file, []byte(d.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "the node reads the shift "+d.String(), func() bool {
		return strings.Count(p.logs.String(), line) > seen
	})
}

// allowed runs RL.CHECK key fixed 10 window on p and reports whether it
// was allowed.
func allowed(t *testing.T, p *proc, key, window string) bool {
	t.Helper()
	v, err := p.client.Do(context.Background(), "RL.CHECK", key, "fixed", 10, window).Slice()
	if err != nil {
		t.Fatalf("RL.CHECK %s: %v", key, err)
	}
	return v[0] == int64(1)
}

// spend checks key (fixed, 10 per window) until a check is denied.
func spend(t *testing.T, p *proc, key, window string) {
	t.Helper()
	for i := 0; allowed(t, p, key, window); i++ {
		if i > 100 {
			t.Fatalf("%s: never denied", key)
		}
	}
}

// clockOffset returns INFO rlserver's clock_offset_ms of p.
func clockOffset(t *testing.T, p *proc) time.Duration {
	t.Helper()
	info, _ := p.do("INFO", "rlserver").(string)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "clock_offset_ms:"); ok {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO rlserver: %q", line)
			}
			return time.Duration(ms) * time.Millisecond
		}
	}
	t.Fatalf("INFO rlserver has no clock_offset_ms:\n%s", info)
	return 0
}

// near reports whether got is within tol of want.
func near(got, want, tol time.Duration) bool { return got >= want-tol && got <= want+tol }

// TestClockSteps runs the scenarios below against real processes of one
// build.
func TestClockSteps(t *testing.T) {
	alone(t)
	bin := buildBinary(t)
	t.Run("StepBackKeepsAdmitting", func(t *testing.T) { clockStepBackKeepsAdmitting(t, bin) })
	t.Run("StepForwardThenBack", func(t *testing.T) { clockStepForwardThenBack(t, bin) })
	t.Run("WallJumpWhileDown", func(t *testing.T) { clockWallJumpWhileDown(t, bin) })
	t.Run("ForwardStepKeepsBlocks", func(t *testing.T) { clockForwardStepKeepsBlocks(t, bin) })
	t.Run("StepBackThenKill9", func(t *testing.T) { clockStepBackThenKill9(t, bin) })
}

// clockStepBackKeepsAdmitting: a key of 10 a second (a token bucket with
// room for 1000, so that a stall of the machine loses no refill) is
// spent, then the wall clock steps back an hour. Decisions stay on the
// node's clock, which runs at 99% of real time or more while it converges
// on the wall clock: the key refills about 10 a second (before: none, for
// the hour). INFO and the metric show the offset.
func clockStepBackKeepsAdmitting(t *testing.T, bin string) {
	dir, shift := t.TempDir(), filepath.Join(t.TempDir(), "shift")
	p := startProc(t, bin, dir, "--test-clock-shift-file", shift)
	key := []any{"RL.CHECK", "k", "token", 10, "1s", "BURST", 1000}
	p.do(append(key, "COST", 1000)...)
	spent := time.Now()
	setShift(t, p, shift, -time.Hour)
	time.Sleep(3 * time.Second) // real time passing, which the refill measures
	got := 0
	for ; p.do(key...).([]any)[0] == int64(1); got++ {
	}
	e := time.Since(spent).Seconds()
	t.Logf("admitted %d in the %.2f s after a step back of 1h (10 a second of decision time)", got, e)
	if float64(got) < 9.5*e-2 || float64(got) > 10*e+2 {
		t.Fatalf("admitted %d in %.2f s after the wall clock stepped back an hour, want about %.0f", got, e, 9.9*e)
	}
	if off := clockOffset(t, p); !near(off, time.Hour, time.Minute) {
		t.Fatalf("INFO clock_offset_ms %v, want about +1h", off)
	}
	if m := httpGet(t, "http://"+p.http+"/metrics"); !strings.Contains(m, "rlserver_clock_offset_seconds 3") {
		t.Fatalf("/metrics lacks rlserver_clock_offset_seconds of about 3600:\n%s", grepLines(m, "clock"))
	}
	p.stop()
}

// clockStepForwardThenBack: the wall clock steps a day ahead, keys are
// spent, and it steps back. The keys admit again within their window
// (before: they stayed denied for the day), also when the node restarts
// after the step back (before: the log's entries, stamped a day ahead,
// froze the restored state too).
func clockStepForwardThenBack(t *testing.T, bin string) {
	dir, shift := t.TempDir(), filepath.Join(t.TempDir(), "shift")
	p := startProc(t, bin, dir, "--test-clock-shift-file", shift, "--consistency", "strong")
	setShift(t, p, shift, 24*time.Hour)
	spend(t, p, "f", "1s")
	spend(t, p, "g", "1s")
	setShift(t, p, shift, 0)
	testutil.WaitFor(t, 3*time.Second, "f admits again after the step back", func() bool { return allowed(t, p, "f", "1s") })
	p.stop()

	p = startProc(t, bin, dir, "--test-clock-shift-file", shift, "--consistency", "strong")
	testutil.WaitFor(t, 3*time.Second, "g admits again after a restart", func() bool { return allowed(t, p, "g", "1s") })
	if off := clockOffset(t, p); !near(off, 0, time.Minute) {
		t.Fatalf("INFO clock_offset_ms %v after the restart, want about 0", off)
	}
	p.stop()
}

// clockWallJumpWhileDown: a node is stopped with a spent key and a
// block, and its wall clock jumps a day ahead before it starts again. The
// node measures the time it was down on the machine's boot clock, so the
// key is still spent and the block still holds (before: both were gone, as
// if a day had passed).
func clockWallJumpWhileDown(t *testing.T, bin string) {
	dir, shift := t.TempDir(), filepath.Join(t.TempDir(), "shift")
	p := startProc(t, bin, dir, "--test-clock-shift-file", shift)
	for i := 0; i < 10; i++ {
		p.do("RL.CHECK", "t", "token", 10, "1h")
	}
	p.do("RL.BLOCK", "ip=1.2.3.4", 600, "abuse")
	p.stop()

	if err := os.WriteFile(shift, []byte("24h"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = startProc(t, bin, dir, "--test-clock-shift-file", shift)
	if v := p.do("RL.CHECK", "t", "token", 10, "1h").([]any); v[0] != int64(0) {
		t.Fatalf("RL.CHECK t after a day's jump while down: %v, want denied (spent an instant ago)", v)
	}
	assertBlockTTL(t, p, "ip=1.2.3.4", 590*time.Second, 600*time.Second)
	if off := clockOffset(t, p); !near(off, -24*time.Hour, time.Minute) {
		t.Fatalf("INFO clock_offset_ms %v, want about -24h", off)
	}
	p.stop()
}

// assertBlockTTL checks that RL.BLOCKS on p lists id with a TTL in
// [lo, hi].
func assertBlockTTL(t *testing.T, p *proc, id string, lo, hi time.Duration) {
	t.Helper()
	v, err := p.client.Do(context.Background(), "RL.BLOCKS").Slice()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range v {
		r := row.([]any)
		if r[0] == id {
			if ttl := time.Duration(r[1].(int64)) * time.Millisecond; ttl < lo || ttl > hi {
				t.Fatalf("RL.BLOCKS: %s has ttl %v, want %v to %v", id, ttl, lo, hi)
			}
			return
		}
	}
	t.Fatalf("RL.BLOCKS: %v, want %s listed", v, id)
}

// clockForwardStepKeepsBlocks: a block of 10 minutes, then the wall
// clock steps a day ahead for long enough that the background sweep runs,
// then back. The block holds throughout (before: it vanished at the step,
// and the sweep deleted it for good).
func clockForwardStepKeepsBlocks(t *testing.T, bin string) {
	dir, shift := t.TempDir(), filepath.Join(t.TempDir(), "shift")
	p := startProc(t, bin, dir, "--test-clock-shift-file", shift)
	p.do("RL.BLOCK", "ip=9.9.9.9", 600, "abuse")
	setShift(t, p, shift, 24*time.Hour)
	missing := 0
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if ids := fmt.Sprint(blockedIDs(t, p)); ids != "[ip=9.9.9.9]" {
			missing++
		}
	}
	setShift(t, p, shift, 0)
	if missing > 0 {
		t.Errorf("the block was not listed in %d of the checks during the day's step", missing)
	}
	assertBlockTTL(t, p, "ip=9.9.9.9", 590*time.Second, 600*time.Second)
	p.stop()
}

// clockStepBackThenKill9: a key is spent, the wall clock steps back an
// hour, and the node is killed (SIGKILL) once its data directory's clock
// file holds the offset. It restarts where it decided: the offset is still
// about an hour (before: none, it restarted on the wall clock) and the key
// admits again within its window (before: frozen for the hour).
func clockStepBackThenKill9(t *testing.T, bin string) {
	dir, shift := t.TempDir(), filepath.Join(t.TempDir(), "shift")
	p := startProc(t, bin, dir, "--test-clock-shift-file", shift)
	spend(t, p, "c", "1s")
	setShift(t, p, shift, -time.Hour)
	testutil.WaitFor(t, 5*time.Second, "the clock file holds the offset", func() bool {
		m, ok, err := clock.Load(filepath.Join(dir, clockFile))
		return err == nil && ok && near(time.Duration(m.Offset()), time.Hour, time.Minute)
	})
	p.kill()

	p = startProc(t, bin, dir, "--test-clock-shift-file", shift)
	testutil.WaitFor(t, 3*time.Second, "c admits again after kill -9", func() bool { return allowed(t, p, "c", "1s") })
	if off := clockOffset(t, p); !near(off, time.Hour, time.Minute) {
		t.Fatalf("INFO clock_offset_ms %v after kill -9 and a restart, want about +1h", off)
	}
	p.stop()
}
