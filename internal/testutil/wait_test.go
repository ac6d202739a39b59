package testutil

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// fatalTB records the message of a Fatalf and ends the goroutine that
// called it, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// fails runs wait with a fatalTB and returns the message it failed with
// ("" if it did not).
func fails(t *testing.T, wait func(testing.TB)) (msg string) {
	f := &fatalTB{TB: t}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		msg = f.msg
	}()
	wait(f)
	return ""
}

// TestPoll: Poll returns nil once try does, try's last error when d
// passes, and a stopped error at once.
func TestPoll(t *testing.T) {
	n := 0
	if err := Poll(time.Second, func() error {
		if n++; n < 4 {
			return fmt.Errorf("try %d", n)
		}
		return nil
	}); err != nil || n != 4 {
		t.Errorf("Poll of a try that succeeds on its 4th call: %v after %d calls", err, n)
	}
	n = 0
	start := time.Now()
	err := Poll(20*time.Millisecond, func() error { n++; return fmt.Errorf("try %d", n) })
	if took := time.Since(start); err == nil || err.Error() != fmt.Sprintf("try %d", n) || took < 20*time.Millisecond || took > 5*time.Second {
		t.Errorf("Poll of a try that never succeeds: %v after %d calls and %v, want the last error after 20ms", err, n, took)
	}
	gone := errors.New("exited")
	n = 0
	if err := Poll(time.Minute, func() error { n++; return Stop(fmt.Errorf("start: %w", gone)) }); !errors.Is(err, gone) || n != 1 {
		t.Errorf("Poll of a try that stops: %v after %d calls, want %v after 1", err, n, gone)
	}
	n = 0
	if err := Poll(-time.Second, func() error { n++; return errors.New("no") }); err == nil || n != 1 {
		t.Errorf("Poll past its deadline: %v after %d calls, want an error after 1", err, n)
	}
}

// TestWaitFailures: WaitFor and WaitForErr fail with what they waited for,
// WaitForErr with the last error too, and pass once the condition holds.
func TestWaitFailures(t *testing.T) {
	if msg := fails(t, func(tb testing.TB) {
		WaitFor(tb, 10*time.Millisecond, "the impossible", func() bool { return false })
	}); msg != "timed out after 10ms waiting for the impossible" {
		t.Errorf("WaitFor: %q", msg)
	}
	n := 0
	if msg := fails(t, func(tb testing.TB) {
		WaitForErr(tb, 10*time.Millisecond, "the impossible", func() error { n++; return fmt.Errorf("seen %d", n) })
	}); msg != fmt.Sprintf("timed out after 10ms waiting for the impossible: seen %d", n) {
		t.Errorf("WaitForErr: %q after %d calls", msg, n)
	}
	if msg := fails(t, func(tb testing.TB) {
		WaitForErr(tb, time.Minute, "a process", func() error { return Stop(errors.New("it exited")) })
	}); msg != "gave up waiting for a process: it exited" {
		t.Errorf("WaitForErr of a stopped try: %q", msg)
	}
	n = 0
	if msg := fails(t, func(tb testing.TB) {
		WaitForErr(tb, time.Second, "the third call", func() error {
			if n++; n < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	}); msg != "" {
		t.Errorf("WaitForErr of a try that succeeds: %q", msg)
	}
}
