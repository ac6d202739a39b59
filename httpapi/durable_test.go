package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/httpapi"
	"github.com/rlserver/rlserver/shards"
)

// gate is an httpapi.Durable whose Settle waits until the test opens it
// (for checks, in strong mode only).
type gate struct {
	strong bool
	mu     sync.Mutex
	calls  int
	open   chan struct{}
	err    error
}

func (g *gate) Settle(ctx context.Context, change bool) error {
	if !change && !g.strong {
		return nil
	}
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	select {
	case <-g.open:
		return g.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// answered sends the request in the background and returns a channel that
// receives its reply.
func answered(t *testing.T, method, url, body string) chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- do(t, method, url, body, "") }()
	return ch
}

func waitReply(t *testing.T, ch chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	return reply{}
}

// TestAnswersWaitForTheLog: a rule change is answered only after Settle
// returns, in either mode; a check waits in strong mode only; a Settle
// error (the log refuses writes) is a 503.
func TestAnswersWaitForTheLog(t *testing.T) {
	for _, strong := range []bool{false, true} {
		g := &gate{strong: strong, open: make(chan struct{})}
		store := shards.New(4)
		srv := httptest.NewServer(httpapi.New(httpapi.Config{Checker: store, Rules: store, Durable: g}))
		rule := `{"id":"r","target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":5,"window":"1m"}`
		put := answered(t, "PUT", srv.URL+"/rules/r", rule)
		check := answered(t, "POST", srv.URL+"/v1/check", `{"key":"k","algo":"fixed","limit":5,"window":"60"}`)
		time.Sleep(50 * time.Millisecond)
		select {
		case r := <-put:
			t.Fatalf("strong=%v: PUT /rules answered %d before the log took it", strong, r.status)
		default:
		}
		if !strong {
			expect(t, "fast check", waitReply(t, check), http.StatusOK, `"allowed":true`)
		}
		close(g.open)
		expect(t, "PUT /rules", waitReply(t, put), http.StatusCreated, `"id":"r"`)
		if strong {
			expect(t, "strong check", waitReply(t, check), http.StatusOK, `"allowed":true`)
		}
		if want := map[bool]int{false: 1, true: 2}[strong]; g.count() != want {
			t.Fatalf("strong=%v: %d waits, want %d", strong, g.count(), want)
		}
		g.err = errors.New("MISCONF the log refuses writes: disk full")
		expect(t, "DELETE while the log refuses", do(t, "DELETE", srv.URL+"/rules/r", "", ""),
			http.StatusServiceUnavailable, "MISCONF")
		srv.Close()
	}
}
