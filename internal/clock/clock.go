package clock

import (
	"sync"
	"sync/atomic"
)

// Slew bounds how fast the decision clock converges on the wall clock: by
// at most 1/Slew of the time that passes (1%), so that it never runs
// slower than 99% or faster than 101% of real time. A rate limit is off by
// the same share while the clock converges, which 1% keeps below the
// noise of the clients' own clocks; NTP's own slew, 0.05%, would take 83
// days to absorb an hour.
const Slew = 100

// anchorEvery is how old the anchor gets before a reading moves it: the
// error a wall step can cause between two readings is at most 2/Slew of
// the anchor's age (20 µs), and moving it costs a lock.
const anchorEvery = 1e6 // 1 ms in ns

// Source reads the clocks a Clock follows: the wall clock, in ns since the
// Unix epoch, which may step; and a monotonic clock, in ns since any fixed
// origin, which never steps. Read takes both at once. It must be safe for
// concurrent use.
type Source interface {
	Read() (wall, mono int64)
}

// SourceFunc is a Source that calls itself.
type SourceFunc func() (wall, mono int64)

// Read calls f.
func (f SourceFunc) Read() (wall, mono int64) { return f() }

// Clock is the decision clock (see the package doc for its rule). All
// methods are safe for concurrent use; Now and Read take no lock and
// allocate nothing.
type Clock struct {
	src Source
	// The anchor: at the monotonic reading mono, the decision time was at.
	// Readers load it with the seqlock seq (odd while it is written);
	// writers hold mu.
	mu     sync.Mutex
	seq    atomic.Uint64
	mono   atomic.Int64
	at     atomic.Int64
	raised atomic.Int64 // ns the clock was raised by, in all (AtLeast)
}

// New returns a clock that starts at src's wall clock.
func New(src Source) *Clock {
	c := &Clock{src: src}
	w, m := src.Read()
	c.set(m, w)
	return c
}

// Now returns the decision time in ns since the Unix epoch.
func (c *Clock) Now() int64 {
	d, _ := c.Read()
	return d
}

// Offset returns the decision time less the wall clock, in ns: positive
// after the wall clock stepped back, negative after it stepped forward, 0
// while they agree.
func (c *Clock) Offset() int64 {
	d, w := c.Read()
	return d - w
}

// Raised returns the ns by which AtLeast has raised the clock, in all.
func (c *Clock) Raised() int64 { return c.raised.Load() }

// Read returns the decision time and the wall clock, read together. A
// reading made 1 ms or more after the anchor moves the anchor to it,
// unless another reading is moving it.
func (c *Clock) Read() (decision, wall int64) {
	w, m := c.src.Read()
	am, at := c.anchor()
	d := decide(am, at, m, w)
	if m-am >= anchorEvery && c.mu.TryLock() {
		if am2, at2 := c.anchor(); am2 == am && at2 == at {
			c.set(m, d)
		}
		c.mu.Unlock()
	}
	return d, w
}

// AtLeast raises the clock to t if it is behind it, and returns how far it
// moved it (0 if it was not behind). From t on it runs and converges on
// the wall clock as before. A node calls it with the latest time its state
// was written at (a log entry stamped by another node's clock), so that it
// never decides earlier than that.
func (c *Clock) AtLeast(t int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, m := c.src.Read()
	am, at := c.anchor()
	d := decide(am, at, m, w)
	if t <= d {
		return 0
	}
	c.set(m, t)
	c.raised.Add(t - d)
	return t - d
}

// decide returns the decision time at the monotonic reading m and wall
// clock w, from the anchor (am, at): at plus the time elapsed since it,
// corrected toward w by at most 1/Slew of that time. A reading older than
// the anchor (another reading moved it meanwhile) is the anchor's time.
func decide(am, at, m, w int64) int64 {
	e := max(m-am, 0)
	d := at + e
	budget := e / Slew
	return d + min(max(w-d, -budget), budget)
}

// anchor returns the anchor, consistently.
func (c *Clock) anchor() (mono, at int64) {
	for {
		s := c.seq.Load()
		if s&1 == 0 {
			mono, at = c.mono.Load(), c.at.Load()
			if c.seq.Load() == s {
				return mono, at
			}
		}
	}
}

// set moves the anchor. Call with mu held (or before c is shared).
func (c *Clock) set(mono, at int64) {
	c.seq.Add(1)
	c.mono.Store(mono)
	c.at.Store(at)
	c.seq.Add(1)
}
