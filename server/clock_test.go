package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestInfoClockOffset: INFO rlserver shows Config.ClockOffset in whole ms
// (0 without one), and TIME answers the Config.Clock, on which every
// command is decided.
func TestInfoClockOffset(t *testing.T) {
	for _, tc := range []struct {
		offset func() int64
		want   string
	}{
		{nil, "clock_offset_ms:0\r\n"},
		{func() int64 { return int64(time.Hour) }, "clock_offset_ms:3600000\r\n"},
		{func() int64 { return -int64(24*time.Hour) - 5e5 }, "clock_offset_ms:-86400000\r\n"},
	} {
		_, addr := startServer(t, Config{Clock: fakeClock(), ClockOffset: tc.offset})
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		info, err := c.Info(context.Background(), "rlserver").Result()
		if err != nil || !strings.Contains(info, tc.want) {
			t.Fatalf("INFO rlserver: %v\n%s\nwant %q", err, info, tc.want)
		}
		if tm, err := c.Time(context.Background()).Result(); err != nil || tm.UnixNano() != t0 {
			t.Fatalf("TIME: %v %v, want the Clock's %v", tm, err, time.Unix(0, t0))
		}
	}
}
