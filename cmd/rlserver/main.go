// Command rlserver is a rate-limiter server that speaks the Redis protocol.
// Run it with --help for its flags; `rlserver health` asks a running
// node whether it is ready (the container image's health check), and
// `rlserver rls-check` sends one ShouldRateLimit to a rate limit service.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// startGrace is how long a signal received during the start waits for the
// start to give up by itself (opening the database and replaying the log
// cannot be interrupted) before the process exits anyway: nothing has been
// acknowledged yet, and the database is crash-safe.
const startGrace = 5 * time.Second

// abandonStart exits the process if ctx ends (SIGTERM, SIGINT) before
// started is closed and the start has not ended grace later, so that a
// start that cannot finish (a disk that fills during it) never ignores a
// signal.
func abandonStart(ctx context.Context, started <-chan struct{}, grace time.Duration) {
	select {
	case <-started:
		return
	case <-ctx.Done():
	}
	select {
	case <-started:
	case <-time.After(grace):
		fmt.Fprintf(os.Stderr, "rlserver: a signal came during the start, which did not end within %s; exiting\n", grace)
		os.Exit(1)
	}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "health" {
		os.Exit(runHealth(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "rls-check" {
		os.Exit(runRLSCheck(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	cfg, err := loadConfig(os.Args[1:], os.Getenv, os.Stdout)
	if errors.Is(err, errHelp) || errors.Is(err, errVersion) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlserver:", err)
		os.Exit(2)
	}
	cfg.process = true
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	started := make(chan struct{})
	go abandonStart(ctx, started, startGrace)
	if err := run(ctx, cfg, os.Stderr, func(net.Addr, net.Addr) { close(started) }); err != nil {
		fmt.Fprintln(os.Stderr, "rlserver:", err)
		os.Exit(1)
	}
}
