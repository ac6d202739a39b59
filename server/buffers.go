package server

import "sync/atomic"

// budget bounds the bytes that all connections together hold beyond their
// usual buffers: read buffers grown for a request larger than
// initialReadBuf, argument arrays grown beyond keptArgs and element offsets
// beyond keptOffs. Without it, clients that each send most of a large
// request and stop could make the server hold gigabytes. It is safe for concurrent use; a nil budget is
// unbounded.
type budget struct {
	max  int64
	used atomic.Int64
}

// take reserves n bytes and reports whether they fit.
func (b *budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

// give returns n bytes taken before.
func (b *budget) give(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}

// connOverhead estimates what a connection holds besides its buffers:
// its conn, reader and socket structures and, for a connection served by
// a goroutine, part of that goroutine's stack.
const connOverhead = 4 << 10

// account records the memory c holds now (connOverhead and the capacity
// of its buffers) in the server's connection memory, which INFO reports
// and --maxmemory counts. It runs after each batch; in steady state the
// figure does not change and nothing is written.
func (c *conn) account() {
	m := int64(connOverhead + len(c.rd.buf) + cap(c.out) + cap(c.rd.inline) + offBytes*cap(c.rd.offs) +
		argBytes*(cap(c.rd.args)+cap(c.batch)+cap(c.keys)) + 8*cap(c.ends))
	if m != c.mem {
		c.s.connMem.Add(m - c.mem)
		c.mem = m
	}
}

// unaccount removes c's memory from the server's connection memory when
// it closes, and gives back what its reader took from the budget.
func (c *conn) unaccount() {
	c.s.connMem.Add(-c.mem)
	c.mem = 0
	c.rd.free()
}

// ConnMemory returns the estimated bytes that client connections hold:
// their buffers and per-connection structures.
func (s *Server) ConnMemory() int64 { return s.connMem.Load() }
