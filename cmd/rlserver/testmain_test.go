package main

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestMain silences go-redis's own log (a line per failed dial of its
// pools, hundreds after each kill -9): the tests count and report the
// errors their clients see, and CI keeps only the end of the output, where
// that noise buried the failing test's own report. It makes binDir, where
// the binaries are built once for the whole run, and removes it and the
// test image after.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLog{})
	dir, err := os.MkdirTemp("", "rlserver-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	prebuilds.Wait()
	testImage.remove()
	os.RemoveAll(dir)
	os.Exit(code)
}

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}
