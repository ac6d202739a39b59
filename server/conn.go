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
	w       io.Writer  // nc, or its raw socket
	out     []byte

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
		proto:   2,
		authed:  s.cfg.RequirePass == "",
	}
	var rw io.ReadWriter = nc
	if raw := newRawSocket(nc); raw != nil {
		rw = raw
	}
	c.rd = reader{r: rw, max: s.cfg.MaxRequest, buf: make([]byte, initialReadBuf)}
	c.w = rw
	s.totalConns.Add(1)
	s.metrics.connections.Inc()
	return c
}

func (s *Server) serveConn(c *conn) {
	defer s.closeConn(c)
	for {
		if err := c.rd.fill(); err != nil {
			c.readError(err)
			return
		}
		// Parse every complete request read, then run them: one clock
		// reading stamps the whole batch, and the limiter can fetch the
		// batch's keys into the CPU caches together (see prefetch).
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
			// Answer the requests before the bad one, then the error.
			c.readError(perr)
			return
		}
		if !c.flush() || c.closing || s.closing.Load() {
			return
		}
	}
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

// readError answers a protocol error before the connection closes. Clean
// disconnects and shutdown wake-ups close silently.
func (c *conn) readError(err error) {
	msg := err.Error()
	if !strings.HasPrefix(msg, "Protocol error") {
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

func (c *conn) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	_, err := c.w.Write(c.out)
	if cap(c.out) > 64<<10 {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	return err == nil
}

func (s *Server) closeConn(c *conn) {
	c.nc.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.totalCommands.Add(c.commands.Load())
	s.metrics.connections.Dec()
	s.wg.Done()
}
