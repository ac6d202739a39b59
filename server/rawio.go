package server

import (
	"errors"
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawSocket reads and writes a TCP connection with raw system calls
// (syscall.RawSyscall) on its descriptor, inside its syscall.RawConn, so
// that the runtime's netpoller still waits for readiness and honours
// deadlines, but a read or write that can proceed does not go through
// entersyscall/exitsyscall.
//
// Why raw calls: on a loopback write the kernel also delivers the bytes to
// the client, which takes long enough that the runtime's sysmon considers
// the goroutine blocked in a system call, hands its P to another thread
// and wakes one (futex) for it; at one request per round trip that thread
// churn cost more CPU than the command. The socket is non-blocking, so a
// raw call never blocks: it returns EAGAIN and the netpoller waits.
//
// The whole connection runs inside one RawConn.Read (Server.serveRaw), so
// that the callbacks are made once. After a read that emptied the socket
// it still reads once more before it waits, as a net.Conn's Read does:
// the peer's FIN may have arrived with the last bytes, in the readiness
// the netpoller has already reported, and waiting would then keep a
// closed connection open for ever.
//
// Writes lock the descriptor separately from reads, so replies are written
// from inside the read callback. The callbacks are made once per
// connection, so nothing allocates. A rawSocket is owned by its
// connection's goroutine.
type rawSocket struct {
	rc      syscall.RawConn
	fd      uintptr // valid inside Server.serveRaw's callback
	drained bool    // the last read emptied the socket (see loop.serve)

	p       []byte // the buffer of the write in progress
	n       int
	err     error // of the write in progress
	writeFn func(fd uintptr) bool
}

// errAgain is returned by rawSocket.Read when the socket has no data.
var errAgain = errors.New("no data yet")

// newRawSocket returns a rawSocket for a TCP connection, or nil for any
// other net.Conn (TLS, pipes in tests), which then uses its Read and Write.
func newRawSocket(nc net.Conn) *rawSocket {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawSocket{rc: rc}
	r.writeFn = r.write
	return r
}

// Read reads once into p from the descriptor of the callback in progress.
// It returns errAgain if there is nothing to read, and records whether the
// read emptied the socket: a read returns less than asked only when the
// socket's receive queue is empty, and bytes that arrive later make the
// edge-triggered netpoller wake the connection.
func (r *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, r.fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			if n == 0 {
				return 0, io.EOF
			}
			r.drained = int(n) < len(p)
			return int(n), nil
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, errAgain
		}
		return 0, e
	}
}

func (r *rawSocket) write(fd uintptr) bool {
	n, err := rawWrite(fd, r.p[r.n:])
	r.n += n
	if err == errAgain {
		return false // wait until writable
	}
	r.err = err
	return true
}

// rawWrite writes p to fd without waiting: it returns how much the socket
// took, and errAgain if that is not all of p.
func rawWrite(fd uintptr, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
		switch e {
		case 0:
			n += int(m)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return n, errAgain
		default:
			return n, e
		}
	}
	return n, nil
}

// Write writes all of p, like net.Conn's Write, waiting with the
// netpoller while the socket's send buffer is full.
func (r *rawSocket) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Write(r.writeFn)
	n := r.n
	r.p = nil
	switch {
	case err != nil:
		return n, err
	case r.err != nil:
		return n, r.err
	}
	return n, nil
}
