package server

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/slots"
)

// moving is a Cluster's error for a slot between two leaders.
type moving struct{}

func (moving) Error() string   { return "TRYAGAIN the slot is moving to another node; retry" }
func (moving) Transient() bool { return true }

// TestHeldWhileSlotMoves: a keyed command whose slot is between two
// leaders (Route answers a transient error) is held, not refused — on an
// event loop by handing the connection to a goroutine — and answered once
// the slot settles: served here, or MOVED to the node that now serves it.
// Pipelined replies keep their order, other connections are served
// meanwhile, MULTI's queueing and EXEC are held alike, and a hold that
// outlasts MaxHold answers the transient error itself.
func TestHeldWhileSlotMoves(t *testing.T) {
	held := slots.Of([]byte("{h}"))
	f := newFakeCluster(ClusterView{})
	_, addr := startServer(t, Config{Limiter: f, Clock: fakeClock(), MaxHold: 2 * time.Second})
	f.setView(soloView(t, addr))
	var state atomic.Int32   // 0 moving, 1 served here, 2 moved away
	var holding atomic.Int64 // the times Route answered moving
	f.setRoute(func(slot int) error {
		if slot != held {
			return nil
		}
		switch state.Load() {
		case 0:
			holding.Add(1)
			return moving{}
		case 2:
			return errors.New("MOVED " + strconv.Itoa(held) + " 127.0.0.2:7002")
		}
		return nil
	})
	settle := func(to int32, after time.Duration) {
		go func() {
			time.Sleep(after)
			state.Store(to)
		}()
	}
	c, bystander := dialRaw(t, addr), dialRaw(t, addr)

	// Held, then served here: the reply, after the move.
	start := time.Now()
	settle(1, 100*time.Millisecond)
	c.roundTrip(resp("RL.CHECK", "{h}k", "fixed", "5", "1m"), ints(1, 5, 4, 0, 60000))
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("answered after %v, before the slot settled", d)
	}

	// Pipelined around a held command, with a bystander served meanwhile
	// (on a new connection: on an event loop, the one above now has a
	// goroutine of its own): the slot settles only once the bystander has
	// its reply, so a bystander that waited for the held command would
	// wait until MaxHold, and the held command would answer the transient
	// error.
	c = dialRaw(t, addr)
	state.Store(0)
	before := holding.Load()
	if _, err := c.nc.Write([]byte(resp("PING") + resp("RL.CHECK", "{h}k", "fixed", "5", "1m") + resp("PING"))); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the RL.CHECK to be held", func() bool { return holding.Load() > before })
	bystander.roundTrip(resp("PING"), "+PONG\r\n")
	state.Store(1)
	c.roundTrip("", "+PONG\r\n"+ints(1, 5, 3, 0, 60000)+"+PONG\r\n")

	// Held, then moved away: MOVED, never TRYAGAIN.
	state.Store(0)
	settle(2, 50*time.Millisecond)
	c.roundTrip(resp("RL.CHECK", "{h}k", "fixed", "5", "1m"), "-MOVED "+strconv.Itoa(held)+" 127.0.0.2:7002\r\n")

	// MULTI: the queued command is held, then QUEUED; EXEC is held too.
	state.Store(1)
	c.roundTrip(resp("MULTI"), "+OK\r\n")
	state.Store(0)
	settle(1, 50*time.Millisecond)
	c.roundTrip(resp("RL.CHECK", "{h}k", "fixed", "5", "1m"), "+QUEUED\r\n")
	state.Store(0)
	settle(1, 50*time.Millisecond)
	c.roundTrip(resp("EXEC"), "*1\r\n"+ints(1, 5, 2, 0, 60000))

	// A move that outlasts MaxHold: the transient error itself.
	state.Store(0)
	start = time.Now()
	c.roundTrip(resp("RL.CHECK", "{h}k", "fixed", "5", "1m"), "-"+moving{}.Error()+"\r\n")
	if d := time.Since(start); d < 2*time.Second || d > 10*time.Second {
		t.Fatalf("a hold that never settles answered after %v, want MaxHold (2 s)", d)
	}
	state.Store(1)
	c.roundTrip(resp("RL.PEEK", "{h}k", "fixed", "5", "1m"), ints(1, 5, 2, 0, 60000))
}

// nudgingCluster is a fakeCluster whose node has just taken a group over.
type nudgingCluster struct {
	*fakeCluster
	epoch  atomic.Uint64
	recent atomic.Bool
	addr   string
}

func (n *nudgingCluster) Takeover() (uint64, bool) { return n.epoch.Load(), n.recent.Load() }
func (n *nudgingCluster) RESPAddr() string         { return n.addr }

// TestTakeoverNudgesClients: for a while after the node took a group over
// from a lost leader, the first keyed command of each connection is
// answered MOVED to this node itself — a cluster client then reloads its
// slot map, and stops sending the lost node's slots to a dead address —
// and served when it comes again; connections from one host are nudged
// at most once per nudgeGap, so that the client's retry, on whichever
// connection, is served; MULTI's commands and keyless ones are never
// nudged, nor anything once the takeover is no longer recent.
func TestTakeoverNudgesClients(t *testing.T) {
	n := &nudgingCluster{fakeCluster: newFakeCluster(ClusterView{})}
	_, addr := startServer(t, Config{Limiter: n, Clock: fakeClock()})
	n.addr = addr
	n.setView(soloView(t, addr))
	key := "{n}k"
	moved := "-MOVED " + strconv.Itoa(slots.Of([]byte(key))) + " " + addr + "\r\n"
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.roundTrip(resp("RL.CHECK", key, "fixed", "5", "1m"), ints(1, 5, 4, 0, 60000)) // no takeover yet

	n.epoch.Store(1)
	n.recent.Store(true)
	a.roundTrip(resp("PING"), "+PONG\r\n")                                          // keyless: not nudged
	a.roundTrip(resp("RL.CHECK", key, "fixed", "5", "1m"), moved)                   // nudged, nothing charged
	b.roundTrip(resp("RL.CHECK", key, "fixed", "5", "1m"), ints(1, 5, 3, 0, 60000)) // same host, within the gap
	a.roundTrip(resp("RL.CHECK", key, "fixed", "5", "1m"), ints(1, 5, 2, 0, 60000)) // once per takeover
	time.Sleep(nudgeGap)
	b.roundTrip(resp("MULTI"), "+OK\r\n")
	b.roundTrip(resp("RL.CHECK", key, "fixed", "5", "1m"), "+QUEUED\r\n") // not in MULTI
	b.roundTrip(resp("EXEC"), "*1\r\n"+ints(1, 5, 1, 0, 60000))
	b.roundTrip(resp("RL.PEEK", key, "fixed", "5", "1m"), moved) // its first keyed command outside MULTI

	n.epoch.Store(2) // another group taken over, but no longer recent
	n.recent.Store(false)
	time.Sleep(nudgeGap)
	a.roundTrip(resp("RL.PEEK", key, "fixed", "5", "1m"), ints(1, 5, 1, 0, 60000))
}
