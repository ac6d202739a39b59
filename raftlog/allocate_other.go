//go:build !linux

package raftlog

import "os"

// allocate gives f n bytes of allocated disk space by writing zeros.
func allocate(f *os.File, n int64) error { return fill(f, n) }
