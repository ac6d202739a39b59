package server

import (
	"errors"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// loop is an event loop: one goroutine serving many plain TCP connections
// through an epoll instance of its own, as Redis does, instead of a
// goroutine per connection. At one request per round trip that saves the
// park and wake of a goroutine per request (see bench/results/README.md).
//
// The loop's goroutine waits for its epoll descriptor with the runtime's
// netpoller (an epoll descriptor is readable while it has ready events),
// so it parks like any goroutine and lets others run. When woken it asks
// the kernel for every ready connection, without blocking, and for each
// reads once, runs the batch read and writes the replies, until no
// connection is ready.
//
// A loop must never block. A connection that would make it block — its
// replies do not fit the socket's send buffer, or it must linger after a
// protocol error — is handed over to a goroutine of its own for the rest
// of its life (handoff); so would a command that must wait, such as one
// that waits for a replicated commit. A script that runs on the loop
// (scriptOnLoop) and goes on for long hands the loop itself to a new
// goroutine (takeOver).
type loop struct {
	s      *Server
	epfd   int             // changed by takeOver, under mu: add reads it under mu
	file   *os.File        // epfd, for the netpoller and Shutdown's deadline
	rc     syscall.RawConn // of file
	events [256]syscall.EpollEvent
	batch  [256]*conn
	more   []*conn // to read again: their last read filled the buffer
	spare  []*conn // more's other buffer
	// The round being served: batch[:nround] from the wait, and again,
	// the connections of more from the round before (see takeOver).
	nround int
	again  []*conn
	idle   []*conn // reap's buffer
	// inRound while the loop serves a round of ready connections: their
	// replies wait in pend and go out together at its end (flushRound).
	inRound bool
	pend    []*conn
	read    int                   // bytes read in the round since pend was last written
	onWake  func(fd uintptr) bool // l.wake, made once

	// Connections whose replies wait for a commit (see durable.go), and
	// the eventfd that the server's commit listener writes to wake the
	// loop while nwaiting > 0.
	evfd     int
	waiting  []*conn
	ready    []*conn // release's scratch
	nwaiting atomic.Int32
	await    *time.Timer // awaitCommit's, made once
	recheck  bool        // awaitCommit saw a commit: release at the next round

	mu    sync.Mutex
	conns []*conn // by descriptor
}

// startLoops starts n event loops; it returns an error if the system
// refuses an epoll instance, and the server then serves every connection
// with a goroutine. Call with s.mu held.
func (s *Server) startLoops(n int) error {
	for i := 0; i < n; i++ {
		l, err := newLoop(s)
		if err != nil {
			for _, l := range s.loops {
				l.file.Close()
			}
			s.loops = nil
			return err
		}
		s.loops = append(s.loops, l)
	}
	loops := s.loops
	s.loopList.Store(&loops)
	for _, l := range s.loops {
		s.wg.Add(1)
		go l.run()
	}
	return nil
}

func newLoop(s *Server) (*loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// Non-blocking, so that os.NewFile hands it to the netpoller.
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	f := os.NewFile(uintptr(epfd), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	evfd, err := newEventFD()
	if err == nil {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(evfd)}
		if err = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, evfd, &ev); err != nil {
			syscall.Close(evfd)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &loop{s: s, epfd: epfd, file: f, rc: rc, evfd: evfd}
	l.onWake = l.wake
	return l, nil
}

// newEventFD returns a non-blocking eventfd.
func newEventFD() (int, error) {
	fd, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// signal wakes the loop to look at its waiting connections. Safe to call
// from any goroutine.
func (l *loop) signal() {
	one := [8]byte{1}
	syscall.Write(l.evfd, one[:]) // EAGAIN: the counter is full, the loop is woken anyway
}

// hold parks c, whose batch's replies wait for a commit, until release
// finds it committed.
func (l *loop) hold(c *conn) {
	c.holding = true
	l.waiting = append(l.waiting, c)
	l.nwaiting.Add(1)
	// A commit between runBatch's check and nwaiting's increment did not
	// signal the loop: have it look once more.
	if ok, err := l.s.committer.Committed(c.waitSeq); ok || err != nil {
		l.signal()
	}
}

// release finishes the batches of waiting connections whose changes are
// committed (or will never be: their replies become the error).
func (l *loop) release() {
	var buf [8]byte
	syscall.Read(l.evfd, buf[:])
	keep, ready := l.waiting[:0], l.ready[:0]
	for _, c := range l.waiting {
		ok, err := l.s.committer.Committed(c.waitSeq)
		if !ok && err == nil {
			keep = append(keep, c)
			continue
		}
		c.replaceReplies(err)
		ready = append(ready, c)
	}
	clear(l.waiting[len(keep):])
	l.waiting = keep
	l.nwaiting.Store(int32(len(keep)))
	for _, c := range ready {
		c.holding = false
		l.finish(c, l.s.finishBatch(c))
	}
	clear(ready)
	l.ready = ready[:0]
}

// adopt moves a new TCP connection onto one of the loops, round robin, and
// reports whether it did; if not, c is untouched and nc still open. The
// loop serves a duplicate of nc's descriptor: nc is closed, which takes
// the original out of the runtime's netpoller, so that readiness is
// reported once, to the loop.
func (s *Server) adopt(c *conn, nc net.Conn) bool {
	if len(s.loops) == 0 {
		return false
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	fd := -1
	var derr error
	if err := rc.Control(func(ofd uintptr) { fd, derr = dupCloexec(int(ofd)) }); err != nil || derr != nil {
		return false
	}
	l := s.loops[s.nextLoop.Add(1)%uint32(len(s.loops))]
	// Set up c before add: the loop may serve it at once.
	c.lp, c.fd, c.nc = l, fd, nil
	c.fdShown.Store(int32(fd))
	c.raw = &rawSocket{fd: uintptr(fd)}
	c.rd.r = c.raw
	if err := l.add(c, fd); err != nil {
		syscall.Close(fd)
		c.lp, c.fd, c.nc, c.raw, c.rd.r = nil, -1, nc, nil, nil
		return false
	}
	nc.Close()
	return true
}

func dupCloexec(fd int) (int, error) {
	nfd, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(nfd), nil
}

// add registers c, whose descriptor is fd, with the loop. The loop may
// serve, and even close, c before add returns.
func (l *loop) add(c *conn, fd int) error {
	l.mu.Lock()
	defer l.mu.Unlock() // and epfd, which takeOver changes under it
	if fd >= len(l.conns) {
		l.conns = append(l.conns, make([]*conn, fd+1-len(l.conns)+len(l.conns)/2)...)
	}
	l.conns[fd] = c
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | epollET, Fd: int32(fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.conns[fd] = nil
		return err
	}
	return nil
}

// forget takes c off the loop: its descriptor stays open.
func (l *loop) forget(c *conn) {
	l.mu.Lock()
	if c.fd < len(l.conns) && l.conns[c.fd] == c {
		l.conns[c.fd] = nil
	}
	l.mu.Unlock()
	syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	c.lp = nil
	l.undefer(c) // its replies stay in out: whoever serves it next writes them
}

// deferFlush keeps c's replies for the end of the round (flushRound).
func (l *loop) deferFlush(c *conn) {
	if !c.deferred {
		c.deferred = true
		l.pend = append(l.pend, c)
	}
}

// flushRound ends a round: it writes the replies of the connections in
// pend, each with one write, after every ready connection was read and
// run, as Redis writes its clients' replies before it waits again. At one
// request per round trip the replies then reach the client together,
// which reads them with fewer wake-ups, and the loop finds more requests
// ready when it looks again, so it parks less often.
func (l *loop) flushRound() {
	l.inRound = false
	l.sendPending()
}

// sendPending writes the replies waiting in pend.
func (l *loop) sendPending() {
	for _, c := range l.pend {
		c.deferred = false
		l.send(c)
	}
	clear(l.pend)
	l.pend = l.pend[:0]
	l.read = 0
}

// noteRead counts n bytes read in the round. Past a full read's worth
// (maxRead), the replies waiting are written before the requests just
// read run: a round that reads large requests (a million arguments, a
// big SET) spends long on them, and the replies of the small ones served
// before must not wait for that, as they would not without the round's
// deferral.
func (l *loop) noteRead(n int) {
	if l.read += n; l.read >= maxRead {
		l.sendPending()
	}
}

// flushEarly writes c's deferred replies before c runs another batch in
// the same round (one that may be held for a commit must not hold them),
// and reports whether c is still the loop's.
func (l *loop) flushEarly(c *conn) bool {
	l.undefer(c)
	return l.send(c)
}

// undefer takes c out of pend.
func (l *loop) undefer(c *conn) {
	if c.deferred {
		c.deferred = false
		if i := slices.Index(l.pend, c); i >= 0 {
			l.pend = slices.Delete(l.pend, i, i+1)
		}
	}
}

// send writes c's replies; a connection whose write failed is closed, one
// whose socket takes no more handed over. It reports whether c is still
// the loop's.
func (l *loop) send(c *conn) bool {
	ok := c.write()
	c.account()
	switch {
	case !ok:
		l.close(c)
	case c.stuck:
		l.handoff(c, nil)
	default:
		return true
	}
	return false
}

// run serves the loop's connections until Shutdown sets a deadline on its
// descriptor, then closes the connections left. With an IdleTimeout it
// also wakes up regularly to close idle connections (reap).
func (l *loop) run() {
	defer l.s.wg.Done()
	for {
		l.setTick()
		err := l.rc.Read(l.onWake)
		if l.s.closing.Load() || !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		l.reap()
	}
	l.mu.Lock()
	left := make([]*conn, 0, len(l.conns))
	for _, c := range l.conns {
		if c != nil {
			left = append(left, c)
		}
	}
	l.mu.Unlock()
	for _, c := range left {
		if c.holding {
			// Stopping: the replies still go out once committed.
			l.s.waitCommit(c)
			c.holding = false
			l.s.finishBatch(c)
		}
		l.close(c)
	}
	l.file.Close()
	syscall.Close(l.evfd)
}

// setTick sets the deadline of the loop's next wait, when connections
// may time out: a fraction of IdleTimeout, at most a second away, or at
// once if Shutdown has begun (under mu, as wakeLoops, so that neither
// overrides the other's).
func (l *loop) setTick() {
	idle := l.s.cfg.IdleTimeout
	if idle <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s.closing.Load() {
		l.file.SetReadDeadline(aLongTimeAgo)
		return
	}
	l.file.SetReadDeadline(time.Now().Add(min(idle/4, time.Second)))
}

// reap closes the loop's connections that have sent nothing for
// IdleTimeout.
func (l *loop) reap() {
	now, limit := l.s.cfg.Clock(), int64(l.s.cfg.IdleTimeout)
	l.mu.Lock()
	idle := l.idle[:0]
	for _, c := range l.conns {
		if c != nil && now-c.lastSeen.Load() >= limit {
			idle = append(idle, c)
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		l.close(c)
	}
	clear(idle)
	l.idle = idle[:0]
}

// wake is the RawConn.Read callback of the epoll descriptor: it serves
// ready connections until there are none, then returns false to park
// until there are.
//
// Connections are registered edge-triggered: epoll reports new bytes
// once, so a connection whose read filled the buffer may hold more and is
// read again in the next round (more), after the connections that became
// ready meanwhile. Once Shutdown has begun it stops between two rounds.
// The loop parks when a wait returned fewer events than
// it asked for and no connection has more: the epoll descriptor is
// edge-triggered in the netpoller too, and readiness that arrives while
// the loop runs is kept for its next wait, so nothing is missed.
func (l *loop) wake(uintptr) bool {
	for {
		if l.s.closing.Load() {
			return true // Shutdown: run closes the connections
		}
		n := l.wait()
		// Resolve descriptors to connections first: a connection closed
		// by this batch may see its descriptor number reused at once.
		wake := false
		l.mu.Lock()
		for i := 0; i < n; i++ {
			if fd := int(l.events[i].Fd); fd == l.evfd {
				wake = true
			} else if fd < len(l.conns) {
				l.batch[i] = l.conns[fd]
			}
		}
		l.mu.Unlock()
		l.inRound = true
		if wake || l.recheck {
			l.recheck = false
			l.release()
		}
		again := l.more
		l.more = l.spare[:0]
		l.nround, l.again = n, again
		for i := 0; i < n; i++ {
			if c := l.batch[i]; c != nil && c.lp == l {
				c.hup = c.hup || l.events[i].Events&hangUp != 0
				l.serve(c)
			}
		}
		clear(l.batch[:n])
		for _, c := range again {
			if c.lp == l {
				l.serve(c)
			}
		}
		clear(again)
		l.spare = again[:0]
		l.nround, l.again = 0, nil
		l.flushRound()
		if n < len(l.events) && len(l.more) == 0 && !l.awaitCommit() {
			return false
		}
	}
}

// awaitCommit is a standalone strong node's group commit on the loop's side, as
// Redis's appendfsync always has it: while the loop's waiting connections
// wait for a commit already on its way to the log (their epoch sealed),
// the loop waits for that commit, up to maxAwait, instead of parking until
// the next request comes. The requests that come meanwhile are then read
// in one round and ride the same next commit; parked, the loop woke once
// for each of them. It reports whether it waited (or found the commit
// made), and the loop then serves what came.
func (l *loop) awaitCommit() bool {
	cm := l.s.committer
	if len(l.waiting) == 0 || !cm.Strong() || l.s.cluster() != nil {
		// The committer is set whenever a connection waits. A cluster
		// node's loops do not wait: measured on a standalone node only,
		// and kept out of the clusters' timing until checked there.
		return false
	}
	seq := l.waiting[0].waitSeq // the least: waiting is in hold order
	if cm.Pending() <= seq {
		return false // not sealed: its entry may still grow (the applier gathers)
	}
	ch := *l.s.commitGen.Load() // before the check: a later commit closes it
	if ok, err := cm.Committed(seq); ok || err != nil {
		l.recheck = true // its listener may not have signalled yet
		return true
	}
	if l.await == nil {
		l.await = time.NewTimer(maxAwait)
	} else {
		l.await.Reset(maxAwait)
	}
	select {
	case <-ch:
	case <-l.await.C:
	}
	l.await.Stop()
	l.recheck = true
	return true
}

// maxAwait bounds how long awaitCommit keeps a loop from reading: a log
// whose writes stall delays the loop's other connections (a PING, a
// command that waits for nothing) by at most this much a round.
const maxAwait = 2 * time.Millisecond

// wait returns the number of ready events, without blocking.
func (l *loop) wait() int {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd),
			uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			l.s.log.Error("event loop: epoll_wait failed", "err", e)
			return 0
		}
		return int(n)
	}
}

// serve reads once from a ready connection and runs what it read. A
// connection whose replies wait for a commit is not read until release
// lets them go.
func (l *loop) serve(c *conn) {
	if c.holding {
		c.readable = true
		return
	}
	if c.deferred && !l.flushEarly(c) {
		return
	}
	err := c.read()
	if err == errAgain {
		c.hup = false
		return
	}
	if err == nil {
		l.noteRead(c.rd.got)
		err = l.s.runBatch(c)
		if c.adrift {
			l.drift(c, err)
		}
	}
	if err == errHold {
		l.hold(c)
		return
	}
	l.finish(c, err)
}

// finish ends a batch that runBatch or finishBatch returned err for: it
// hands the connection over, closes it, or has it read again.
func (l *loop) finish(c *conn, err error) {
	switch {
	case err == errHandoff:
		l.handoff(c, nil)
	case c.stuck || (err != nil && isProtocolError(err)):
		l.handoff(c, err)
	case err != nil:
		c.readError(err)
		l.close(c)
	case !c.raw.drained || c.hup || c.pending || c.readable:
		c.readable = false
		l.more = append(l.more, c) // the read filled the buffer, EOF is next, requests wait, or data came meanwhile
	}
}

// close ends a connection of the loop.
func (l *loop) close(c *conn) {
	l.forget(c)
	l.s.closeConn(c)
}

// handoff moves c to a goroutine of its own, which writes the replies the
// socket did not take, then answers err (a protocol error, or errClose
// after QUIT) or goes on serving c if err is nil.
func (l *loop) handoff(c *conn, err error) {
	if derr := l.detach(c); derr != nil {
		l.s.log.Warn("event loop: handing a connection to a goroutine failed", "client", c.addr, "err", derr)
		l.close(c)
		return
	}
	go l.s.resume(c, err)
}

// detach takes c off the loop onto a net.Conn of its own (attach), for
// whichever goroutine serves it next. If the system refuses a descriptor
// for it, it returns the error and c is still the loop's, its descriptor
// open.
func (l *loop) detach(c *conn) error {
	fd, err := dupCloexec(c.fd)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "")
	nc, err := net.FileConn(f) // duplicates fd again
	f.Close()
	if err != nil {
		return err
	}
	l.forget(c)
	closeFD(c.fd)
	c.fd = -1
	l.s.mu.Lock()
	c.nc = nc
	l.s.mu.Unlock()
	c.attach(nc)
	return nil
}

// takeOver is called on the loop's goroutine while it runs a script of
// c's that has gone on for long (script.Request.OnLong, from inside the
// run): a new goroutine takes the loop over, with the rest of the round,
// and serves its other connections while the script goes on; c is taken
// off the loop (detach, as handoff does), and the rest of its batch runs on this
// goroutine, which then hands c to a goroutine of its own and ends
// (drift). If the system refuses the descriptors this needs, nothing
// changes: the loop waits for the script.
//
// The new goroutine reads the loop's epoll instance through a duplicate
// descriptor: this goroutine holds the read lock of the one it waits on,
// inside the callback of its RawConn.Read, until it ends.
func (l *loop) takeOver(c *conn) {
	fd, err := dupCloexec(l.epfd)
	if err != nil {
		l.s.log.Warn("event loop: taking a loop over from a long script failed", "err", err)
		return
	}
	f := os.NewFile(uintptr(fd), "epoll")
	rc, err := f.SyscallConn()
	if err == nil {
		err = l.detach(c)
	}
	if err != nil {
		f.Close()
		l.s.log.Warn("event loop: taking a loop over from a long script failed", "err", err)
		return
	}
	c.adrift = true

	// The rest of the round: every connection it had, served or not, is
	// read again (one with nothing to read costs a read).
	for i, o := range l.batch[:l.nround] {
		if o != nil && o.lp == l {
			o.hup = o.hup || l.events[i].Events&hangUp != 0
			l.more = append(l.more, o)
		}
	}
	for _, o := range l.again {
		if o.lp == l {
			l.more = append(l.more, o)
		}
	}
	clear(l.batch[:l.nround])
	clear(l.again)
	l.spare, l.nround, l.again = l.again[:0], 0, nil

	l.mu.Lock()
	old := l.file
	l.file, l.rc, l.epfd = f, rc, fd
	if l.s.closing.Load() {
		f.SetReadDeadline(aLongTimeAgo) // Shutdown woke the old one (wakeLoops)
	}
	l.mu.Unlock()
	l.s.takeovers.Add(1)
	l.s.wg.Add(1)
	go func() {
		go old.Close() // once the goroutine that waits on it has ended
		l.flushRound()
		l.run()
	}()
}

// drift ends the loop's goroutine that ran c's batch after the loop was
// taken over (takeOver): c, off the loop already, goes on with a goroutine
// of its own, as after handoff, and this one ends. Its deferred calls run:
// its read lock of the old epoll descriptor is released, and run's count
// in the server's wait group (the new goroutine has its own).
func (l *loop) drift(c *conn, err error) {
	c.adrift = false
	go l.s.resume(c, err)
	runtime.Goexit()
}

// closeFD closes a descriptor served by a loop.
func closeFD(fd int) {
	if fd >= 0 {
		syscall.Close(fd)
	}
}

// wakeLoops makes every loop return from its wait, for Shutdown.
func (s *Server) wakeLoops() {
	for _, l := range s.loops {
		l.mu.Lock()
		l.file.SetReadDeadline(aLongTimeAgo)
		l.mu.Unlock()
	}
}

// hangUp are the events that say the peer will send nothing more.
const hangUp = syscall.EPOLLRDHUP | syscall.EPOLLHUP | syscall.EPOLLERR

// epollET is EPOLLET as the uint32 of an EpollEvent (the syscall
// package declares it negative).
const epollET = 1 << 31
