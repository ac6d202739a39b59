package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/internal/testutil"
)

// The kill -9 tests: 16 clients check keys of all six algorithms against
// a real rlserver; the test kills it with SIGKILL under that load,
// restarts it on the same directory and compares, key by key, what the
// clients were told was allowed (the tally) with what the restored state
// has counted (limit - remaining, read with RL.PEEK).
//
// Limits are large and windows 366 days, so no key fills up and refill
// over the test's seconds is below one request: limit - remaining is then
// exactly the cost admitted. A key may count more than its tally by the
// one request its client had in flight when the server died (admitted,
// never acknowledged).

const (
	crashClients = 16
	crashKeys    = 4 // per client and algorithm
	crashLimit   = 100000
	crashWindow  = testutil.NoRollover
)

var crashAlgos = []string{"fixed", "sliding", "log", "token", "leaky", "gcra"}

// crashKey is one key's client-side record.
type crashKey struct {
	name, algo string
	tally      int64       // allowed replies received
	inflight   int64       // 1 while a request is unanswered
	acks       []time.Time // when each allowed reply arrived
}

type crashLoad struct {
	keys  [][]*crashKey // by client
	stop  atomic.Bool
	wg    sync.WaitGroup
	total atomic.Int64
}

// doer is a go-redis client, plain or cluster.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
	Close() error
}

// startLoad starts the clients against addr.
func startLoad(t *testing.T, addr string) *crashLoad {
	return startLoadWith(t, func() doer {
		return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1, ReadTimeout: 5 * time.Second})
	})
}

// startLoadWith starts the clients, each on a client from newClient.
func startLoadWith(t *testing.T, newClient func() doer) *crashLoad {
	l := &crashLoad{keys: make([][]*crashKey, crashClients)}
	for c := range l.keys {
		for _, algo := range crashAlgos {
			for k := 0; k < crashKeys; k++ {
				l.keys[c] = append(l.keys[c], &crashKey{name: fmt.Sprintf("crash:%s:%d:%d", algo, c, k), algo: algo})
			}
		}
		l.wg.Add(1)
		go l.client(newClient(), l.keys[c])
	}
	return l
}

func (l *crashLoad) client(rdb doer, keys []*crashKey) {
	defer l.wg.Done()
	defer rdb.Close()
	for i := 0; !l.stop.Load(); i++ {
		k := keys[i%len(keys)]
		k.inflight = 1
		v, err := rdb.Do(context.Background(), "RL.CHECK", k.name, k.algo, crashLimit, crashWindow).Slice()
		if err != nil {
			return // the server is gone: this request stays in flight
		}
		k.inflight = 0
		l.total.Add(1)
		if v[0] == int64(1) {
			k.tally++
			k.acks = append(k.acks, time.Now())
		}
	}
}

// crash runs the load for d, kills the server, and returns the moment of
// the kill.
func (l *crashLoad) crash(t *testing.T, p *proc, d time.Duration) time.Time {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	killed := time.Now()
	p.kill()
	l.stop.Store(true)
	l.wg.Wait()
	if l.total.Load() < 1000 {
		t.Fatalf("only %d checks before the kill: the test proves little", l.total.Load())
	}
	return killed
}

// compare reads each key's restored count from q and returns the total
// missing (admitted per the tally, absent from the state) and the total
// tally; it fails on any key that counts more than its tally plus its
// request in flight.
func (l *crashLoad) compare(t *testing.T, q *proc) (missing, tally int64) {
	return l.compareWith(t, func(args ...any) []any {
		v, _ := q.do(args...).([]any)
		return v
	})
}

// compareWith is compare, reading each key's reply to RL.PEEK with peek.
func (l *crashLoad) compareWith(t *testing.T, peek func(args ...any) []any) (missing, tally int64) {
	for _, keys := range l.keys {
		for _, k := range keys {
			v := peek("RL.PEEK", k.name, k.algo, crashLimit, crashWindow)
			if len(v) != 5 {
				t.Fatalf("RL.PEEK %s: %v", k.name, v)
			}
			used := crashLimit - v[2].(int64)
			if used > k.tally+k.inflight {
				t.Errorf("%s counts %d, but only %d were allowed and %d in flight", k.name, used, k.tally, k.inflight)
			}
			missing += max(0, k.tally-used)
			tally += k.tally
		}
	}
	return missing, tally
}

// lastAck returns when the last allowed reply arrived.
func (l *crashLoad) lastAck() time.Time {
	var last time.Time
	for _, keys := range l.keys {
		for _, k := range keys {
			if n := len(k.acks); n > 0 && k.acks[n-1].After(last) {
				last = k.acks[n-1]
			}
		}
	}
	return last
}

// acksSince counts the allowed replies received after since.
func (l *crashLoad) acksSince(since time.Time) int64 {
	return l.acksBetween(since, time.Now())
}

// acksBetween counts the allowed replies received after from, up to to.
func (l *crashLoad) acksBetween(from, to time.Time) int64 {
	var n int64
	for _, keys := range l.keys {
		for _, k := range keys {
			for _, at := range k.acks {
				if at.After(from) && !at.After(to) {
					n++
				}
			}
		}
	}
	return n
}

// TestKill9StrongForgetsNothing: in strong mode no acknowledged admission
// is missing after kill -9 and restart.
func TestKill9StrongForgetsNothing(t *testing.T) {
	parallel(t)
	bin, dir := buildBinary(t), t.TempDir()
	flags := []string{"--consistency", "strong", "--max-log-limit", fmt.Sprint(crashLimit)}
	p := startProc(t, bin, dir, flags...)
	l := startLoad(t, p.resp)
	l.crash(t, p, 3*time.Second)
	q := startProc(t, bin, dir, flags...)
	missing, tally := l.compare(t, q)
	t.Logf("strong: %d checks, %d allowed, %d missing after kill -9", l.total.Load(), tally, missing)
	if missing != 0 {
		t.Fatalf("strong mode forgot %d acknowledged admissions of %d", missing, tally)
	}
	q.stop()
}

// TestKill9FastForgetsAtMostTheLastIntervals: in fast mode what kill -9
// forgets is bounded by the admissions acknowledged during the last three
// flush intervals of replies: the open epoch and the two sealed ones that
// may be in flight (cluster.maxLag); when the log falls further behind,
// replies wait, so the bound is counted back from the last reply, however
// long a stall of the disk before the kill.
func TestKill9FastForgetsAtMostTheLastIntervals(t *testing.T) {
	alone(t)
	bin, dir := buildBinary(t), t.TempDir()
	const interval = 100 * time.Millisecond
	flags := []string{"--consistency", "fast", "--flush-interval", interval.String(), "--max-log-limit", fmt.Sprint(crashLimit)}
	p := startProc(t, bin, dir, flags...)
	l := startLoad(t, p.resp)
	l.crash(t, p, 3*time.Second)
	q := startProc(t, bin, dir, flags...)
	missing, tally := l.compare(t, q)
	window := 3 * interval
	bound := l.acksSince(l.lastAck().Add(-window))
	t.Logf("fast: %d checks, %d allowed, %d missing after kill -9; bound %d (allowed within %s of the last reply)",
		l.total.Load(), tally, missing, bound, window)
	if missing > bound {
		t.Fatalf("fast mode forgot %d admissions, more than the %d acknowledged within %s of the last reply", missing, bound, window)
	}
	if bound >= tally/2 {
		t.Fatalf("the bound (%d of %d) says nothing: the load was too short", bound, tally)
	}
	q.stop()
}
