package transport

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// acceptQueue is how many accepted connections a layer buffers for raft.
const acceptQueue = 64

// streamLayer is one raft group's view of the mux: a raft.StreamLayer.
type streamLayer struct {
	m     *Mux
	group uint32
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// Stream returns the raft.StreamLayer of group, for
// raft.NewNetworkTransportWithConfig. Its Dial connects to the peer mux at
// the given address (the peer's Advertise) and opens a stream for the
// same group; its Accept returns the streams peers opened for group; its
// Addr is this mux's advertised address; its Close (raft calls it when
// the transport closes) unregisters the layer and closes the connections
// it had not yet accepted, leaving every other group alone.
//
// While a layer is registered, Stream(group) returns that same layer;
// after its Close, Stream(group) registers a new one. Connections that
// arrive for a group with no layer are held up to Options.HoldTimeout for
// one to register, then closed. After the mux's Close, Stream returns a
// layer whose Accept and Dial fail with ErrClosed.
func (m *Mux) Stream(group uint32) raft.StreamLayer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.layers[group]; l != nil {
		return l
	}
	l := &streamLayer{m: m, group: group, conns: make(chan net.Conn, acceptQueue), done: make(chan struct{})}
	if m.closed {
		return l
	}
	m.layers[group] = l
	close(m.regCh)
	m.regCh = make(chan struct{})
	return l
}

// lookup returns group's registered layer (or nil) and a channel closed
// at the next registration.
func (m *Mux) lookup(group uint32) (*streamLayer, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.layers[group], m.regCh
}

// Accept waits for the next stream a peer opened for this group. It fails
// with ErrStreamClosed after Close and ErrClosed after the mux's Close.
func (l *streamLayer) Accept() (net.Conn, error) {
	select {
	case <-l.done:
		return nil, ErrStreamClosed
	case <-l.m.done:
		return nil, ErrClosed
	case c := <-l.conns:
		return c, nil
	}
}

// Close unregisters the layer (only if it is still group's layer) and
// closes the connections not yet accepted. Idempotent.
func (l *streamLayer) Close() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		if l.m.layers[l.group] == l {
			delete(l.m.layers, l.group)
		}
		l.m.mu.Unlock()
		close(l.done)
		l.drain()
	})
	return nil
}

// drain closes the connections queued for Accept.
func (l *streamLayer) drain() {
	for {
		select {
		case c := <-l.conns:
			c.Close()
		default:
			return
		}
	}
}

// Addr returns the mux's advertised address: raft's LocalAddr.
func (l *streamLayer) Addr() net.Addr { return l.m.adv }

// Dial opens a stream for this layer's group to the mux at address,
// bounding the connect and the header write by timeout.
func (l *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.done:
		return nil, ErrStreamClosed
	default:
	}
	return l.m.dial(string(address), kindRaft, l.group, timeout)
}

// dial connects to the mux at addr and writes the header for kind and
// group (and, with a secret, runs the exchange of auth.go), all within
// timeout. The connection is tracked for Close.
func (m *Mux) dial(addr string, kind byte, group uint32, timeout time.Duration) (*trackedConn, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(m.ctx, "tcp", addr)
	if err != nil {
		if m.isClosed() {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, addr, err)
	}
	tc, err := m.track(c)
	if err != nil {
		return nil, err
	}
	if m.opts.Secret != nil {
		err = proveDialer(tc, m.opts.Secret, encodeHeaderVersion(versionAuth, kind, group), time.Now().Add(timeout))
	} else {
		h := encodeHeader(kind, group)
		tc.SetWriteDeadline(time.Now().Add(timeout))
		if _, err = tc.Write(h[:]); err == nil {
			err = tc.SetWriteDeadline(time.Time{})
		}
	}
	if err != nil {
		tc.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, addr, err)
	}
	return tc, nil
}

// deliver queues c for group's Accept. If the group has no layer or its
// queue is full, c waits up to HoldTimeout (as one of at most maxHeld such
// connections) for a layer to register or room to free, else is closed.
func (m *Mux) deliver(group uint32, c net.Conn) {
	if m.opts.HoldTimeout < 0 {
		if l, _ := m.lookup(group); l == nil || !l.offer(c) {
			m.log.Debug("raft listener: group not accepting, connection closed", "group", group)
			c.Close()
		}
		return
	}
	if m.held.Add(1) > maxHeld {
		m.held.Add(-1)
		if l, _ := m.lookup(group); l == nil || !l.offer(c) {
			m.log.Debug("raft listener: too many held connections, closed one", "group", group)
			c.Close()
		}
		return
	}
	defer m.held.Add(-1)
	timer := time.NewTimer(m.opts.HoldTimeout)
	defer timer.Stop()
	for {
		l, registered := m.lookup(group)
		var queue chan net.Conn
		var layerDone <-chan struct{}
		if l != nil {
			queue, layerDone = l.conns, l.done
		}
		select {
		case queue <- c:
			l.closedSince()
			return
		case <-layerDone:
			continue
		case <-registered:
			continue
		case <-m.done:
		case <-timer.C:
			m.log.Debug("raft listener: group not accepting in time, connection closed", "group", group)
		}
		c.Close()
		return
	}
}

// offer queues c for Accept if there is room, and reports whether it did.
func (l *streamLayer) offer(c net.Conn) bool {
	select {
	case l.conns <- c:
		l.closedSince()
		return true
	default:
		return false
	}
}

// closedSince drains the queue if the layer was closed: a connection
// queued after Close's drain is closed here instead of waiting forever.
func (l *streamLayer) closedSince() {
	select {
	case <-l.done:
		l.drain()
	default:
	}
}
