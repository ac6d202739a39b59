package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/script/native"
	"github.com/rlserver/rlserver/shards"
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

// MemoryBound is implemented by a Limiter whose memory is bounded (a
// shards.Store made with a MaxMemory): INFO, CONFIG GET and /metrics
// report the bound, the policy at it and the keys evicted. Safe for
// concurrent use.
type MemoryBound interface {
	MaxMemory() int64 // bytes, 0 for none
	MaxMemoryPolicy() string
	Evicted() int64
}

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	Limiter     Limiter
	RequirePass string // password of the default user; "" disables AUTH
	AdminToken  string // password of the "admin" user, who may FLUSHALL
	MaxKeyBytes int    // longest key accepted; default shards.DefaultMaxKeyBytes
	MaxLogLimit int64  // largest limit for the log algorithm; default engine.DefaultMaxLogLimit
	MaxRequest  int    // largest single request in bytes; default 8 MiB, at most 1 GiB
	// Clock is the time of every command, in ns since the epoch; default
	// the wall clock. rlserver gives its decision clock (internal/clock).
	Clock func() int64
	// ClockOffset, if set, returns the Clock less the wall clock, in ns:
	// INFO rlserver shows it as clock_offset_ms.
	ClockOffset func() int64
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
	Version     string
	// Rules serves RL.CHECKRULES and RL.RULE.*; nil means the Limiter if it
	// implements RuleStore, else those commands answer an error.
	Rules RuleStore
	// HotKeys serves RL.HOTKEYS; nil means the Limiter if it implements
	// HotKeySource, else the command answers an error.
	HotKeys HotKeySource
	// IOLoops is the number of event loops that serve plain TCP
	// connections (see loop): 0 means one fewer than GOMAXPROCS, at least
	// one (DefaultIOLoops), or one per GOMAXPROCS when the Limiter is a
	// strong Committer; a negative number none, and then every
	// connection has a goroutine of its own, as connections other than TCP
	// (TLS, pipes) always do.
	IOLoops int
	// MaxBuffered bounds the bytes that all connections together may hold
	// beyond their usual buffers, for requests larger than 16 KiB (see
	// budget); default DefaultMaxBuffered.
	MaxBuffered int64
	// MaxHold bounds how long a command is held while its key's slot
	// moves between two leaders of a cluster (see dispatchTop); default
	// 3 s, under go-redis ClusterClient's 5 s read timeout.
	MaxHold time.Duration
	// ConnMemory, if set, is where the server keeps the estimated memory
	// of its connections (buffers and per-connection structures), so that
	// the limiter's --maxmemory accounting can count it; nil means a
	// counter of the server's own.
	ConnMemory *atomic.Int64
	// HeapMemory, if set, returns the live heap that the limiter's state
	// and the connections do not account for, and the largest live heap
	// seen: INFO adds the first to used_memory (as used_memory_overhead)
	// and gives the second as used_memory_peak.
	HeapMemory func() (overhead, peak int64)
	// OnBatch, if set, is called before each batch of requests a client
	// sent runs (the process's rest.Governor.Touch, which gives a resting
	// process its cores back at the first request). It must be cheap and
	// must not block.
	OnBatch func()
	// IdleTimeout closes a connection that has sent nothing for that
	// long, as Redis's timeout; 0 means never.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the TLS handshake of a connection from a
	// TLS listener; default 10 s.
	HandshakeTimeout time.Duration
	// MaxClients bounds the connections served at once, as Redis's
	// maxclients: one more is answered "-ERR max number of clients
	// reached" and closed. Default DefaultMaxClients.
	MaxClients int
	// OpenClients, if set, counts the client connections open on every
	// listener of the node, so that MaxClients bounds them together: the
	// HTTP API adds its own. nil means a counter of the server's own.
	OpenClients *atomic.Int64
	// DisableMetrics skips every per-command metric update (command and
	// check counters, the latency histogram, INFO's check counts); for
	// measuring what metrics cost.
	DisableMetrics bool
	// LuaTimeLimit is how long a script runs before it is busy: the
	// commands that would wait for its keys are then answered BUSY, and
	// SCRIPT KILL may stop it (Redis's lua-time-limit); default 5 s.
	LuaTimeLimit time.Duration
	// LuaMemoryLimit bounds the memory one script's Lua values may hold;
	// default script.DefaultMemoryLimit (64 MiB).
	LuaMemoryLimit int64
	// InterpretAllScripts runs every script in the interpreter, the
	// scripts of the limiter libraries package native recognises included
	// (by default those run natively).
	InterpretAllScripts bool
}

// Defaults for Config fields left zero.
const (
	DefaultMaxRequest  = 8 << 20
	DefaultMaxBuffered = 256 << 20
	DefaultMaxClients  = 10000
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
	// prefetcher is cfg.Limiter if it implements Prefetcher, bound if
	// it implements MemoryBound.
	prefetcher Prefetcher
	commitState
	blocking Blocking     // cfg.Limiter if it implements Blocking
	hotKeys  HotKeySource // cfg.HotKeys, or cfg.Limiter if it implements HotKeySource
	cl       Cluster      // cfg.Limiter if it implements Cluster
	nudger   Nudger       // cfg.Limiter if it implements Nudger
	nudges   nudges       // when each client host was last nudged
	// txRules says that the rules live in the Limiter (Config.Rules was
	// nil), so that EXEC's transaction covers rule checks too.
	txRules  bool
	bound    MemoryBound
	input    *budget        // of MaxBuffered
	connMem  *atomic.Int64  // cfg.ConnMemory, or the server's own
	throttle throttles      // of the log lines clients can cause
	scripts  *script.Engine // EVAL, EVALSHA, SCRIPT (script_cmds.go)
	evalRuns sync.Pool      // *evalRun (script_cmds.go)

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
	takeovers     atomic.Uint64 // event loops taken over from a long script (loop.takeOver)
	lastMoved     atomic.Int64  // unix ns of the last MOVED answered
}

// LastMoved returns when the server last answered a command MOVED (the
// zero time if never): a cluster node that has handed its slots over
// keeps serving until its clients stop coming, so that each learns where
// its slots went.
func (s *Server) LastMoved() time.Time {
	if ns := s.lastMoved.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// New returns a Server for cfg. It panics if cfg.Limiter is nil.
func New(cfg Config) *Server {
	if cfg.Limiter == nil {
		panic("server: Config.Limiter is nil")
	}
	if cfg.MaxHold <= 0 {
		cfg.MaxHold = defaultMaxHold
	}
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = shards.DefaultMaxKeyBytes
	}
	if cfg.MaxLogLimit <= 0 {
		cfg.MaxLogLimit = engine.DefaultMaxLogLimit
	}
	if cfg.MaxRequest <= 0 {
		cfg.MaxRequest = DefaultMaxRequest
	}
	cfg.MaxRequest = min(cfg.MaxRequest, maxRequestLimit)
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.OpenClients == nil {
		cfg.OpenClients = new(atomic.Int64)
	}
	if cfg.MaxBuffered <= 0 {
		cfg.MaxBuffered = DefaultMaxBuffered
	}
	if cfg.ConnMemory == nil {
		cfg.ConnMemory = new(atomic.Int64)
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
	txRules := false
	if cfg.Rules == nil {
		cfg.Rules, txRules = cfg.Limiter.(RuleStore)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg, log: cfg.Logger, conns: make(map[*conn]struct{}), started: time.Now()}
	s.prefetcher, _ = cfg.Limiter.(Prefetcher)
	s.initCommitter()
	s.blocking, _ = cfg.Limiter.(Blocking)
	s.hotKeys = cfg.HotKeys
	if s.hotKeys == nil {
		s.hotKeys, _ = cfg.Limiter.(HotKeySource)
	}
	s.cl, _ = cfg.Limiter.(Cluster)
	s.nudger, _ = cfg.Limiter.(Nudger)
	s.txRules = txRules
	s.bound, _ = cfg.Limiter.(MemoryBound)
	s.input, s.connMem = &budget{max: cfg.MaxBuffered}, cfg.ConnMemory
	s.throttle = newThrottles()
	s.cmds, s.list = commandTable()
	s.initRuleWaits()
	s.metrics = newMetrics(cfg.Registerer, s)
	s.scripts = script.New(script.Config{TimeLimit: cfg.LuaTimeLimit, MemoryLimit: cfg.LuaMemoryLimit,
		Logger: cfg.Logger, OnBusy: onBusy})
	if !cfg.InterpretAllScripts {
		native.Register(s.scripts)
	}
	s.metrics.registerScripts(cfg.Registerer, s.scripts, &s.takeovers)
	return s
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("server: closed")

// DefaultIOLoops is the number of event loops for procs cores: one fewer,
// at least one. As Redis advises for its I/O threads, a core is left to the
// rest of the process (the store's background work, Raft and Pebble in
// durable mode, the garbage collector) and, on a small machine, to the
// clients: on 2 cores one loop served 18% more RL.CHECKs than two at
// -P 1 and at -P 16 (redis-benchmark -c 50 beside the server).
func DefaultIOLoops(procs int) int { return max(1, procs-1) }

// defaultIOLoops is the loops an IOLoops of 0 asks for: DefaultIOLoops,
// or one per core when every reply waits for its commit (a strong
// Committer), where one loop per core kept 10% more RL.CHECKs a second
// going at -P 16 than one fewer (four alternating rounds on 2 cores,
// docs/performance.md).
func (s *Server) defaultIOLoops() int {
	procs := runtime.GOMAXPROCS(0)
	if s.committer != nil && s.committer.Strong() {
		return procs
	}
	return DefaultIOLoops(procs)
}

// Serve accepts connections on ln until Shutdown is called. It always
// returns a non-nil error: ErrServerClosed after Shutdown, also when
// Shutdown came first (ln is then closed at once). Temporary Accept errors
// (out of descriptors or memory) do not end it: it backs off and goes on
// (see backOff). Connections beyond MaxClients are refused (see refuse).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	closed := s.closing.Load() // Shutdown ran before ln was known to it
	if !closed && !s.loopsRan {
		s.loopsRan = true
		n := s.cfg.IOLoops
		if n == 0 {
			n = s.defaultIOLoops()
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
	spare, _ := os.Open(os.DevNull) // see shed
	defer func() { spare.Close() }()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			if !temporary(err) {
				return err
			}
			if s.shed(ln, err, &spare) {
				continue
			}
			delay = s.backOff(err, delay)
			continue
		}
		delay = 0
		if err := s.admit(nc); err != nil {
			return err
		}
	}
}

// admit serves a new connection, or refuses it when MaxClients are
// connected. It returns ErrServerClosed if Shutdown has begun.
func (s *Server) admit(nc net.Conn) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		nc.Close()
		return ErrServerClosed
	}
	if s.cfg.OpenClients.Add(1) > int64(s.cfg.MaxClients) {
		s.cfg.OpenClients.Add(-1)
		s.mu.Unlock()
		s.refuse(nc)
		return nil
	}
	c := s.newConn(nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	// Adopted under mu, so that Shutdown's wake-up finds it.
	adopted := s.adopt(c, nc)
	s.mu.Unlock()
	if !adopted {
		c.attach(nc)
		go s.serveConn(c)
	}
	return nil
}

// refuse answers a connection beyond MaxClients with Redis's error and
// closes it. The error is a few bytes on a new socket: the write does not
// wait, and is abandoned if it would (over TLS, a handshake first).
func (s *Server) refuse(nc net.Conn) {
	s.rejected.Add(1)
	s.metrics.rejected.Inc()
	if _, isTCP := nc.(*net.TCPConn); isTCP {
		nc.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
		io.WriteString(nc, "-ERR max number of clients reached\r\n")
	}
	nc.Close()
}

// shed takes a waiting connection when Accept failed for want of file
// descriptors (EMFILE, ENFILE): it gives up the spare descriptor Serve
// keeps (*spare) and accepts with it, so that the client is served, or
// refused as beyond MaxClients, rather than left hanging in the listen
// backlog; then it takes a spare again if it can. It reports whether it
// took a connection.
func (s *Server) shed(ln net.Listener, err error, spare **os.File) bool {
	if *spare == nil || (!errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE)) {
		if *spare == nil {
			*spare, _ = os.Open(os.DevNull)
		}
		return false
	}
	(*spare).Close()
	*spare = nil
	nc, aerr := ln.Accept()
	if aerr == nil {
		aerr = s.admit(nc)
	}
	*spare, _ = os.Open(os.DevNull)
	return aerr == nil
}

// temporary reports whether an Accept error passes: running out of
// descriptors or memory, or a connection aborted before it was taken.
func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// backOff waits after a temporary Accept error, twice as long as last time
// (delay) up to a second, starting at 5 ms, as net/http does, and returns
// the wait. Connections already open are served meanwhile; new ones wait
// in the listen backlog.
func (s *Server) backOff(err error, delay time.Duration) time.Duration {
	delay = min(max(2*delay, 5*time.Millisecond), time.Second)
	s.metrics.acceptErrors.Inc()
	s.logThrottled(&s.throttle.accept, slog.LevelWarn, "accept failed; retrying", "err", err, "retry_in", delay)
	time.Sleep(delay)
	return delay
}

// Shutdown stops accepting, lets every connection finish the commands it
// has already read, flushes their replies and closes them. If ctx ends
// first, the remaining connections are closed at once and ctx's error is
// returned without waiting further: a connection still inside a command
// then (one that waits on the limiter, say) is abandoned to finish alone,
// and its reply is never sent.
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
		s.scripts.Close()
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			if c.nc != nil {
				// Close waits for a read in progress, which a command
				// that does not return never ends.
				go c.nc.Close()
			}
		}
		s.mu.Unlock()
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
