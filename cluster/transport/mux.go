package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxHeld bounds the raft connections held at once for unregistered
// groups; beyond it they are closed at once.
const maxHeld = 256

// Mux is a node's one TCP listener and its outgoing connections. It
// carries a raft stream per group (Stream) and request/response calls
// between nodes (Handle, Call). All methods are safe for concurrent use.
type Mux struct {
	ln       net.Listener
	adv      advertiseAddr
	opts     Options
	log      *slog.Logger
	handler  atomic.Pointer[Handler]
	held     atomic.Int32 // raft connections waiting for their group
	authWarn warnThrottle // refused connections: a warning a second at most

	ctx    context.Context // ends at Close: dials and handlers see it
	cancel context.CancelFunc
	done   chan struct{} // closed at Close

	mu     sync.Mutex
	closed bool
	conns  map[*trackedConn]struct{}
	layers map[uint32]*streamLayer
	regCh  chan struct{} // closed and replaced when a layer registers

	pmu   sync.RWMutex
	peers map[string]*peerPool // RPC pools by address

	wg sync.WaitGroup // the mux's own goroutines, not handlers
}

// Listen listens on addr ("127.0.0.1:0" allowed) and starts accepting.
// The returned Mux must be closed with Close.
func Listen(addr string, opts Options) (*Mux, error) {
	opts = opts.withDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	adv, err := advertise(opts.Advertise, ln.Addr())
	if err != nil {
		ln.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mux{
		ln: ln, adv: adv, opts: opts, log: opts.Logger,
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		conns:  map[*trackedConn]struct{}{},
		layers: map[uint32]*streamLayer{},
		regCh:  make(chan struct{}),
		peers:  map[string]*peerPool{},
	}
	if opts.Handler != nil {
		m.Handle(opts.Handler)
	}
	m.goTracked(m.acceptLoop)
	return m, nil
}

// advertise returns the address to advertise: adv, with the listener's
// port if adv has none or 0, or the listener's address if adv is "".
func advertise(adv string, ln net.Addr) (advertiseAddr, error) {
	if adv == "" {
		return advertiseAddr(ln.String()), nil
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return "", fmt.Errorf("transport: advertise address %q: %w", adv, err)
	}
	if port == "" || port == "0" {
		port = strconv.Itoa(ln.(*net.TCPAddr).Port)
	}
	return advertiseAddr(net.JoinHostPort(host, port)), nil
}

// advertiseAddr is the net.Addr of an advertised address.
type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }

// Addr returns the listener's address (the port chosen for ":0").
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Advertise returns the address other nodes dial to reach this mux: the
// address raft groups must be configured with for this node.
func (m *Mux) Advertise() string { return string(m.adv) }

// Close closes the listener and every connection, incoming and outgoing,
// raft's and RPC's: Accept of every stream layer then returns ErrClosed,
// calls in flight fail, and later calls and dials fail with ErrClosed.
// It waits for the mux's own goroutines, not for running handlers (whose
// ctx it cancels). Close raft groups before their mux. Idempotent: later
// calls return nil.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	conns := m.conns
	m.conns = nil
	m.mu.Unlock()

	close(m.done)
	m.cancel()
	err := m.ln.Close()
	for c := range conns {
		c.Close()
	}
	m.wg.Wait()
	return err
}

// goTracked runs f in a goroutine Close waits for, unless the mux is
// closed; it reports whether f was started.
func (m *Mux) goTracked(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// trackedConn is a connection Close will close; its own Close forgets it.
type trackedConn struct {
	net.Conn
	m    *Mux
	once sync.Once
}

// track registers c for Close, or closes it and returns ErrClosed if the
// mux is closed.
func (m *Mux) track(c net.Conn) (*trackedConn, error) {
	tc := &trackedConn{Conn: c, m: m}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		c.Close()
		return nil, ErrClosed
	}
	m.conns[tc] = struct{}{}
	return tc, nil
}

// Close closes the connection once and forgets it; later calls return nil.
func (c *trackedConn) Close() error {
	var err error
	c.once.Do(func() {
		err = c.Conn.Close()
		c.m.mu.Lock()
		delete(c.m.conns, c)
		c.m.mu.Unlock()
	})
	return err
}

// acceptLoop accepts connections until the listener closes, each
// handshaken in its own goroutine.
func (m *Mux) acceptLoop() {
	var delay time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || m.isClosed() {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			m.log.Warn("raft listener: accept failed", "error", err, "retry_in", delay)
			select {
			case <-m.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		tc, err := m.track(c)
		if err != nil {
			return
		}
		if !m.goTracked(func() { m.handshake(tc) }) {
			tc.Close()
		}
	}
}

// isClosed reports whether Close was called.
func (m *Mux) isClosed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// authenticate checks that c's header h (bytes b) is the version this
// mux's secret calls for and, with a secret, runs the acceptor's side of
// the exchange (auth.go) within HandshakeTimeout.
func (m *Mux) authenticate(c net.Conn, h header, b [headerLen]byte) error {
	switch {
	case m.opts.Secret == nil && h.version == versionAuth:
		return errors.New("the peer uses a cluster secret and this node has none (set the same --admin-token on every node)")
	case m.opts.Secret == nil:
		return nil
	case h.version != versionAuth:
		return errors.New("the peer sent no proof of the cluster secret (set the same --admin-token on every node)")
	}
	return proveAcceptor(c, m.opts.Secret, b, time.Now().Add(m.opts.HandshakeTimeout))
}

// handshake reads c's header within HandshakeTimeout (and, with a secret,
// the peer's proof of it) and hands c to its raft group or serves its
// RPCs; it closes c on any failure.
func (m *Mux) handshake(c *trackedConn) {
	c.SetReadDeadline(time.Now().Add(m.opts.HandshakeTimeout))
	var b [headerLen]byte
	_, err := io.ReadFull(c, b[:])
	var h header
	if err == nil {
		h, err = parseHeader(b)
	}
	if err == nil {
		err = c.SetReadDeadline(time.Time{})
	}
	if err != nil {
		m.log.Debug("raft listener: connection rejected", "remote", c.RemoteAddr().String(), "error", err)
		c.Close()
		return
	}
	if err := m.authenticate(c, h, b); err != nil {
		if m.authWarn.allow() {
			m.log.Warn("raft listener: connection refused", "remote", c.RemoteAddr().String(), "error", err)
		}
		c.Close()
		return
	}
	if h.kind == kindRaft {
		m.deliver(h.group, c)
		return
	}
	m.serveRPC(c)
}
