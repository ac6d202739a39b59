package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/server"
)

// byteSize is a flag value for a number of bytes written as Redis writes
// them: a bare number, or one with a unit, k (1000), kb (1024), m, mb, g
// or gb, in any case ("256mb", "2gb", "1000000").
type byteSize int64

// String returns the size in bytes.
func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Set parses s.
func (b *byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}}
	lower, mul := strings.ToLower(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			lower, mul = strings.TrimSuffix(lower, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(lower, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, fmt.Errorf("want a number of bytes such as 256mb, 2gb or 1000000")
	}
	return n * mul, nil
}

// maxBuffered returns the budget for requests larger than usual (see
// server.Config.MaxBuffered): the default, or a quarter of --maxmemory if
// that is smaller, but room for two of the largest requests.
func maxBuffered(maxMemory int64) int64 {
	if maxMemory <= 0 {
		return server.DefaultMaxBuffered
	}
	return max(min(server.DefaultMaxBuffered, maxMemory/4), 2*server.DefaultMaxRequest)
}

// limitHeap sets the Go runtime's soft memory limit a little above
// --maxmemory (an eighth more, and 32 MiB for the runtime and the rest),
// so that the garbage collector works harder rather than let the heap
// grow to twice what is live (the key state is mostly pointer-free pages,
// cheap to collect), unless GOMEMLIMIT already sets one.
func limitHeap(maxMemory int64, log *slog.Logger) {
	if maxMemory <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := maxMemory + maxMemory/8 + 32<<20
	debug.SetMemoryLimit(limit)
	log.Info("heap limited for --maxmemory", "maxmemory", maxMemory, "go_memory_limit", limit)
}
