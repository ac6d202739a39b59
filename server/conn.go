package server

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

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
	keys    [][]byte   // their keys, for prefetch
	raw     *rawSocket // nc's descriptor, if it has one (see serveRaw)
	w       io.Writer  // nc, or raw; nil on an event loop
	out     []byte
	// lp is the event loop serving the connection, if one does (see
	// loop), on descriptor fd; nc is then nil. stuck says that the socket
	// did not take all of out, so the loop must hand the connection over.
	lp    *loop
	fd    int
	stuck bool
	// onReadable is s.readable for this connection, made once so that
	// serving allocates nothing; stop is why it ended the connection.
	onReadable func(fd uintptr) bool
	stop       error

	proto   int  // 2 or 3
	authed  bool // may run commands
	admin   bool // may run FLUSHALL
	closing bool // QUIT: close after this batch

	// Read by other connections (CLIENT LIST), written here.
	name     atomic.Pointer[string]
	libName  atomic.Pointer[string]
	libVer   atomic.Pointer[string]
	lastCmd  atomic.Pointer[command]
	lastSeen atomic.Int64 // unix ns of the last batch
	commands atomic.Int64
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
	c.rd = reader{max: s.cfg.MaxRequest, buf: make([]byte, initialReadBuf)}
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
	s.serveRest(c)
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
	if c.raw != nil {
		c.readError(s.serveRaw(c))
		return
	}
	for {
		if err := c.rd.fill(); err != nil {
			c.readError(err)
			return
		}
		if err := s.runBatch(c); err != nil {
			c.readError(err)
			return
		}
	}
}

// serveRaw runs a connection that has a raw socket. Reads and batches run
// inside one RawConn.Read (see rawSocket), which returns when a batch ends
// the connection, when the descriptor's deadline passes (Shutdown) or when
// it is closed. It returns why the connection ends, for readError, which
// must run after the read lock is released: linger reads the descriptor.
func (s *Server) serveRaw(c *conn) error {
	c.stop = nil
	err := c.raw.rc.Read(c.onReadable)
	if c.stop != nil {
		return c.stop
	}
	return err
}

// readable is RawConn.Read's callback: it reads and runs batches until the
// socket is empty, then returns false to wait for the next bytes, or true
// with c.stop set to end the connection.
func (s *Server) readable(c *conn, fd uintptr) bool {
	c.raw.fd = fd
	for {
		if c.raw.drained {
			// The last read emptied the socket: wait for the netpoller
			// rather than make a read that would fail with EAGAIN.
			c.raw.drained = false
			return false
		}
		err := c.rd.fill()
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
	c.batch = c.batch[:0]
	var perr error
	for {
		args, err := c.rd.next()
		if err != nil || args == nil {
			perr = err
			break
		}
		c.batch = append(c.batch, args)
	}
	now := s.cfg.Clock()
	c.lastSeen.Store(now)
	s.prefetch(c)
	for _, args := range c.batch {
		if c.closing {
			break
		}
		s.dispatch(c, args, now)
	}
	if perr != nil && !c.closing {
		return perr
	}
	if !c.flush() || c.closing || s.closing.Load() {
		return errClose
	}
	return nil
}

// Prefetcher is implemented by a Limiter that can bring the state of keys
// into the CPU caches ahead of the checks that follow (shards.Store does).
// It must change no state.
type Prefetcher interface {
	Prefetch(keys [][]byte) uint64
}

// prefetch hands the keys of the batch's RL.CHECK, RL.PEEK and CL.THROTTLE
// requests to the limiter's Prefetch, when there are at least two: a
// pipelined batch's lookups then overlap their cache misses instead of
// waiting for them one after another.
func (s *Server) prefetch(c *conn) {
	if s.prefetcher == nil || len(c.batch) < 2 {
		return
	}
	keys := c.keys[:0]
	for _, args := range c.batch {
		if len(args) > 1 && len(args[0]) >= 7 && (equalFold(args[0], "RL.CHECK") ||
			equalFold(args[0], "CL.THROTTLE") || equalFold(args[0], "RL.PEEK")) {
			keys = append(keys, args[1])
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
// disconnects and shutdown wake-ups close silently.
func (c *conn) readError(err error) {
	if err == errClose {
		return
	}
	msg := err.Error()
	if !isProtocolError(err) {
		if !errors.Is(err, io.EOF) && !c.s.closing.Load() {
			c.s.log.Debug("connection read failed", "client", c.addr, "err", err)
		}
		return
	}
	c.s.log.Info("closing connection after protocol error", "client", c.addr, "err", msg)
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
	s.totalCommands.Add(c.commands.Load())
	s.metrics.connections.Dec()
	s.wg.Done()
}
