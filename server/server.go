package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/engine"
)

// Limiter is the key state the server checks against. Implementations are
// safe for concurrent use; now is nanoseconds since the epoch. Errors that
// are not engine or shards sentinels are reported to the client as ERR.
type Limiter interface {
	Check(key []byte, a engine.Algo, p engine.Params, cost, now int64) (engine.Result, error)
	Throttle(key []byte, maxBurst, count, period, quantity, now int64) (engine.CellResult, error)
	Reset(key []byte, now int64) (bool, error)
	Flush() error
	Len() int
	MemoryBytes() int64
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	Limiter     Limiter
	RequirePass string // password of the default user; "" disables AUTH
	AdminToken  string // password of the "admin" user, who may FLUSHALL
	MaxKeyBytes int    // longest key accepted; default 1024
	MaxLogLimit int64  // largest limit for the log algorithm; default 10000
	MaxRequest  int    // largest single request in bytes; default 8 MiB
	Clock       func() int64
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
	Version     string
	// Rules serves RL.CHECKRULES and RL.RULE.*; nil means the Limiter if it
	// implements RuleStore, else those commands answer an error.
	Rules RuleStore
	// IOLoops is the number of event loops that serve plain TCP
	// connections (see loop): 0 means one per GOMAXPROCS, a negative
	// number none, and then every connection has a goroutine of its own,
	// as connections other than TCP (TLS, pipes) always do.
	IOLoops int
	// DisableMetrics skips every per-command metric update (command and
	// check counters, the latency histogram, INFO's check counts); for
	// measuring what metrics cost.
	DisableMetrics bool
}

// Defaults for Config fields left zero.
const (
	DefaultMaxKeyBytes = 1024
	DefaultMaxLogLimit = 10000
	DefaultMaxRequest  = 8 << 20
)

// Server is a RESP server. Create it with New, run it with Serve, stop it
// with Shutdown.
type Server struct {
	cfg     Config
	log     *slog.Logger
	cmds    map[string]*command
	list    []*command // sorted by name, for COMMAND
	metrics *metrics
	started time.Time
	queries sync.Pool // *rules.Query, reused by RL.CHECKRULES
	// prefetcher is cfg.Limiter if it implements Prefetcher.
	prefetcher Prefetcher

	mu       sync.Mutex
	ln       net.Listener
	loops    []*loop // started by the first Serve
	loopsRan bool
	nextLoop atomic.Uint32
	conns    map[*conn]struct{}
	wg       sync.WaitGroup
	closing  atomic.Bool
	nextID   atomic.Int64

	totalConns    atomic.Int64
	totalCommands atomic.Int64 // commands of closed connections
	rejected      atomic.Int64
}

// New returns a Server for cfg. It panics if cfg.Limiter is nil.
func New(cfg Config) *Server {
	if cfg.Limiter == nil {
		panic("server: Config.Limiter is nil")
	}
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if cfg.MaxLogLimit <= 0 {
		cfg.MaxLogLimit = DefaultMaxLogLimit
	}
	if cfg.MaxRequest <= 0 {
		cfg.MaxRequest = DefaultMaxRequest
	}
	if cfg.Clock == nil {
		cfg.Clock = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	if cfg.Rules == nil {
		cfg.Rules, _ = cfg.Limiter.(RuleStore)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg, log: cfg.Logger, conns: make(map[*conn]struct{}), started: time.Now()}
	s.prefetcher, _ = cfg.Limiter.(Prefetcher)
	s.cmds, s.list = commandTable()
	s.metrics = newMetrics(cfg.Registerer, s)
	return s
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("server: closed")

// Serve accepts connections on ln until Shutdown is called. It always
// returns a non-nil error: ErrServerClosed after Shutdown, also when
// Shutdown came first (ln is then closed at once).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	closed := s.closing.Load() // Shutdown ran before ln was known to it
	if !closed && !s.loopsRan {
		s.loopsRan = true
		n := s.cfg.IOLoops
		if n == 0 {
			n = runtime.GOMAXPROCS(0)
		}
		if n > 0 {
			if err := s.startLoops(n); err != nil {
				s.log.Warn("no event loops; serving each connection with a goroutine", "err", err)
			}
		}
	}
	s.mu.Unlock()
	if closed {
		ln.Close()
		return ErrServerClosed
	}
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		c := s.newConn(nc)
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		// Adopted under mu, so that Shutdown's wake-up finds it.
		adopted := s.adopt(c, nc)
		s.mu.Unlock()
		if !adopted {
			c.attach(nc)
			go s.serveConn(c)
		}
	}
}

// Shutdown stops accepting, lets every connection finish the commands it
// has already read, flushes their replies and closes them. If ctx ends
// first, the remaining connections are closed at once and ctx's error is
// returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		// Wake connections blocked in Read; one in the middle of a batch
		// finishes it first. Event loops never block: they finish their
		// batch, and closing makes it close its connection.
		if c.nc != nil {
			c.nc.SetReadDeadline(time.Now())
		}
	}
	s.wakeLoops()
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			if c.nc != nil {
				c.nc.Close()
			}
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// Addr returns the listener's address, or nil before Serve.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// ConnCount returns the number of open client connections.
func (s *Server) ConnCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
