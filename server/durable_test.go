package server

import (
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/shards"
)

// heldStore is a Limiter that is also a Committer whose commits the test
// makes: every change is pending until commit().
type heldStore struct {
	*shards.Store
	strong bool

	mu        sync.Mutex
	open      uint64
	committed uint64
	err       error
	kicks     int
	lagSeq    uint64 // fast mode: replies wait for this while it is not committed
	listeners []func()
}

func newHeldStore(strong bool) *heldStore {
	return &heldStore{Store: shards.New(4), strong: strong, open: 1}
}

func (h *heldStore) Strong() bool { return h.strong }

func (h *heldStore) Pending() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

func (h *heldStore) Committed(seq uint64) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.committed >= seq {
		return true, nil
	}
	return false, h.err
}

func (h *heldStore) Kick() {
	h.mu.Lock()
	h.kicks++
	h.mu.Unlock()
}

func (h *heldStore) OnCommit(fn func()) {
	h.mu.Lock()
	h.listeners = append(h.listeners, fn)
	h.mu.Unlock()
}

// commit commits every change made so far, or fails them with err.
func (h *heldStore) commit(err error) {
	h.mu.Lock()
	if err == nil {
		h.committed = h.open
		h.open++
	}
	h.err = err
	ls := h.listeners
	h.mu.Unlock()
	for _, fn := range ls {
		fn()
	}
}

// seal closes the epoch open now, as a flush does: its changes are on
// their way to the log, not committed.
func (h *heldStore) seal() {
	h.mu.Lock()
	h.open++
	h.mu.Unlock()
}

func (h *heldStore) Lagging() (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lagSeq, h.lagSeq > h.committed
}

func (h *heldStore) kicked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.kicks
}

// send writes req without reading.
func (c *rawConn) send(req string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, req); err != nil {
		c.t.Fatal(err)
	}
}

// expectNothing asserts that no reply byte arrives within d.
func (c *rawConn) expectNothing(d time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	if b, err := c.rd.Peek(1); err == nil {
		c.t.Fatalf("a reply came before its commit: %q", b)
	}
}

// expect reads exactly want.
func (c *rawConn) expect(want string) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	n, err := io.ReadFull(c.rd, got)
	if err != nil || string(got) != want {
		c.t.Fatalf("got %q (err %v), want %q", got[:n], err, want)
	}
}

var check = resp("RL.CHECK", "k", "fixed", "10", "60")

// TestStrongRepliesWaitForTheCommit: in strong mode a pipelined batch of
// checks is answered, in order, only after its changes commit; another
// client is served meanwhile (the event loop does not block); a batch sent
// while the first waits is answered after the next commit.
func TestStrongRepliesWaitForTheCommit(t *testing.T) {
	h := newHeldStore(true)
	_, addr := startServer(t, Config{Limiter: h, Clock: fakeClock()})
	c := dialRaw(t, addr)
	c.send(check + check + check)
	c.expectNothing(100 * time.Millisecond)
	if h.kicked() == 0 {
		t.Fatal("the held batch did not ask for a commit")
	}
	bystander := dialRaw(t, addr)
	bystander.roundTrip(resp("PING"), "+PONG\r\n")
	c.send(check) // arrives while the first batch waits
	h.commit(nil)
	c.expect(ints(1, 10, 9, 0, 60000) + ints(1, 10, 8, 0, 60000) + ints(1, 10, 7, 0, 60000))
	c.expectNothing(100 * time.Millisecond)
	h.commit(nil)
	c.expect(ints(1, 10, 6, 0, 60000))
}

// TestLoopAwaitsACommitBriefly: while a connection's replies wait for a
// commit already on its way to the log, the event loop waits for that
// commit rather than for the next request (awaitCommit), but only for a
// moment each round: the loop's other clients are served while the commit
// stalls. (Waiting for the commit alone, the loop answered the first PING,
// read before the wait, and no other.)
func TestLoopAwaitsACommitBriefly(t *testing.T) {
	h := newHeldStore(true)
	_, addr := startServer(t, Config{Limiter: h, Clock: fakeClock(), IOLoops: 1})
	c := dialRaw(t, addr)
	c.send(check)
	c.expectNothing(50 * time.Millisecond)
	h.seal()
	bystander := dialRaw(t, addr)
	for i := 0; i < 5; i++ {
		bystander.roundTrip(resp("PING"), "+PONG\r\n")
	}
	c.expectNothing(50 * time.Millisecond)
	h.commit(nil)
	c.expect(ints(1, 10, 9, 0, 60000))
}

// TestFastModeWaitsForRuleChangesOnly: in fast mode a check is answered at
// once, a rule change or FLUSHALL only after its commit.
func TestFastModeWaitsForRuleChangesOnly(t *testing.T) {
	h := newHeldStore(false)
	_, addr := startServer(t, Config{Limiter: h, Clock: fakeClock()})
	c := dialRaw(t, addr)
	c.roundTrip(check, ints(1, 10, 9, 0, 60000))
	for _, tc := range []struct{ req, want string }{
		{resp("RL.RULE.SET", "r", `{"target":"*","tier":"*","key_type":"ip","algo":"fixed","limit":5,"window":"1m"}`), ":1\r\n"},
		{resp("RL.RULE.DEL", "r"), ":1\r\n"},
		{resp("FLUSHALL"), "+OK\r\n"},
	} {
		c.send(tc.req)
		c.expectNothing(100 * time.Millisecond)
		h.commit(nil)
		c.expect(tc.want)
	}
}

// TestFailedCommitAnswersErrors: when the changes a batch waits for cannot
// be committed, each of its replies is the error, never the decision.
func TestFailedCommitAnswersErrors(t *testing.T) {
	h := newHeldStore(true)
	_, addr := startServer(t, Config{Limiter: h, Clock: fakeClock()})
	c := dialRaw(t, addr)
	c.send(check + resp("RL.PEEK", "k", "fixed", "10", "60"))
	c.expectNothing(50 * time.Millisecond)
	h.commit(errors.New("MISCONF the log refuses writes: disk full"))
	e := "-MISCONF the log refuses writes: disk full\r\n"
	c.expect(e + e)
	// The next batch fails at once while the log refuses.
	c.roundTrip(resp("RL.PEEK", "k", "fixed", "10", "60"), e)
}

// TestHeldRepliesGoOutOnShutdown: a stop lets waiting replies go out once
// their commit comes.
func TestHeldRepliesGoOutOnShutdown(t *testing.T) {
	h := newHeldStore(true)
	s, addr := startServer(t, Config{Limiter: h, Clock: fakeClock()})
	c := dialRaw(t, addr)
	c.send(check)
	c.expectNothing(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(t.Context()) }()
	testutil.WaitFor(t, 5*time.Second, "Shutdown to begin", s.closing.Load)
	c.expectNothing(50 * time.Millisecond)
	h.commit(nil)
	c.expect(ints(1, 10, 9, 0, 60000))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestExecWaitsAsOneBatch: in strong mode EXEC's reply (and the MULTI and
// QUEUED replies before it) wait for the commit of the queued changes; if
// it fails, each of the batch's three replies is the error.
func TestExecWaitsAsOneBatch(t *testing.T) {
	h := newHeldStore(true)
	_, addr := startServer(t, Config{Limiter: h, Clock: fakeClock()})
	c := dialRaw(t, addr)
	c.send(resp("MULTI") + check + resp("EXEC"))
	c.expectNothing(100 * time.Millisecond)
	h.commit(nil)
	c.expect("+OK\r\n+QUEUED\r\n*1\r\n" + ints(1, 10, 9, 0, 60000))
	c.send(resp("MULTI") + check + resp("EXEC"))
	c.expectNothing(50 * time.Millisecond)
	h.commit(errors.New("MISCONF the log refuses writes: disk full"))
	e := "-MISCONF the log refuses writes: disk full\r\n"
	c.expect(e + e + e)
}

// TestFastModeWaitsWhenTheLogLags: in fast mode a check is answered at
// once while the log keeps up, and waits when it has fallen behind, until
// it catches up.
func TestFastModeWaitsWhenTheLogLags(t *testing.T) {
	h := newHeldStore(false)
	_, addr := startServer(t, Config{Limiter: h, Clock: fakeClock()})
	c := dialRaw(t, addr)
	c.roundTrip(check, ints(1, 10, 9, 0, 60000))
	h.mu.Lock()
	h.lagSeq = h.open
	h.mu.Unlock()
	c.send(check)
	c.expectNothing(100 * time.Millisecond)
	if h.kicked() != 0 {
		t.Fatal("a lagging fast-mode reply kicked the applier")
	}
	h.commit(nil)
	c.expect(ints(1, 10, 8, 0, 60000))
	c.roundTrip(check, ints(1, 10, 7, 0, 60000))
}

// metaRules is a rule store whose changes are committed when its calls
// return (a cluster's meta group): RuleCommitter.
type metaRules struct{ *shards.Store }

func (metaRules) CommitsRuleChanges() bool { return true }

// TestCommittedRuleChangeIsNotHeld: a cluster's rule and block changes are
// committed in the meta group when their calls return. Their replies do
// not wait for the data groups' log, whose error (a lead lost meanwhile:
// "TRYAGAIN ... before the change was committed") would be a lie about a
// committed change; after a SIGSTOP of a cluster's meta leader, RL.RULE.SET
// answered that for a rule every node then held. A rule store that does
// not commit its own changes (a standalone node's journal) still has its
// rule changes' replies wait, and carry the log's error.
func TestCommittedRuleChangeIsNotHeld(t *testing.T) {
	lost := errors.New("TRYAGAIN the group's leadership moved before the change was committed; retry")
	rule := resp("RL.RULE.SET", "r1", `{"target":"/x","tier":"*","key_type":"user","algo":"fixed","limit":5,"window":"1m"}`)
	for _, strong := range []bool{false, true} {
		h := newHeldStore(strong)
		h.commit(lost) // every change made from now on is answered lost
		_, addr := startServer(t, Config{Limiter: h, Rules: metaRules{shards.New(4)}, Clock: fakeClock()})
		c := dialRaw(t, addr)
		c.roundTrip(rule, ":1\r\n")
		c.roundTrip(resp("RL.RULE.GET", "r1"), "$118\r\n"+`{"id":"r1","target":"/x","tier":"*","key_type":"user","algo":"fixed","limit":5,"window":"1m","burst":0,"shadow":false}`+"\r\n")
		c.roundTrip(resp("RL.BLOCK", "ip=1.2.3.4", "60"), "+OK\r\n")
		c.roundTrip(resp("RL.RULE.DEL", "r1"), ":1\r\n")

		journaled := newHeldStore(strong)
		journaled.commit(lost)
		_, addr = startServer(t, Config{Limiter: journaled, Clock: fakeClock()})
		c = dialRaw(t, addr)
		c.roundTrip(rule, "-"+lost.Error()+"\r\n")
	}
}
