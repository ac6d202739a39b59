package server

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// budget bounds the bytes that all connections together hold beyond their
// usual buffers: read buffers grown for a request larger than
// initialReadBuf, argument arrays grown beyond keptArgs and element offsets
// beyond keptOffs. Without it, clients that each send most of a large
// request and stop could make the server hold gigabytes. It also keeps
// the arrays that connections let go of after a large request (spares),
// for the next one. It is safe for concurrent use; a nil budget is
// unbounded and keeps nothing.
type budget struct {
	max    int64
	used   atomic.Int64
	spares spares
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

// spares keeps the large arrays that readers let go of once a request
// larger than usual is done (read buffers, element offsets, argument
// arrays), so that the next large request, on any connection, reuses
// memory that is mapped and warm. A new 24 MB argument array costs the
// event loop page faults and garbage-collector assists (20 to 70 ms
// measured on a loaded 2-core machine, for one request of a million
// arguments), a reused one a few ms.
//
// Arrays are kept by capacity, a power of two, in sync.Pools: the garbage
// collector drops the arrays unused for two of its cycles, so those of an
// attack are let go once it is over, and they are not counted in the
// budget while they wait. Argument arrays are cleared before they are
// kept, so that a spare holds no pointer into a read buffer. Safe for
// concurrent use.
type spares struct {
	bufs spareArrays[byte]
	offs spareArrays[uint32]
	args spareArrays[[]byte] // all nil
}

// spareArrays keeps arrays of T by capacity, 2^k in its k-th pool. A nil
// *spareArrays keeps nothing.
type spareArrays[T any] [48]sync.Pool

// class returns the index of the pool of arrays of capacity n, -1 if n is
// not a power of two that is kept.
func (p *spareArrays[T]) class(n int) int {
	k := bits.Len(uint(n)) - 1
	if p == nil || n <= 0 || n&(n-1) != 0 || k >= len(p) {
		return -1
	}
	return k
}

// get returns an array of length 0 and capacity size: a kept one, or a
// new one. The elements of a kept array of a type without pointers are
// not zeroed: the caller writes before it reads.
func (p *spareArrays[T]) get(size int) []T {
	if k := p.class(size); k >= 0 {
		if a, ok := p[k].Get().(*[]T); ok {
			return (*a)[:0]
		}
	}
	return make([]T, 0, size)
}

// put keeps a for get to hand out again, if its capacity is a power of
// two. The caller must not use a afterwards, nor any slice of it.
func (p *spareArrays[T]) put(a []T) {
	if k := p.class(cap(a)); k >= 0 {
		a = a[:0]
		p[k].Put(&a)
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
