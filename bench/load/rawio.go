package load

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawConn reads and writes a TCP connection with raw system calls inside
// its syscall.RawConn: the netpoller still waits for readiness, but a read
// or write that can proceed skips entersyscall/exitsyscall, whose P
// hand-offs (a loopback write runs long enough for sysmon to retake the P)
// made the client spend more CPU per request than the servers it measures.
// The callbacks are made once, so nothing allocates. Owned by one worker.
type rawConn struct {
	rc      syscall.RawConn
	p       []byte
	n       int
	errno   syscall.Errno
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
}

// newRawConn returns a rawConn for a TCP connection, or nil.
func newRawConn(nc net.Conn) *rawConn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawConn{rc: rc}
	r.readFn, r.writeFn = r.read, r.write
	return r
}

func (r *rawConn) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.n, r.errno = int(n), e
		return true
	}
}

func (r *rawConn) Read(p []byte) (int, error) {
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

func (r *rawConn) write(fd uintptr) bool {
	for r.n < len(r.p) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&r.p[r.n])), uintptr(len(r.p)-r.n))
		switch e {
		case 0:
			r.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.errno = e
			return true
		}
	}
	return true
}

func (r *rawConn) Write(p []byte) (int, error) {
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
