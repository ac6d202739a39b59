package server_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/shards"
)

// TestShutdownBeforeServe: a Shutdown that runs before Serve has its
// listener still stops Serve (it used to block in Accept for ever).
func TestShutdownBeforeServe(t *testing.T) {
	s := server.New(server.Config{Limiter: shards.New(1)})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, server.ErrServerClosed) {
			t.Fatalf("Serve returned %v, want ErrServerClosed", err)
		}
	case <-time.After(5 * time.Second):
		ln.Close()
		t.Fatal("Serve did not return after an earlier Shutdown")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("the listener is still open")
	}
}
