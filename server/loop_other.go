//go:build !linux

package server

import (
	"errors"
	"net"
	"sync/atomic"
)

// loop is an event loop; there are none outside Linux, where every
// connection has a goroutine of its own.
type loop struct {
	nwaiting atomic.Int32
	inRound  bool
}

func (l *loop) deferFlush(c *conn) {}

func (l *loop) signal() {}

func (l *loop) takeOver(c *conn) {}

func (s *Server) startLoops(n int) error {
	return errors.New("event loops need Linux's epoll")
}

func (s *Server) adopt(c *conn, nc net.Conn) bool { return false }

func (s *Server) wakeLoops() {}

func closeFD(fd int) {}
