// Package boundedfile reads the files an operator points the node at
// (--rules, --envoy-config) with bounds: at most a given number of bytes,
// within a given time, without blocking on a FIFO that has no writer. A
// path that names /dev/zero, a FIFO that is written forever or a file that
// grows without end is refused instead of read until memory runs out.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// Errors of Read, wrapped with the path and figures.
var (
	// ErrTooLarge: the file holds more than the bound.
	ErrTooLarge = errors.New("larger than the bound on configuration files")
	// ErrNoEnd: the file did not end within the wait (a FIFO or device
	// whose writer neither writes its end nor closes).
	ErrNoEnd = errors.New("did not end in time")
)

// Read returns the content of path, or an error once more than max bytes
// have been read (ErrTooLarge) or the read has not reached the end of the
// file within wait (ErrNoEnd: checked between reads, and as a deadline on
// files that have one, such as FIFOs). A regular file whose size is above
// max is refused without being read. A FIFO is opened without waiting for
// a writer: with none, it reads as empty. Read holds at most max+1 bytes
// (and a buffer's growth) in memory, whatever the file.
func Read(path string, max int64, wait time.Duration) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Mode().IsRegular() && fi.Size() > max {
		return nil, fmt.Errorf("%w: %d bytes, the bound is %d", ErrTooLarge, fi.Size(), max)
	}
	deadline := time.Now().Add(wait)
	f.SetReadDeadline(deadline) // ErrNoDeadline for a regular file or a device: they end or are bounded by size
	size := int64(512)
	if fi.Mode().IsRegular() {
		size = fi.Size() + 1
	}
	buf := make([]byte, 0, min(size, max+1))
	r := io.LimitReader(f, max+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case int64(len(buf)) > max:
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
		case err == io.EOF:
			return buf, nil
		case errors.Is(err, os.ErrDeadlineExceeded), err == nil && time.Now().After(deadline):
			return nil, fmt.Errorf("%w: no end of file after %s and %d bytes (a FIFO or device that is never closed?)", ErrNoEnd, wait, len(buf))
		case err != nil:
			return nil, err
		}
	}
}
