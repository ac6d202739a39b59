package cluster

import (
	"testing"
	"time"
)

// TestPhaseTransitions walks a replica's phase through each named
// transition and checks what each leaves.
func TestPhaseTransitions(t *testing.T) {
	var p phase
	want := func(s string) {
		t.Helper()
		if got := p.String(); got != s {
			t.Fatalf("phase %q, want %q", got, s)
		}
	}
	want("following")
	if p.enter() {
		t.Fatal("a following replica admitted a check")
	}
	p.deferElection()
	want("following, deferring")
	if !p.endDeferral() || p.endDeferral() {
		t.Fatal("endDeferral must report deferring once")
	}
	p.serve()
	want("serving")
	if !p.enter() {
		t.Fatal("a serving replica refused a check")
	}
	p.leave()
	if !p.beginHandOff() || p.beginHandOff() {
		t.Fatal("beginHandOff must admit one hand-over at a time")
	}
	want("serving, handing over")
	p.stopServing()
	want("following, handing over")
	p.giveUp()
	want("abandoned, handing over")
	p.endHandOff()
	want("abandoned")
	if p.enter() {
		t.Fatal("an abandoned replica admitted a check")
	}
	if !p.takeAbandoned() || p.takeAbandoned() {
		t.Fatal("takeAbandoned must report abandoned once")
	}
	want("following")
	p.serve()
	p.giveUp()
	if p.serving() || !p.abandoned() {
		t.Fatalf("giveUp left %q", p.String())
	}
}

// TestPhaseStopWaitsForChecks: stopServing returns only once the checks
// admitted before it have left, and none is admitted after it.
func TestPhaseStopWaitsForChecks(t *testing.T) {
	var p phase
	p.serve()
	if !p.enter() {
		t.Fatal("a serving replica refused a check")
	}
	stopped := make(chan struct{})
	go func() {
		p.stopServing()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("stopServing returned while a check was under way")
	case <-time.After(50 * time.Millisecond):
	}
	p.leave()
	<-stopped
	if p.enter() {
		t.Fatal("a check was admitted after stopServing")
	}
}
