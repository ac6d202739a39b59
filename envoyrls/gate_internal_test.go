package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/rlserver/rlserver/internal/testutil"
)

// gateCall is a call a gate test let in: the stream's context (cancelled
// when the stream ends) and the context the tap gave it.
type gateCall struct {
	end context.CancelFunc
	ctx context.Context
}

// TestGateAdmission: a table of calls on a gate of 4 calls, 2 of them
// waiting for their message, and 1 health check without a token: a call
// that would pass a bound takes the place of the one that has waited
// longest for its message, and is refused only when none waits; calls
// whose message arrived are never evicted; an ended call's place is free
// again; health checks without a token have their own pool; a call
// without the token (but a health check) is refused.
func TestGateAdmission(t *testing.T) {
	g := newGate([]string{"tok"}, 4, 2, 1, time.Hour)
	calls := map[string]*gateCall{}
	for i, step := range []struct {
		op, name string // op: "tap" (with the token), "anon" (a health check without it), "deny" (a ShouldRateLimit without it), "arrive", "end"
		want     string // the status code of a refused tap, "" when admitted
		evicted  string // the calls that tap evicted, comma-separated
	}{
		{"tap", "a1", "", ""},
		{"tap", "a2", "", ""},
		{"tap", "a3", "", "a1"}, // 2 waiting: the oldest gives way
		{"arrive", "a2", "", ""},
		{"tap", "a4", "", ""},   // calls a2 a3 a4, waiting a3 a4
		{"tap", "a5", "", "a3"}, // a2 has its message: not evicted
		{"arrive", "a4", "", ""},
		{"arrive", "a5", "", ""},
		{"tap", "a6", "", ""}, // 4 calls: a2 a4 a5 a6
		{"arrive", "a6", "", ""},
		{"tap", "a7", "ResourceExhausted", ""}, // full, and none waits
		{"anon", "h1", "", ""},                 // the health checks' own pool
		{"anon", "h2", "", "h1"},
		{"deny", "x", "Unauthenticated", ""},
		{"end", "a2", "", ""},
		{"tap", "a8", "", ""},   // 4 calls again, a8 waiting
		{"tap", "a9", "", "a8"}, // full: the waiting one gives way
		{"end", "h2", "", ""},
		{"anon", "h3", "", ""},
	} {
		if step.op == "end" { // the stream ends: its place is given back (on another goroutine)
			c := calls[step.name]
			p := c.ctx.Value(callKey{}).(*call).pool
			g.mu.Lock()
			n := p.calls
			g.mu.Unlock()
			c.end()
			waitGate(t, g, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return p.calls == n-1 })
			continue
		}
		if step.op == "arrive" {
			g.arrived(calls[step.name].ctx)
			continue
		}
		before := map[string]bool{}
		for n, c := range calls {
			before[n] = c.ctx.Err() != nil
		}
		c, err := tapCall(g, step.op)
		if got := codeOf(err); got != step.want {
			t.Fatalf("step %d, %s %s: %v, want %q", i, step.op, step.name, err, step.want)
		}
		if c != nil {
			calls[step.name] = c
		}
		var evicted []string
		for n, c := range calls {
			if c.ctx.Err() != nil && !before[n] && n != step.name {
				if cause := context.Cause(c.ctx); !errors.Is(cause, errEvicted) {
					t.Fatalf("step %d: %s ended by %v", i, n, cause)
				}
				evicted = append(evicted, n)
			}
		}
		if got := strings.Join(evicted, ","); got != step.evicted {
			t.Fatalf("step %d, %s %s: evicted %q, want %q (%s)", i, step.op, step.name, got, step.evicted, gateState(g))
		}
	}
}

// tapCall taps a call of the kind op names on a fresh stream context.
func tapCall(g *gate, op string) (*gateCall, error) {
	info := &tap.Info{FullMethodName: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", Header: metadata.MD{}}
	switch op {
	case "tap":
		info.Header["authorization"] = []string{"Bearer tok"}
	case "anon":
		info.FullMethodName = healthpb.Health_Check_FullMethodName
	}
	stream, end := context.WithCancel(context.Background())
	ctx, err := g.tap(stream, info)
	if err != nil {
		end()
		return nil, err
	}
	return &gateCall{end: end, ctx: ctx}, nil
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return status.Code(err).String()
}

// gateState describes g's pools.
func gateState(g *gate) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("anon %d (%d waiting), authed %d (%d waiting)",
		g.pools[0].calls, g.pools[0].waiting.Len(), g.pools[1].calls, g.pools[1].waiting.Len())
}

// waitGate polls ok for up to 5 s.
func waitGate(t *testing.T, g *gate, ok func() bool) {
	t.Helper()
	testutil.WaitForErr(t, 5*time.Second, "the gate's pools", func() error {
		if !ok() {
			return errors.New(gateState(g))
		}
		return nil
	})
}

// TestGateMessageTimeout: calls whose message has not arrived
// msgTimeout after their headers are ended (one timer serves them all);
// a call whose message arrived is not.
func TestGateMessageTimeout(t *testing.T) {
	g := newGate(nil, 16, 4, 1, 50*time.Millisecond)
	var cs []*gateCall
	for i := 0; i < 3; i++ {
		c, err := tapCall(g, "tap")
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	g.arrived(cs[1].ctx)
	waitGate(t, g, func() bool { return cs[2].ctx.Err() != nil })
	for i, want := range []error{errNoMessage, nil, errNoMessage} {
		if got := context.Cause(cs[i].ctx); got != want {
			t.Errorf("call %d: ended by %v, want %v", i, got, want)
		}
	}
	// A call admitted later is timed out too: the timer is armed again.
	c, err := tapCall(g, "tap")
	if err != nil {
		t.Fatal(err)
	}
	waitGate(t, g, func() bool { return c.ctx.Err() != nil })
	for _, c := range append(cs, c) {
		c.end()
	}
	waitGate(t, g, func() bool { return gateState(g) == "anon 0 (0 waiting), authed 0 (0 waiting)" })
}
