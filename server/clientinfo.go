package server

import (
	"net"
	"strconv"
	"syscall"
	"time"
)

// describe returns the connection's CLIENT LIST line: every field Redis
// 7.2 prints, in its order. rlserver keeps no per-connection accounting of
// buffer memory, so qbuf, qbuf-free, argv-mem, multi-mem, rbs, rbp, obl,
// oll, omem and tot-mem are 0; there are no subscriptions (sub, psub,
// ssub) nor client tracking (redir -1). It reads only fields that are safe
// to read from other connections.
func (c *conn) describe(t time.Time) string {
	load := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	cmd := "NULL"
	if lc := c.lastCmd.Load(); lc != nil {
		cmd = *lc
	}
	idle := max((t.UnixNano()-c.lastSeen.Load())/1e9, 0)
	flags, multi := "N", int64(-1)
	if q := c.queued.Load(); q > 0 {
		flags, multi = "x", int64(q-1)
	}
	shown := c.shown.Load()
	user := "default"
	if shown&shownAdmin != 0 {
		user = "admin"
	}
	return "id=" + itoa(c.id) + " addr=" + c.addr + " laddr=" + c.laddr + " fd=" + itoa(int64(c.fdShown.Load())) +
		" name=" + load(c.name.Load()) + " age=" + itoa(int64(t.Sub(c.created)/time.Second)) +
		" idle=" + itoa(idle) + " flags=" + flags + " db=0 sub=0 psub=0 ssub=0 multi=" + itoa(multi) +
		" qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r" +
		" cmd=" + cmd + " user=" + user + " redir=-1 resp=" + itoa(int64(shown&shownProto)) +
		" lib-name=" + load(c.libName.Load()) + " lib-ver=" + load(c.libVer.Load()) + "\n"
}

// Bits of conn.shown.
const (
	shownProto = 0xff // the protocol version
	shownAdmin = 0x100
)

// publish makes the connection's protocol and user visible to CLIENT LIST
// on other connections. Call it after changing proto or admin.
func (c *conn) publish() {
	v := uint32(c.proto) & shownProto
	if c.admin {
		v |= shownAdmin
	}
	c.shown.Store(v)
}

// descriptor returns nc's file descriptor, or -1 if it has none.
func descriptor(nc net.Conn) int {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}
