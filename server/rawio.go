package server

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawSocket reads and writes a TCP connection with raw system calls
// (syscall.RawSyscall) through its syscall.RawConn, so that the runtime's
// netpoller still waits for readiness and honours deadlines, but a read or
// write that can proceed does not go through entersyscall/exitsyscall.
//
// Why: on a loopback write the kernel also delivers the bytes to the
// client, which takes long enough that the runtime's sysmon considers the
// goroutine blocked in a system call, hands its P to another thread and
// wakes one (futex) for it; at one request per round trip that thread
// churn cost more CPU than the command itself. The socket is non-blocking,
// so a raw call never blocks: it returns EAGAIN and the netpoller waits.
//
// The read and write callbacks are method values made once per connection,
// so that no call allocates a closure. A rawSocket is owned by its
// connection's goroutine.
type rawSocket struct {
	rc      syscall.RawConn
	p       []byte // the buffer of the call in progress
	n       int
	errno   syscall.Errno
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
}

// newRawSocket returns a rawSocket for nc, or nil if nc has no raw file
// descriptor (TLS, pipes in tests), which then uses nc's Read and Write.
func newRawSocket(nc net.Conn) *rawSocket {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawSocket{rc: rc}
	r.readFn, r.writeFn = r.read, r.write
	return r
}

func (r *rawSocket) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait for readiness
		}
		r.n, r.errno = int(n), e
		return true
	}
}

// Read reads once into p, like net.Conn's Read.
func (r *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.errno = p, 0, 0
	err := r.rc.Read(r.readFn)
	r.p = nil
	switch {
	case err != nil:
		return 0, err
	case r.errno != 0:
		return 0, r.errno
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

func (r *rawSocket) write(fd uintptr) bool {
	for r.n < len(r.p) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&r.p[r.n])), uintptr(len(r.p)-r.n))
		switch e {
		case 0:
			r.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // wait until writable
		default:
			r.errno = e
			return true
		}
	}
	return true
}

// Write writes all of p, like net.Conn's Write.
func (r *rawSocket) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.errno = p, 0, 0
	err := r.rc.Write(r.writeFn)
	n := r.n
	r.p = nil
	switch {
	case err != nil:
		return n, err
	case r.errno != 0:
		return n, r.errno
	}
	return n, nil
}
