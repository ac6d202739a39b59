package testutil

import (
	"errors"
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test with what if it does
// not within d. It polls at once, then after 1 ms, backing off to every
// 50 ms: quick for in-process state, gentle on a real process that cond
// asks over the network. Call it from the test's goroutine only (it calls
// t.Fatalf).
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if Poll(d, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) != nil {
		t.Fatalf("timed out after %v waiting for %s", d.Round(time.Millisecond), what)
	}
}

// errNotYet is WaitFor's condition not holding yet.
var errNotYet = errors.New("not yet")

// WaitForErr is WaitFor for a condition that says why it does not hold:
// it polls try until it returns nil, and fails the test with what and
// try's last error if it does not within d (or at once if try returns
// Stop(err)). Call it from the test's goroutine only (it calls t.Fatalf);
// try may call t.Fatal too.
func WaitForErr(t testing.TB, d time.Duration, what string, try func() error) {
	t.Helper()
	switch stop, err := poll(d, try); {
	case stop:
		t.Fatalf("gave up waiting for %s: %v", what, err)
	case err != nil:
		t.Fatalf("timed out after %v waiting for %s: %v", d.Round(time.Millisecond), what, err)
	}
}

// Poll polls try as WaitFor polls its condition (at once, then after 1 ms,
// backing off to every 50 ms) until it returns nil or d has passed, and
// returns nil or try's last error. A try that sees the wait cannot succeed
// (the process it waits for has exited) returns Stop(err): Poll returns
// err at once. Poll fails no test: a goroutine other than the test's may
// call it, and a caller may handle the timeout its own way (a message of
// its own, another attempt). A negative or zero d gives try one call.
func Poll(d time.Duration, try func() error) error {
	_, err := poll(d, try)
	return err
}

// poll is Poll, which also reports whether try stopped it.
func poll(d time.Duration, try func() error) (stop bool, err error) {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		err := try()
		if err == nil {
			return false, nil
		}
		if s, ok := err.(stopped); ok {
			return true, s.err
		}
		if time.Now().After(deadline) {
			return false, err
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Stop wraps err, returned by the try of Poll or WaitForErr, to end the
// wait at once with err.
func Stop(err error) error {
	if err == nil {
		err = errors.New("stopped")
	}
	return stopped{err}
}

// stopped is an error that Stop wrapped.
type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }
func (s stopped) Unwrap() error { return s.err }
