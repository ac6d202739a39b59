package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Server-side bounds.
const (
	// maxInflightPerConn bounds the handlers running for one connection;
	// at the bound the connection is not read until one finishes.
	maxInflightPerConn = 1024

	// writeTimeout bounds one frame write: a peer that stops reading for
	// this long loses its connection.
	writeTimeout = 10 * time.Second
)

// noHandlerMsg is the error text a request gets before Handle is called.
const noHandlerMsg = "TRYAGAIN the node's internal RPC handler is not ready yet"

// Handler serves one RPC: method and body as the caller sent them; it
// returns the reply body or an error whose text the caller receives
// unchanged as a *RemoteError. Handlers run concurrently, each request in
// its own goroutine, so a handler may block: a slow one delays no other
// request. ctx carries the caller's deadline (sent as the time the caller
// had left, so the nodes' clocks need not agree) and ends when the
// connection or the mux closes; a caller's cancel without a deadline does
// not reach it. A handler that returns after that deadline has its reply
// dropped: the caller has given up. body is the handler's to keep. The
// transport owns the returned slice and writes it after the handler
// returns: do not modify it afterwards.
type Handler func(ctx context.Context, method string, body []byte) ([]byte, error)

// Handle sets the RPC handler, replacing any previous one; requests whose
// handling starts after it returns use h. Until a handler is set, requests
// get an error reply (a *RemoteError starting "TRYAGAIN"). Safe to call at
// any time, from any goroutine; Handle(nil) removes the handler.
func (m *Mux) Handle(h Handler) {
	if h == nil {
		m.handler.Store(nil)
		return
	}
	m.handler.Store(&h)
}

// serverConn is the serving side of one RPC connection.
type serverConn struct {
	m    *Mux
	conn net.Conn
	ctx  context.Context
	sem  chan struct{}
	fw   frameWriter
}

// serveRPC reads requests from c until it fails or closes, each handled
// in its own goroutine, then closes c.
func (m *Mux) serveRPC(c net.Conn) {
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	defer c.Close()
	s := &serverConn{m: m, conn: c, ctx: ctx, sem: make(chan struct{}, maxInflightPerConn),
		fw: frameWriter{conn: c, bw: bufio.NewWriterSize(c, ioBufSize)}}
	br := bufio.NewReaderSize(c, ioBufSize)
	for {
		f, err := readFrame(br, m.opts.MaxFrame)
		if err == nil && f.kind != frameRequest {
			err = fmt.Errorf("%w: frame kind %d from a caller", errProtocol, f.kind)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				m.log.Debug("raft listener: rpc connection closed", "remote", c.RemoteAddr().String(), "error", err)
			}
			return
		}
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		go s.handle(f)
	}
}

// handle runs the handler for f and writes its reply, unless the
// caller's deadline passed meanwhile: the caller has stopped waiting (its
// deadline is earlier than the handler's by the request's transit time),
// and a late error reply, "context deadline exceeded" likely, must not
// race the caller's own ctx error.
func (s *serverConn) handle(f frame) {
	defer func() { <-s.sem }()
	reply, late := s.run(f)
	if late {
		return
	}
	if uint64(frameFixed+len(reply.body)) > uint64(s.m.opts.MaxFrame) {
		msg := fmt.Sprintf("ERR reply of %d bytes is above the %d-byte frame limit", len(reply.body), s.m.opts.MaxFrame)
		if reply.kind == frameError {
			msg = string(reply.body[:s.m.opts.MaxFrame-frameFixed])
		}
		reply.kind, reply.body = frameError, []byte(msg)
	}
	if err := s.fw.write(reply); err != nil {
		s.conn.Close()
	}
}

// run calls the handler for f with the request's deadline and returns its
// reply frame, and whether the deadline passed before it returned.
func (s *serverConn) run(f frame) (reply frame, late bool) {
	reply = frame{id: f.id, kind: frameReply}
	h := s.m.handler.Load()
	if h == nil {
		reply.kind, reply.body = frameError, []byte(noHandlerMsg)
		return reply, false
	}
	ctx, cancel := s.ctx, context.CancelFunc(func() {})
	if f.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
	}
	defer cancel()
	body, err := (*h)(ctx, f.method, f.body)
	if err != nil {
		reply.kind, body = frameError, []byte(err.Error())
	}
	reply.body = body
	return reply, errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// frameWriter serializes frame writes on a connection and batches them:
// the writer that finds no other waiting flushes, so frames written
// together go out in one system call.
type frameWriter struct {
	conn    net.Conn
	waiting atomic.Int32
	mu      sync.Mutex
	bw      *bufio.Writer
}

// write writes f, flushing unless another writer is waiting to write. An
// error means the connection is unusable.
func (w *frameWriter) write(f frame) error {
	w.waiting.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	err := writeFrame(w.bw, f)
	if w.waiting.Add(-1) == 0 && err == nil {
		err = w.bw.Flush()
	}
	return err
}
