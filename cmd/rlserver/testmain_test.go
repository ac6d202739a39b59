package main

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestMain silences go-redis's own log (a line per failed dial of its
// pools, hundreds after each kill -9): the tests count and report the
// errors their clients see, and CI keeps only the end of the output, where
// that noise buried the failing test's own report.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLog{})
	os.Exit(m.Run())
}

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}
