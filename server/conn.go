package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/shards"
	"github.com/tidwall/redcon"
)

// conn is one client connection. Its fields are owned by the connection's
// goroutine, except those read by CLIENT LIST and INFO from other
// connections, which are atomic or guarded by Server.mu.
type conn struct {
	s       *Server
	nc      net.Conn
	id      int64
	addr    string
	laddr   string
	created time.Time
	rd      reader
	batch   [][][]byte // the requests of the batch being run
	ends    []int      // the reader's position after each of them
	keys    [][]byte   // their keys, for prefetch
	// pending says that the last batch stopped early, its replies past
	// maxBatchReplies: the rest of its requests are in the read buffer,
	// to run before reading more.
	pending bool
	raw     *rawSocket // nc's descriptor, if it has one (see serveRaw)
	w       io.Writer  // nc, or raw; nil on an event loop
	out     []byte
	mem     int64 // in Server.connMem (see account)
	// lp is the event loop serving the connection, if one does (see
	// loop), on descriptor fd; nc is then nil. stuck says that the socket
	// did not take all of out, so the loop must hand the connection over.
	lp    *loop
	fd    int
	stuck bool
	// deferred: out waits in the loop's round to be written with the
	// round's other replies (see loop.flushRound).
	deferred bool
	hup      bool // the loop saw the peer hang up: read until EOF
	// onReadable is s.readable for this connection, made once so that
	// serving allocates nothing; stop is why it ended the connection.
	onReadable func(fd uintptr) bool
	stop       error

	// The batch being run (see durable.go): where its replies start in
	// out, how many there are, what they wait for, the protocol error
	// that ended it; holding while an event loop keeps its replies until
	// they commit, and readable if data arrived meanwhile.
	batchStart int
	nreplies   int
	wait       waitClass
	waitSeq    uint64
	perr       error
	holding    bool
	readable   bool
	// mayHold: the command being run is a request of the batch, which may
	// be held while its slot moves; held: it was (see dispatchTop).
	mayHold bool
	held    bool
	// adrift: the event loop serving c was taken over by another goroutine
	// while it ran c's script (loop.takeOver), and the goroutine running c's
	// batch serves c from then on; onLong is c.takeOver, made once, for
	// script.Request.OnLong.
	adrift bool
	onLong func()
	// wouldWait: the request run last is a script on an event loop that
	// would wait for a shard another script holds (shards.ErrWouldWait):
	// it answered nothing, and runs again off the loop (see dispatchTop).
	wouldWait bool
	// nudged is the last takeover this connection was told of (Nudger).
	nudged uint64

	proto   int  // 2 or 3
	authed  bool // may run commands
	admin   bool // may run FLUSHALL
	closing bool // QUIT: close after this batch

	multi *multiState // between MULTI and EXEC (see multi.go)
	tx    *shards.Tx  // while EXEC runs: the locked state its commands use

	// The command the connection named last, as it spelled it (see
	// command).
	lastFound   *command
	lastName    []byte // in lastNameBuf
	lastNameBuf [16]byte

	// Read by other connections (CLIENT LIST), written here.
	name     atomic.Pointer[string]
	libName  atomic.Pointer[string]
	libVer   atomic.Pointer[string]
	lastCmd  atomic.Pointer[string] // the name CLIENT LIST shows (command.shownName)
	lastSeen atomic.Int64           // unix ns of the last batch
	commands atomic.Int64
	queued   atomic.Int32  // commands queued since MULTI, plus one; 0 outside MULTI
	shown    atomic.Uint32 // proto and admin, for CLIENT LIST (see publish)
	fdShown  atomic.Int32  // the socket's descriptor, for CLIENT LIST
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{
		s:       s,
		nc:      nc,
		id:      s.nextID.Add(1),
		addr:    nc.RemoteAddr().String(),
		laddr:   nc.LocalAddr().String(),
		created: time.Now(),
		fd:      -1,
		proto:   2,
		authed:  s.cfg.RequirePass == "",
	}
	c.rd = reader{max: s.cfg.MaxRequest, budget: s.input, buf: make([]byte, initialReadBuf)}
	c.lastSeen.Store(s.cfg.Clock())
	c.fdShown.Store(int32(descriptor(nc)))
	c.publish()
	c.account()
	s.totalConns.Add(1)
	s.metrics.connections.Inc()
	return c
}

// attach makes nc the connection's transport, for a goroutine of its own
// (serveConn).
func (c *conn) attach(nc net.Conn) {
	var rw io.ReadWriter = nc
	if c.raw = newRawSocket(nc); c.raw != nil {
		rw = c.raw
		c.onReadable = func(fd uintptr) bool { return c.s.readable(c, fd) }
	}
	c.rd.r, c.w, c.stuck = rw, rw, false
}

// serveConn serves c, which has a transport (attach), until it closes.
func (s *Server) serveConn(c *conn) {
	defer s.closeConn(c)
	if s.handshake(c) {
		s.serveRest(c)
	}
}

// handshake runs the TLS handshake of a TLS connection, within
// HandshakeTimeout (or until Shutdown), so that a client that connects
// and says nothing does not hold a connection. It reports whether the
// connection may be served.
func (s *Server) handshake(c *conn) bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		s.logThrottled(&s.throttle.client, slog.LevelDebug, "TLS handshake failed", "client", c.addr, "err", err)
		return false
	}
	return true
}

// resume serves a connection that an event loop handed over (see
// loop.handoff): it writes the replies the loop could not, then answers
// err and closes, or goes on serving if err is nil.
func (s *Server) resume(c *conn, err error) {
	defer s.closeConn(c)
	if !c.flush() {
		return
	}
	if err != nil {
		c.readError(err)
		return
	}
	if c.closing || s.closing.Load() {
		return
	}
	s.serveRest(c)
}

func (s *Server) serveRest(c *conn) {
	s.armIdle(c, s.cfg.IdleTimeout)
	if c.raw != nil {
		c.readError(s.serveRaw(c))
		return
	}
	for {
		err := c.read()
		if err == nil {
			err = s.runBatch(c)
		}
		if err != nil && !s.stillActive(c, err) {
			c.readError(err)
			return
		}
	}
}

// serveRaw runs a connection that has a raw socket. Reads and batches run
// inside one RawConn.Read (see rawSocket), which returns when a batch ends
// the connection, when the descriptor's deadline passes (Shutdown, or a
// check for idleness) or when it is closed. It returns why the connection
// ends, for readError, which must run after the read lock is released:
// linger reads the descriptor.
func (s *Server) serveRaw(c *conn) error {
	for {
		c.stop = nil
		err := c.raw.rc.Read(c.onReadable)
		if c.stop != nil {
			return c.stop
		}
		if !s.stillActive(c, err) {
			return err
		}
	}
}

// armIdle sets the read deadline of a connection served by a goroutine
// d from now, for IdleTimeout (none if IdleTimeout is 0), or at once if
// Shutdown has begun: its Shutdown's own wake-up must not be overridden.
func (s *Server) armIdle(c *conn, d time.Duration) {
	if s.cfg.IdleTimeout <= 0 {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(d))
	if s.closing.Load() {
		c.nc.SetReadDeadline(aLongTimeAgo)
	}
}

// aLongTimeAgo is a deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

// stillActive reports whether a read that failed with err only reached
// the idle deadline of a connection that has been active since it was
// set; the deadline is then set again for the rest of IdleTimeout.
// Otherwise (the client was idle for IdleTimeout, Shutdown, any other
// error) the connection ends.
func (s *Server) stillActive(c *conn, err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) || s.closing.Load() || s.cfg.IdleTimeout <= 0 {
		return false
	}
	left := s.cfg.IdleTimeout - time.Duration(s.cfg.Clock()-c.lastSeen.Load())
	if left <= 0 {
		return false
	}
	s.armIdle(c, left)
	return true
}

// readable is RawConn.Read's callback: it reads and runs batches until a
// read finds the socket empty, then returns false to wait for the next
// bytes, or true with c.stop set to end the connection. A read that
// emptied the socket is not taken as a sign to wait: the peer's FIN may
// have arrived with its last bytes, and then no further readiness would
// come to report it.
func (s *Server) readable(c *conn, fd uintptr) bool {
	c.raw.fd = fd
	for {
		err := c.read()
		if err == errAgain {
			return false
		}
		if err == nil {
			err = s.runBatch(c)
		}
		if err != nil {
			c.stop = err
			return true
		}
	}
}

// read reads once from the connection, unless requests left by a batch
// that stopped early are to run first.
func (c *conn) read() error {
	if c.pending {
		c.rd.got = 0
		return nil
	}
	return c.rd.fill()
}

// maxBatchReplies bounds the replies one batch adds before it stops and
// sends them: 16 KiB of small requests with large replies (COMMAND DOCS)
// would otherwise make a connection whose client does not read them hold
// megabytes. The requests not run yet stay in the read buffer.
const maxBatchReplies = 1 << 20

// errHandoff is runBatch's answer on an event loop when the next request
// may wait (see Blocking): the loop hands the connection to a goroutine of
// its own, which runs it.
var errHandoff = errors.New("the next request may wait: hand the connection over")

// Blocking is implemented by a Limiter some of whose commands may wait
// on other machines (a cluster node asks other nodes during RL.CHECKRULES
// and rule changes). A connection that sends one is served by a goroutine
// of its own from then on, since an event loop must never wait.
type Blocking interface {
	// Blocks reports whether the command named name (lower case) may wait.
	Blocks(name string) bool
}

// mayBlock reports whether the command named name, sent on c, may wait
// (Blocking): a command that does, run now, or EXEC of a queue that holds
// one. A command sent inside MULTI is only queued.
//
// A script may run for seconds (until SCRIPT KILL), so the EVAL family
// may wait, but on a single node it runs on the event loop where it was
// sent (scriptOnLoop) unless it is pipelined.
func (s *Server) mayBlock(c *conn, args [][]byte) bool {
	cmd := c.command(args[0])
	if cmd == nil {
		return false
	}
	if c.multi == nil {
		return s.blocks(cmd) && !s.scriptOnLoop(c, cmd, args)
	}
	if cmd.name != "exec" {
		return false
	}
	for _, q := range c.multi.queue {
		if qc := s.lookup(q[0]); qc != nil && s.blocks(qc) {
			return true
		}
	}
	return false
}

// command returns the command named name (Server.lookup). It remembers
// the last one found and how the client spelled it, so that a stream of
// one command costs a comparison rather than a lookup; event loops look a
// request's command up twice (mayBlock, dispatch).
func (c *conn) command(name []byte) *command {
	if cmd := c.lastFound; cmd != nil && string(name) == string(c.lastName) {
		return cmd
	}
	cmd := c.s.lookup(name)
	if cmd != nil && len(name) <= len(c.lastNameBuf) {
		c.lastFound, c.lastName = cmd, append(c.lastNameBuf[:0], name...)
	}
	return cmd
}

// takeOver hands c's event loop to another goroutine while c's script
// runs on it (script.Request.OnLong, loop.takeOver).
func (c *conn) takeOver() {
	if l := c.lp; l != nil {
		l.takeOver(c)
	}
}

// scriptOnLoop reports whether cmd with args, sent on c, is a script that
// runs on c's event loop, on a single node (a cluster node's scripts may
// wait for other nodes): an EVALSHA or EVALSHA_RO of a script a native
// handler runs (package script/native: the limiter libraries' scripts),
// which is bounded work as a command is, and any script that is the only
// request of its batch.
//
// An interpreted run that goes on for long (script.Config.LongRun) hands
// the loop to a new goroutine and keeps the one it runs on, which serves
// c from then on (loop.takeOver), so that it holds the loop's other
// connections no longer than that. A pipelined interpreted script is
// handed over, as before, with its connection, to a goroutine of its own:
// its batch's scripts then run in parallel with those of the loop's other
// connections, on every core, which at 16 requests a batch outweighs what
// the handover costs; at one a batch the handover costs more (docs/scripts.md).
func (s *Server) scriptOnLoop(c *conn, cmd *command, args [][]byte) bool {
	if s.cl != nil || cmd.numKeysAt == 0 || s.proxying() {
		return false
	}
	return len(c.batch) == 1 || len(args) > 1 && (cmd.name == "evalsha" || cmd.name == "evalsha_ro") &&
		s.scripts.HasNative(args[1])
}

// blocks reports whether cmd may wait: a script, or what the Limiter says
// (Blocking).
func (s *Server) blocks(cmd *command) bool {
	return cmd.numKeysAt > 0 || s.blocking != nil && s.blocking.Blocks(cmd.name)
}

// errClose ends a connection without an error reply: after QUIT, a failed
// write, or when the server shuts down.
var errClose = errors.New("connection closing")

// runBatch runs the requests read so far and flushes their replies. It
// returns errClose, or a protocol error that readError answers after the
// replies to the requests before it, when the connection must close.
func (s *Server) runBatch(c *conn) error {
	// Parse every complete request read, then run them: one clock reading
	// stamps the whole batch, and the limiter can fetch the batch's keys
	// into the CPU caches together (see prefetch).
	c.rd.reset()
	begin := c.rd.start
	c.batch, c.ends, c.pending = c.batch[:0], c.ends[:0], false
	var perr error
	for {
		args, err := c.rd.next()
		if err != nil || args == nil {
			perr = err
			break
		}
		c.batch = append(c.batch, args)
		c.ends = append(c.ends, c.rd.start)
	}
	now := s.cfg.Clock()
	c.lastSeen.Store(now)
	if f := s.cfg.OnBatch; f != nil {
		f()
	}
	s.prefetch(c)
	c.batchStart, c.nreplies, c.wait = len(c.out), 0, waitNone
	handoff := false
	for i, args := range c.batch {
		if c.closing {
			break
		}
		// A command that may wait (one that blocks, or one whose slot is
		// moving, which dispatchTop then does not run) cannot run on an
		// event loop: the requests from it on run again on the
		// connection's own goroutine, after the replies before it have
		// gone out.
		if (c.lp != nil && s.mayBlock(c, args)) || s.dispatchTop(c, args, now) {
			pos := begin
			if i > 0 {
				pos = c.ends[i-1]
			}
			c.rd.rewind(pos)
			c.pending, perr, handoff = true, nil, i == 0
			break
		}
		if len(c.out) > maxBatchReplies && i+1 < len(c.batch) {
			// The rest runs once these replies are sent; a protocol
			// error after it is found again then.
			c.rd.rewind(c.ends[i])
			c.pending, perr = true, nil
			break
		}
	}
	c.done()
	c.perr = perr
	if handoff {
		return errHandoff
	}
	if s.mustWait(c) {
		if c.lp != nil {
			return errHold // the loop parks c and calls finishBatch (loop.release)
		}
		s.waitCommit(c)
	}
	return s.finishBatch(c)
}

// finishBatch flushes the replies of the batch run last, once they may go
// (see mustWait), and returns what runBatch returns.
func (s *Server) finishBatch(c *conn) error {
	perr := c.perr
	c.perr = nil
	if perr != nil && !c.closing {
		return perr
	}
	ok := c.flush()
	c.account()
	if !ok || c.closing || s.closing.Load() {
		return errClose
	}
	return nil
}

// done lets go of a batch that has run: its arguments, which point into
// the read buffer, and what a request larger than usual made the
// connection hold.
func (c *conn) done() {
	clear(c.batch)
	if cap(c.batch) > keptArgs {
		c.batch, c.ends = nil, nil
	}
	c.rd.release()
}

// Prefetcher is implemented by a Limiter that can bring the state of keys
// into the CPU caches ahead of the checks that follow (shards.Store does).
// It must change no state.
type Prefetcher interface {
	Prefetch(keys [][]byte) uint64
}

// prefetch hands the keys of the batch's RL.CHECK, RL.PEEK and CL.THROTTLE
// requests, and the first key of its scripts (EVAL, EVALSHA and their _RO
// forms: a limiter library's script names its one key first), to the
// limiter's Prefetch, when there are at least two: a pipelined batch's
// lookups then overlap their cache misses instead of waiting for them one
// after another.
func (s *Server) prefetch(c *conn) {
	if s.prefetcher == nil || len(c.batch) < 2 {
		return
	}
	keys := c.keys[:0]
	for _, args := range c.batch {
		if len(args) < 2 || len(args[0]) < 4 {
			continue
		}
		switch {
		case len(args[0]) >= 7 && (equalFold(args[0], "RL.CHECK") ||
			equalFold(args[0], "CL.THROTTLE") || equalFold(args[0], "RL.PEEK")):
			keys = append(keys, args[1])
		case len(args) > 3 && len(args[2]) > 0 && args[2][0] >= '1' && args[2][0] <= '9' &&
			(equalFold(args[0], "EVALSHA") || equalFold(args[0], "EVAL") ||
				equalFold(args[0], "EVALSHA_RO") || equalFold(args[0], "EVAL_RO")):
			keys = append(keys, args[3])
		}
	}
	if len(keys) > 1 {
		s.prefetcher.Prefetch(keys)
	}
	clear(keys)
	c.keys = keys[:0]
}

// isProtocolError reports whether err is one of the reader's protocol
// errors, which the client is told about before the connection closes.
func isProtocolError(err error) bool {
	return strings.HasPrefix(err.Error(), "Protocol error")
}

// readError answers a protocol error before the connection closes. Clean
// disconnects and shutdown wake-ups close silently. Its log lines are
// throttled: a client can cause as many as it likes.
func (c *conn) readError(err error) {
	if err == errClose {
		return
	}
	msg := err.Error()
	if !isProtocolError(err) {
		if !errors.Is(err, io.EOF) && !c.s.closing.Load() {
			c.s.logThrottled(&c.s.throttle.client, slog.LevelDebug, "connection read failed", "client", c.addr, "err", err)
		}
		return
	}
	c.s.logThrottled(&c.s.throttle.client, slog.LevelInfo, "closing connection after protocol error", "client", c.addr, "err", msg)
	c.s.metrics.errors.WithLabelValues("protocol").Inc()
	c.out = redcon.AppendError(c.out, "ERR "+msg)
	c.flush()
	c.linger()
}

// linger half-closes the connection and discards what the client still
// sends, for a moment, so that closing with unread input does not reset the
// connection before the client has read the error.
func (c *conn) linger() {
	tc, ok := c.nc.(*net.TCPConn)
	if !ok {
		return
	}
	tc.CloseWrite()
	tc.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
	io.CopyN(io.Discard, tc, 1<<20)
}

// flush writes the replies in out. It reports false if the connection
// failed. On an event loop it never waits: what the socket does not take
// stays in out, and stuck is set.
func (c *conn) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	if l := c.lp; l != nil && l.inRound && !c.closing && !c.s.closing.Load() {
		l.deferFlush(c)
		return true
	}
	return c.write()
}

// write writes out now (flush without the loop's deferral).
func (c *conn) write() bool {
	if len(c.out) == 0 {
		return true
	}
	var err error
	if c.lp != nil {
		var n int
		n, err = rawWrite(c.raw.fd, c.out)
		if err == errAgain {
			c.out = c.out[:copy(c.out, c.out[n:])]
			c.stuck = true
			return true
		}
	} else {
		_, err = c.w.Write(c.out)
	}
	if cap(c.out) > 64<<10 {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	return err == nil
}

func (s *Server) closeConn(c *conn) {
	if c.nc != nil {
		c.nc.Close()
	} else {
		closeFD(c.fd)
		c.fd = -1
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.cfg.OpenClients.Add(-1)
	c.unaccount()
	s.totalCommands.Add(c.commands.Load())
	s.metrics.connections.Dec()
	s.wg.Done()
}
