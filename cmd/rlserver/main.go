// Command rlserver is a rate-limiter server that speaks the Redis protocol.
// Run it with --help for its flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	cfg, err := loadConfig(os.Args[1:], os.Getenv, os.Stdout)
	if errors.Is(err, errHelp) || errors.Is(err, errVersion) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlserver:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "rlserver:", err)
		os.Exit(1)
	}
}
