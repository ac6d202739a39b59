package server

import (
	"context"
	"log/slog"
	"sync"
)

// logThrottle lets through at most burst log lines of one kind per
// interval, so that a client that sends garbage in a loop cannot fill the
// disk with lines about it, and counts the lines it holds back: the next
// line it lets through reports them. Time is the server's clock
// (Config.Clock), in ns. It is safe for concurrent use.
type logThrottle struct {
	interval int64
	burst    int

	mu      sync.Mutex
	start   int64 // of the current interval
	n       int   // lines let through in it
	dropped int64 // lines held back since the last one let through
}

// allow reports whether a line may be logged at now and, if so, how many
// were held back before it.
func (l *logThrottle) allow(now int64) (ok bool, dropped int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now-l.start >= l.interval {
		l.start, l.n = now, 0
	}
	if l.n >= l.burst {
		l.dropped++
		return false, 0
	}
	l.n++
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// Throttles of the lines that clients can cause.
func newThrottles() throttles {
	return throttles{
		client:   logThrottle{interval: 10e9, burst: 5},
		security: logThrottle{interval: 60e9, burst: 1}, // as Redis
		accept:   logThrottle{interval: 10e9, burst: 5},
	}
}

// throttles are the server's log throttles: protocol errors and failed
// reads, cross-protocol attempts, and failed accepts.
type throttles struct {
	client, security, accept logThrottle
}

// logThrottled logs msg at level through t, with the number of lines t
// held back before it, if any.
func (s *Server) logThrottled(t *logThrottle, level slog.Level, msg string, args ...any) {
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	ok, dropped := t.allow(s.cfg.Clock())
	if !ok {
		return
	}
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	s.log.Log(context.Background(), level, msg, args...)
}
