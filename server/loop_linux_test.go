package server

import (
	"bufio"
	"context"
	"crypto/sha1"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/libscripts"
	"github.com/rlserver/rlserver/internal/testutil"
	"github.com/rlserver/rlserver/shards"
)

// TestLoopHandsOverAClientThatDoesNotRead: a client that pipelines far
// more replies than the socket buffers hold, without reading, makes the
// event loop hand its connection to a goroutine; it then gets every reply
// in order, the connection keeps working, and another client is served
// all along.
func TestLoopHandsOverAClientThatDoesNotRead(t *testing.T) {
	s, addr := startServer(t, Config{Clock: fakeClock(), IOLoops: 1})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	// 64 KiB replies, 400 of them: 26 MB, more than the socket buffers
	// hold (the send buffer grows to tcp_wmem's 4 MiB at most, and a
	// receive buffer its reader does not drain does not grow).
	payload := strings.Repeat("x", 64<<10)
	const n = 400
	writeDone := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < n && err == nil; i++ {
			_, err = io.WriteString(nc, resp("ECHO", fmt.Sprintf("%04d", i)+payload))
		}
		writeDone <- err
	}()
	// Wait until the loop gave the connection away, not reading meanwhile.
	testutil.WaitFor(t, 10*time.Second, "the connection handed over to a goroutine", func() bool { return handedOver(s) })
	other := dialRaw(t, addr)
	other.roundTrip(resp("PING"), "+PONG\r\n")
	rd := bufio.NewReaderSize(nc, 128<<10)
	for i := 0; i < n; i++ {
		want := fmt.Sprintf("$%d\r\n%04d%s\r\n", 4+len(payload), i, payload)
		got := make([]byte, len(want))
		if _, err := io.ReadFull(rd, got); err != nil || string(got) != want {
			t.Fatalf("reply %d: %v, %.40q", i, err, got)
		}
	}
	if err := <-writeDone; err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(nc, resp("RL.CHECK", "k", "fixed", "10", "1m")+resp("QUIT")); err != nil {
		t.Fatal(err)
	}
	want := ints(1, 10, 9, 0, 60000) + "+OK\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(rd, got); err != nil || string(got) != want {
		t.Fatalf("after the hand-over: %q, %v; want %q", got, err, want)
	}
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Fatalf("after QUIT: %v, want EOF", err)
	}
}

// handedOver reports whether some connection of s has left its event loop.
func handedOver(s *Server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.nc != nil {
			return true
		}
	}
	return false
}

// TestLoopsServeManyShortConnections: connections opened, used and closed
// from many goroutines at once, so that descriptor numbers are reused
// while other connections are being served, each get their own replies.
func TestLoopsServeManyShortConnections(t *testing.T) {
	s, addr := startServer(t, Config{Clock: fakeClock(), IOLoops: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if err := shortConn(addr, fmt.Sprintf("g%d-%d", g, i)); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	testutil.WaitForErr(t, 5*time.Second, "the connections to close after their clients closed", func() error {
		if n := s.ConnCount(); n != 0 {
			return fmt.Errorf("%d connections still open", n)
		}
		return nil
	})
}

func shortConn(addr, key string) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := resp("ECHO", key) + resp("RL.CHECK", key, "fixed", "3", "1m") + resp("RL.CHECK", key, "fixed", "3", "1m")
	if _, err := io.WriteString(nc, req); err != nil {
		return err
	}
	want := fmt.Sprintf("$%d\r\n%s\r\n", len(key), key) + ints(1, 3, 2, 0, 60000) + ints(1, 3, 1, 0, 60000)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(nc, got); err != nil || string(got) != want {
		return fmt.Errorf("%s: got %q, %v; want %q", key, got, err, want)
	}
	return nil
}

// TestShutdownClosesLoopConnections: Shutdown returns promptly with idle
// and busy connections on the loops, and each client sees its connection
// closed after the replies it was owed.
func TestShutdownClosesLoopConnections(t *testing.T) {
	s, addr := startServer(t, Config{Clock: fakeClock(), IOLoops: 2})
	var conns []*rawConn
	for i := 0; i < 20; i++ {
		c := dialRaw(t, addr)
		c.roundTrip(resp("PING"), "+PONG\r\n")
		conns = append(conns, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for i, c := range conns {
		c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := c.rd.ReadByte(); err != io.EOF {
			t.Fatalf("connection %d after Shutdown: %q, %v; want EOF", i, b, err)
		}
	}
	if n := s.ConnCount(); n != 0 {
		t.Fatalf("%d connections left after Shutdown", n)
	}
}

// TestLoopRunsNativeScripts: an EVALSHA of a limiter library's script runs
// on the event loop, as a command does, and answers as on a connection of
// its own goroutine; one whose arguments its native handler leaves to the
// interpreter (a count that is not a number) runs again, interpreted, on
// the loop, and answers in order as there.
func TestLoopRunsNativeScripts(t *testing.T) {
	incr := libText(t, libscripts.Ulule, "incr")
	sha := fmt.Sprintf("%x", sha1.Sum([]byte(incr)))
	native := resp("EVALSHA", sha, "1", "k", "1", "60000") + resp("EVALSHA", sha, "1", "j", "2", "60000")
	odd := resp("EVALSHA", sha, "1", "k", "x", "60000")
	run := func(loops int, reqs ...string) (string, *Server) {
		s, addr := startServer(t, Config{Clock: fakeClock(), IOLoops: loops})
		c := dialRaw(t, addr)
		c.roundTrip(resp("SCRIPT", "LOAD", incr), "$40\r\n"+sha+"\r\n")
		var got []string
		for _, req := range reqs {
			got = append(got, c.untilPong(req+resp("PING")))
		}
		return strings.Join(got, " | "), s
	}
	// The same requests on a goroutine per connection give the replies
	// wanted.
	reqs := []string{native, native, native + odd + native, native}
	want, _ := run(-1, reqs...)
	if !strings.Contains(want, "-ERR") {
		t.Fatalf("the interpreter's run of odd arguments answered no error: %q", want)
	}
	got, s := run(1, reqs[:2]...)
	if handedOver(s) {
		t.Fatal("a native EVALSHA moved its connection off the event loop")
	}
	if w := strings.Join(strings.Split(want, " | ")[:2], " | "); got != w {
		t.Fatalf("on the loop: %q, want %q", got, w)
	}
	got, s = run(1, reqs...)
	if handedOver(s) {
		t.Fatal("a run that needs the interpreter moved its connection off the event loop")
	}
	if got != want {
		t.Fatalf("on the loop, interpreted too: %q, want %q", got, want)
	}
}

// TestLoopTakenOverFromALongScript: an interpreted script sent alone runs
// on the event loop; one that goes on for long (script.Config.LongRun)
// has another goroutine take the loop over, which serves the loop's other
// connections meanwhile: a PING, the SCRIPT KILL that ends it, a new
// client, and clients that keep counting through it all, every reply in
// order (BUSY, and nothing counted, on the script's shard once it is busy).
// The script's connection goes on with a goroutine of its own.
func TestLoopTakenOverFromALongScript(t *testing.T) {
	s, addr := startServer(t, Config{Clock: fakeClock(), IOLoops: 1, LuaTimeLimit: 50 * time.Millisecond})
	a := dialRaw(t, addr)
	a.roundTrip(resp("EVAL", "return redis.call('INCR', KEYS[1])", "1", "n"), ":1\r\n")
	if handedOver(s) {
		t.Fatal("a short script moved its connection off the event loop")
	}

	// Clients of the same loop that count all along, one request a round
	// trip, so that the loop's rounds have other connections in them.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		c := dialRaw(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("count%d", i)
			for n := 1; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				c.nc.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.WriteString(c.nc, resp("INCR", key)); err != nil {
					errs <- err
					return
				}
				line, err := c.rd.ReadString('\n')
				if strings.HasPrefix(line, "-BUSY ") {
					n-- // the script holds its shard: INCR ran not
					continue
				}
				if want := fmt.Sprintf(":%d\r\n", n); err != nil || line != want {
					errs <- fmt.Errorf("%s: reply %q (%v), want %q", key, line, err, want)
					return
				}
			}
		}()
	}

	if _, err := io.WriteString(a.nc, resp("EVAL", "while true do end", "1", "slow")); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the long script to run", func() bool { return s.scripts.Stats().Interpreted == 2 })
	b := dialRaw(t, addr)
	b.roundTrip(resp("PING"), "+PONG\r\n")
	testutil.WaitForErr(t, 10*time.Second, "SCRIPT KILL to stop the script", func() error {
		b.nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(b.nc, resp("SCRIPT", "KILL")); err != nil {
			return testutil.Stop(err)
		}
		line, err := b.rd.ReadString('\n')
		switch {
		case err != nil:
			return testutil.Stop(err)
		case line == "+OK\r\n":
			return nil
		case strings.HasPrefix(line, "-NOTBUSY"): // not busy yet
			return fmt.Errorf("%q", line)
		}
		return testutil.Stop(fmt.Errorf("SCRIPT KILL: %q", line))
	})
	a.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := a.rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "-ERR Script killed by user with SCRIPT KILL") {
		t.Fatalf("the killed script answered %q (%v)", line, err)
	}
	a.roundTrip(resp("EVAL", "return redis.call('INCR', KEYS[1])", "1", "n"), ":2\r\n")
	if !handedOver(s) {
		t.Fatal("the long script's connection is still on the event loop")
	}
	if n := s.takeovers.Load(); n != 1 {
		t.Fatalf("%d loops taken over, want 1", n)
	}
	dialRaw(t, addr).roundTrip(resp("PING"), "+PONG\r\n")
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLoopTakenOverFromLongScriptsInTurn: four clients of one loop start a
// script that never ends, one after the other: each holds the loop in turn
// until a new goroutine takes it over, which serves a bystander between
// them, and one SCRIPT KILL ends them all.
func TestLoopTakenOverFromLongScriptsInTurn(t *testing.T) {
	st := shards.New(16)
	s, addr := startServer(t, Config{Clock: fakeClock(), IOLoops: 1, LuaTimeLimit: 50 * time.Millisecond, Limiter: st})
	// Keys of shards of their own: a script that would wait for another's
	// shard gets BUSY instead of running.
	var keys []string
	used := map[uint64]bool{xxhash.Sum64String("seen") % uint64(st.Shards()): true}
	for i := 0; len(keys) < 4; i++ {
		k := fmt.Sprintf("slow%d", i)
		if sh := xxhash.Sum64String(k) % uint64(st.Shards()); !used[sh] {
			used[sh], keys = true, append(keys, k)
		}
	}
	bystander := dialRaw(t, addr)
	var long []*rawConn
	for i, key := range keys {
		c := dialRaw(t, addr)
		c.roundTrip(resp("PING"), "+PONG\r\n") // on the loop
		if _, err := io.WriteString(c.nc, resp("EVAL", "while true do end", "1", key)); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, "the loop taken over", func() bool { return s.takeovers.Load() == uint64(i+1) })
		bystander.roundTrip(resp("INCR", "seen"), fmt.Sprintf(":%d\r\n", i+1))
		long = append(long, c)
	}
	testutil.WaitFor(t, 10*time.Second, "the four scripts busy", func() bool { return len(s.scripts.BusyTags(nil)) == 4 })
	bystander.roundTrip(resp("SCRIPT", "KILL"), "+OK\r\n")
	for i, c := range long {
		c.nc.SetDeadline(time.Now().Add(5 * time.Second))
		if line, err := c.rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "-ERR Script killed by user with SCRIPT KILL") {
			t.Fatalf("script %d answered %q (%v)", i, line, err)
		}
		c.roundTrip(resp("PING"), "+PONG\r\n")
	}
	bystander.roundTrip(resp("INCR", "seen"), ":5\r\n")
}

// TestLoopScriptWaitsOffTheLoop: a script sent to an event loop whose key's
// shard another script holds does not wait there: its connection moves to
// a goroutine of its own to wait, and the loop answers a PING meanwhile,
// before that script has answered anything.
func TestLoopScriptWaitsOffTheLoop(t *testing.T) {
	s, addr := startServer(t, Config{Clock: fakeClock(), IOLoops: 1, LuaTimeLimit: 3 * time.Second})
	holder, waiter, other := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
	if _, err := io.WriteString(holder.nc, resp("EVAL", "while true do end", "1", "k")); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the loop taken over", func() bool { return s.takeovers.Load() == 1 })
	if _, err := io.WriteString(waiter.nc, resp("EVAL", "return redis.call('GET', KEYS[1])", "1", "k")); err != nil {
		t.Fatal(err)
	}
	other.roundTrip(resp("PING"), "+PONG\r\n")
	waiter.nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if b, err := waiter.rd.Peek(1); err == nil {
		t.Fatalf("the waiting script answered %q before the holder ended", b)
	}
	testutil.WaitForErr(t, 10*time.Second, "SCRIPT KILL to stop the holder", func() error {
		other.nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(other.nc, resp("SCRIPT", "KILL")); err != nil {
			return testutil.Stop(err)
		}
		line, err := other.rd.ReadString('\n')
		if err != nil || line == "+OK\r\n" {
			return err
		}
		return fmt.Errorf("%q", line)
	})
	holder.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := holder.rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "-ERR Script killed") {
		t.Fatalf("the holder answered %q (%v)", line, err)
	}
	// The waiter got BUSY when the holder turned busy, or ran once it was
	// killed.
	waiter.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := waiter.rd.ReadString('\n'); err != nil || line != "$-1\r\n" && !strings.HasPrefix(line, "-BUSY ") {
		t.Fatalf("the waiter answered %q (%v)", line, err)
	}
	waiter.roundTrip(resp("EVAL", "return redis.call('GET', KEYS[1])", "1", "k"), "$-1\r\n")
}

// untilPong sends req, which ends with a PING, and returns what comes back
// up to its PONG.
func (c *rawConn) untilPong(req string) string {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.nc, req); err != nil {
		c.t.Fatal(err)
	}
	var b strings.Builder
	for !strings.HasSuffix(b.String(), "+PONG\r\n") {
		line, err := c.rd.ReadString('\n')
		if err != nil {
			c.t.Fatalf("after %q: %v", b.String(), err)
		}
		b.WriteString(line)
	}
	return strings.TrimSuffix(b.String(), "+PONG\r\n")
}

// gateStore holds up the check of key "hold", and the second check of
// keys "a" and "b", until their release channels are closed, so that a
// test can stop an event loop in the middle of a round.
type gateStore struct {
	*shards.Store
	ab                 atomic.Int32
	entered            chan string
	release1, release2 chan struct{}
}

func (g *gateStore) Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error) {
	switch k := string(key); {
	case k == "hold":
		g.entered <- k
		<-g.release1
	case (k == "a" || k == "b") && g.ab.Add(1) == 2:
		g.entered <- k
		<-g.release2
	}
	return g.Store.Check(key, a, p, cost, now)
}

// TestLoopWritesARoundsRepliesTogether: an event loop writes the replies
// of a round at its end, not as each connection's batch ends. Two clients'
// requests become ready while the loop is held in a round before; in the
// next round, the second of them is held up, and the first one's reply
// must not have arrived meanwhile. Both arrive once the round goes on.
func TestLoopWritesARoundsRepliesTogether(t *testing.T) {
	g := &gateStore{Store: shards.New(4), entered: make(chan string, 2),
		release1: make(chan struct{}), release2: make(chan struct{})}
	_, addr := startServer(t, Config{Limiter: g, Clock: fakeClock(), IOLoops: 1})
	a, b, holder := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
	for _, c := range []*rawConn{a, b, holder} {
		c.roundTrip(resp("PING"), "+PONG\r\n") // each connection is on the loop
	}
	check := func(key string) string { return resp("RL.CHECK", key, "fixed", "10", "60") }
	holder.send(check("hold"))
	waitEntered(t, g.entered, "hold")
	a.send(check("a"))
	b.send(check("b"))
	time.Sleep(100 * time.Millisecond) // both requests reach the server's sockets
	close(g.release1)
	holder.expect(ints(1, 10, 9, 0, 60000))
	second := waitEntered(t, g.entered, "a or b")
	first := map[string]*rawConn{"a": b, "b": a}[second]
	first.nc.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	if got, err := first.rd.Peek(1); err == nil {
		t.Fatalf("a reply was written before its round ended: %q", got)
	}
	close(g.release2)
	a.expect(ints(1, 10, 9, 0, 60000))
	b.expect(ints(1, 10, 9, 0, 60000))
}

// waitEntered returns the key that entered a gate, failing after 5s.
func waitEntered(t *testing.T, entered chan string, what string) string {
	t.Helper()
	select {
	case k := <-entered:
		return k
	case <-time.After(5 * time.Second):
		t.Fatalf("no check of %s reached the store", what)
		return ""
	}
}

// TestDefaultIOLoops: without IOLoops, a server runs one loop fewer than
// GOMAXPROCS, at least one.
func TestDefaultIOLoops(t *testing.T) {
	for procs, want := range map[int]int{1: 1, 2: 1, 4: 3, 8: 7} {
		if got := DefaultIOLoops(procs); got != want {
			t.Errorf("DefaultIOLoops(%d) = %d, want %d", procs, got, want)
		}
	}
	t.Setenv("RLSERVER_TEST_IOLOOPS", "") // the default, whatever the pass
	s, addr := startServer(t, Config{Clock: fakeClock()})
	dialRaw(t, addr).roundTrip(resp("PING"), "+PONG\r\n")
	s.mu.Lock()
	n := len(s.loops)
	s.mu.Unlock()
	if want := DefaultIOLoops(runtime.GOMAXPROCS(0)); n != want {
		t.Fatalf("%d event loops at GOMAXPROCS %d, want %d", n, runtime.GOMAXPROCS(0), want)
	}
	// In strong mode, where every reply waits for its commit: one per core.
	for _, strong := range []bool{false, true} {
		s := New(Config{Limiter: newHeldStore(strong), Clock: fakeClock()})
		want := DefaultIOLoops(runtime.GOMAXPROCS(0))
		if strong {
			want = runtime.GOMAXPROCS(0)
		}
		if got := s.defaultIOLoops(); got != want {
			t.Errorf("strong %v: %d loops by default, want %d", strong, got, want)
		}
	}
}
