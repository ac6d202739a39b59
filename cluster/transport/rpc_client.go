package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Call sends one request to the mux at addr (its Advertise) and returns
// the reply body, which the caller owns. Calls to one address share
// Options.MaxIdlePerPeer pooled connections, each carrying any number of
// concurrent calls by request id. body is not retained after Call
// returns.
//
// Errors: a *RemoteError if the remote handler returned an error (its
// text unchanged); ErrFrameTooLarge if the request is above MaxFrame
// (nothing sent); ErrClosed after Close; else an error wrapping
// ErrUnreachable: the dial failed, the connection broke, the peer sent a
// bad frame, or ctx ended first (then it wraps ctx.Err() too, and the
// reply, if it comes, is dropped). Call waits as long as ctx allows: pass
// a deadline.
func (m *Mux) Call(ctx context.Context, addr, method string, body []byte) ([]byte, error) {
	if len(method) > maxMethod {
		return nil, fmt.Errorf("%w: method name of %d bytes, limit %d", ErrFrameTooLarge, len(method), maxMethod)
	}
	if n := requestLen(method, body); n > uint64(m.opts.MaxFrame) {
		return nil, fmt.Errorf("%w: request of %d bytes, limit %d", ErrFrameTooLarge, n, m.opts.MaxFrame)
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, addr, err)
	}
	p, err := m.peer(addr)
	if err != nil {
		return nil, err
	}
	cc, err := p.conn(ctx)
	if err != nil {
		return nil, err
	}
	return cc.call(ctx, method, body)
}

// peerPool is the RPC connections to one address: a fixed number of
// slots, each holding a connection or a dial in progress.
type peerPool struct {
	m     *Mux
	addr  string
	next  atomic.Uint32
	slots []poolSlot
}

type poolSlot struct {
	mu   sync.Mutex
	cc   *clientConn
	dial *pendingDial
}

// pendingDial is a dial in progress, shared by the calls that wait for it.
type pendingDial struct {
	done chan struct{}
	cc   *clientConn
	err  error
}

// peer returns addr's pool, creating it. Pools are kept until Close (a
// few hundred bytes each once their connections are gone).
func (m *Mux) peer(addr string) (*peerPool, error) {
	m.pmu.RLock()
	p := m.peers[addr]
	m.pmu.RUnlock()
	if p != nil {
		return p, nil
	}
	m.pmu.Lock()
	defer m.pmu.Unlock()
	if m.isClosed() {
		return nil, ErrClosed
	}
	if p = m.peers[addr]; p == nil {
		p = &peerPool{m: m, addr: addr, slots: make([]poolSlot, m.opts.MaxIdlePerPeer)}
		m.peers[addr] = p
	}
	return p, nil
}

// conn returns the next slot's live connection, dialling one if needed.
// A dial runs on its own (bounded by DialTimeout) so every call waiting
// for it shares its outcome while each can give up at its own ctx.
func (p *peerPool) conn(ctx context.Context) (*clientConn, error) {
	s := &p.slots[int(p.next.Add(1)%uint32(len(p.slots)))]
	s.mu.Lock()
	if s.cc != nil && !s.cc.dead.Load() {
		cc := s.cc
		s.mu.Unlock()
		return cc, nil
	}
	d := s.dial
	if d == nil {
		d = &pendingDial{done: make(chan struct{})}
		s.dial, s.cc = d, nil
		if !p.m.goTracked(func() { p.dialSlot(s, d) }) {
			s.dial = nil
			s.mu.Unlock()
			return nil, ErrClosed
		}
	}
	s.mu.Unlock()
	select {
	case <-d.done:
		return d.cc, d.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, p.addr, ctx.Err())
	}
}

// dialSlot dials p.addr for slot s, publishes the outcome in d and, on
// success, starts the connection's reader.
func (p *peerPool) dialSlot(s *poolSlot, d *pendingDial) {
	c, err := p.m.dial(p.addr, kindRPC, 0, p.m.opts.DialTimeout)
	if err == nil {
		d.cc = newClientConn(p.m, p.addr, c)
		if !p.m.goTracked(d.cc.readLoop) {
			d.cc.fail(ErrClosed)
			d.cc, err = nil, ErrClosed
		}
	}
	d.err = err
	s.mu.Lock()
	s.cc, s.dial = d.cc, nil
	s.mu.Unlock()
	close(d.done)
}

// clientConn is the calling side of one RPC connection: calls write
// request frames and wait for the reply with their id, which readLoop
// delivers.
type clientConn struct {
	m    *Mux
	addr string
	conn net.Conn
	fw   frameWriter
	dead atomic.Bool

	mu     sync.Mutex
	nextID uint64
	calls  map[uint64]chan result // nil once failed
	err    error                  // why it failed
}

// result is a call's outcome.
type result struct {
	body []byte
	err  error
}

func newClientConn(m *Mux, addr string, c net.Conn) *clientConn {
	return &clientConn{m: m, addr: addr, conn: c, calls: map[uint64]chan result{},
		fw: frameWriter{conn: c, bw: bufio.NewWriterSize(c, ioBufSize)}}
}

// call sends one request and waits for its reply or ctx's end. If ctx
// ends while the request is being written the connection is closed (a
// partial frame cannot be taken back); if it ends later the reply is
// just dropped when it comes.
func (cc *clientConn) call(ctx context.Context, method string, body []byte) ([]byte, error) {
	ch := make(chan result, 1)
	cc.mu.Lock()
	if cc.calls == nil {
		cc.mu.Unlock()
		return nil, cc.err
	}
	cc.nextID++
	id := cc.nextID
	cc.calls[id] = ch
	cc.mu.Unlock()

	f := frame{id: id, kind: frameRequest, method: method, body: body}
	if dl, ok := ctx.Deadline(); ok {
		f.timeout = max(time.Until(dl), 1)
	}
	cc.send(ctx, f)
	select {
	case r := <-ch:
		return r.body, r.err
	case <-ctx.Done():
		cc.forget(id)
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, cc.addr, ctx.Err())
	}
}

// send writes f. If the write fails, or ctx ends during it, the
// connection fails, and with it every call waiting on it, this one too.
func (cc *clientConn) send(ctx context.Context, f frame) {
	var writing atomic.Bool
	writing.Store(true)
	stop := context.AfterFunc(ctx, func() {
		if writing.CompareAndSwap(true, false) {
			cc.fail(ctx.Err())
		}
	})
	defer stop()
	err := cc.fw.write(f)
	if writing.CompareAndSwap(true, false) && err != nil {
		cc.fail(err)
	}
}

// forget drops a call's reply channel.
func (cc *clientConn) forget(id uint64) {
	cc.mu.Lock()
	delete(cc.calls, id)
	cc.mu.Unlock()
}

// readLoop delivers replies to their calls until the connection fails.
func (cc *clientConn) readLoop() {
	br := bufio.NewReaderSize(cc.conn, ioBufSize)
	for {
		f, err := readFrame(br, cc.m.opts.MaxFrame)
		if err == nil && f.kind == frameRequest {
			err = fmt.Errorf("%w: request frame from a callee", errProtocol)
		}
		if err != nil {
			cc.fail(err)
			return
		}
		r := result{body: f.body}
		if f.kind == frameError {
			r = result{err: &RemoteError{Msg: string(f.body)}}
		}
		cc.mu.Lock()
		ch := cc.calls[f.id]
		delete(cc.calls, f.id)
		cc.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// fail closes the connection, marks it dead for the pool, and fails every
// waiting call with ErrUnreachable (ErrClosed if the mux closed).
func (cc *clientConn) fail(cause error) {
	if cc.dead.Swap(true) {
		return
	}
	cc.conn.Close()
	err := fmt.Errorf("%w: %s: %w", ErrUnreachable, cc.addr, cause)
	if cc.m.isClosed() {
		err = ErrClosed
	}
	cc.mu.Lock()
	calls := cc.calls
	cc.calls, cc.err = nil, err
	cc.mu.Unlock()
	for _, ch := range calls {
		ch <- result{err: err}
	}
	if !errors.Is(err, ErrClosed) {
		cc.m.log.Debug("raft listener: rpc connection lost", "peer", cc.addr, "error", cause)
	}
}
