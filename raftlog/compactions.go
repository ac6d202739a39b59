package raftlog

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// compactions is the pebble.CompactionScheduler of a database: it grants
// as many compactions at once as the database allows without permission
// (DBForCompaction.GetAllowedWithoutPermission), as Pebble's default
// scheduler does, but it has no ticker. Pebble's default samples the
// allowance every 100 ms on a goroutine of its own, which woke an idle
// node ten times a second: a third of an idle single node's wake-ups, in an
// execution trace. Here a grant is tried when a compaction is done (Done)
// and when a flush raised the allowance (UpdateGetAllowedWithoutPermission,
// which Pebble calls after every flush). A compaction that waits then waits
// for one of those, where the default would also have tried within 100 ms:
// the allowance grows only with the compaction debt and the files in L0,
// which flushes raise, so no more than the end of a running compaction.
type compactions struct {
	db pebble.DBForCompaction // set by Register, before any other call

	mu      sync.Mutex
	running int  // compactions granted and not done
	allowed int  // the allowance when last read
	closed  bool // Unregister was called: grant nothing

	// granting serializes grants, and Unregister waits on it for the one
	// under way: DBForCompaction's methods are not called after it returns.
	granting sync.Mutex
}

var _ pebble.CompactionScheduler = (*compactions)(nil)

// Register is called once by the database when it opens.
func (c *compactions) Register(_ int, db pebble.DBForCompaction) { c.db = db }

// Unregister is called once by the database when it closes; it returns
// once no grant is calling into the database.
func (c *compactions) Unregister() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.granting.Lock() // wait for a grant under way
	c.granting.Unlock()
}

// TrySchedule grants a compaction if fewer run than the database allows.
func (c *compactions) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, nil
	}
	c.allowed = c.db.GetAllowedWithoutPermission()
	if c.running >= c.allowed {
		return false, nil
	}
	c.running++
	return true, grant{c}
}

// UpdateGetAllowedWithoutPermission is called after each flush, possibly
// with the database's mutex held: a raised allowance is granted on a
// goroutine of its own, since a grant calls back into the database.
func (c *compactions) UpdateGetAllowedWithoutPermission() {
	allowed := c.db.GetAllowedWithoutPermission()
	c.mu.Lock()
	raised := allowed > c.allowed
	c.allowed = allowed
	c.mu.Unlock()
	if raised {
		go c.grantWaiting()
	}
}

// grantWaiting grants the compactions that wait, while the database allows
// more than run.
func (c *compactions) grantWaiting() {
	c.granting.Lock()
	defer c.granting.Unlock()
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		c.allowed = c.db.GetAllowedWithoutPermission()
		if c.running >= c.allowed {
			c.mu.Unlock()
			return
		}
		c.running++ // counted before Schedule: the compaction may end before it returns
		c.mu.Unlock()
		waiting, _ := c.db.GetWaitingCompaction()
		if !waiting || !c.db.Schedule(grant{c}) {
			c.mu.Lock()
			c.running--
			c.mu.Unlock()
			return
		}
	}
}

// grant is the pebble.CompactionGrantHandle of one granted compaction.
type grant struct{ c *compactions }

// Started is called when the compaction starts.
func (grant) Started() {}

// MeasureCPU is called by the compaction's goroutines; CPU is not tracked.
func (grant) MeasureCPU(pebble.CompactionGoroutineKind) {}

// CumulativeStats reports the compaction's progress; it is not paced.
func (grant) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done is called when the compaction ends, without the database's locks:
// the compactions that wait may take its place.
func (g grant) Done() {
	g.c.mu.Lock()
	g.c.running--
	g.c.mu.Unlock()
	g.c.grantWaiting()
}
