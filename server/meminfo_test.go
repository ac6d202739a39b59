package server

import (
	"strconv"
	"strings"
	"testing"
)

// TestInfoMemoryCountsTheHeap: with Config.HeapMemory, INFO's used_memory
// is the key state, the connections and the rest of the live heap
// (used_memory_overhead), and used_memory_peak the largest live heap seen;
// without it the peak is at least used_memory and the overhead 0.
func TestInfoMemoryCountsTheHeap(t *testing.T) {
	for _, tc := range []struct {
		name           string
		heap           func() (int64, int64)
		overhead, peak int64 // peak -1: at least used_memory
	}{
		{"without", nil, 0, -1},
		{"with", func() (int64, int64) { return 5 << 20, 1 << 40 }, 5 << 20, 1 << 40},
		{"peak below used", func() (int64, int64) { return 7, 1 }, 7, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startServer(t, Config{Clock: fakeClock(), HeapMemory: tc.heap})
			c := dialRaw(t, addr)
			info := roundTrip(t, c, resp("INFO", "memory"))
			f := map[string]int64{}
			for _, line := range strings.Split(info, "\r\n") {
				if k, v, ok := strings.Cut(line, ":"); ok {
					f[k], _ = strconv.ParseInt(v, 10, 64)
				}
			}
			used, state, clients := f["used_memory"], f["used_memory_state"], f["used_memory_clients"]
			overhead, peak := f["used_memory_overhead"], f["used_memory_peak"]
			if overhead != tc.overhead || used != state+clients+overhead {
				t.Errorf("used_memory %d, state %d, clients %d, overhead %d; want overhead %d and used their sum\n%s",
					used, state, clients, overhead, tc.overhead, info)
			}
			if want := tc.peak; (want < 0 && peak != used) || (want >= 0 && peak != want) {
				t.Errorf("used_memory_peak %d (used_memory %d), want %d\n%s", peak, used, want, info)
			}
		})
	}
}
