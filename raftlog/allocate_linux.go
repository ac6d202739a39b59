package raftlog

import (
	"errors"
	"os"
	"syscall"
)

// allocate gives f n bytes of allocated disk space: fallocate, which
// reserves the blocks at once, or zeros where the filesystem lacks it.
func allocate(f *os.File, n int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, n)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return fill(f, n)
	}
	return err
}
