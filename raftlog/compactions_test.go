package raftlog

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rlserver/rlserver/internal/testutil"
)

// fakeDB is a pebble.DBForCompaction whose allowance and waiting
// compactions a test sets; Schedule records the grants it accepts.
type fakeDB struct {
	mu      sync.Mutex
	allowed int
	waiting int
	grants  []pebble.CompactionGrantHandle
}

func (f *fakeDB) GetAllowedWithoutPermission() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allowed
}

func (f *fakeDB) GetWaitingCompaction() (bool, pebble.WaitingCompaction) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting > 0, pebble.WaitingCompaction{}
}

func (f *fakeDB) Schedule(g pebble.CompactionGrantHandle) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiting == 0 {
		return false
	}
	f.waiting--
	f.grants = append(f.grants, g)
	return true
}

func (f *fakeDB) set(allowed, waiting int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allowed, f.waiting = allowed, waiting
}

func (f *fakeDB) scheduled() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.grants)
}

// TestCompactionsGrantWithoutATicker: the scheduler grants up to the
// database's allowance, refuses beyond it, and grants a waiting compaction
// when a running one is done or a flush raises the allowance; after
// Unregister it grants nothing.
func TestCompactionsGrantWithoutATicker(t *testing.T) {
	db := &fakeDB{}
	c := &compactions{}
	c.Register(1, db)
	db.set(1, 0)
	ok, first := c.TrySchedule()
	if !ok {
		t.Fatal("a first compaction within the allowance was refused")
	}
	if ok, _ := c.TrySchedule(); ok {
		t.Fatal("a second compaction over an allowance of 1 was granted")
	}
	db.set(1, 1) // the refused one now waits
	first.Done()
	if n := db.scheduled(); n != 1 {
		t.Fatalf("Done of the running compaction scheduled %d waiting ones, want 1", n)
	}
	db.set(3, 2) // a flush raised the allowance: two more may run beside the one scheduled
	c.UpdateGetAllowedWithoutPermission()
	testutil.WaitFor(t, 10*time.Second, "the raised allowance granted", func() bool { return db.scheduled() == 3 })
	c.mu.Lock()
	running := c.running
	c.mu.Unlock()
	if running != 3 {
		t.Fatalf("%d compactions counted running, want 3", running)
	}
	db.set(3, 5)
	c.Unregister()
	db.mu.Lock()
	g := db.grants[0]
	db.mu.Unlock()
	g.Done()
	c.UpdateGetAllowedWithoutPermission()
	if ok, _ := c.TrySchedule(); ok {
		t.Fatal("a compaction was granted after Unregister")
	}
	if n := db.scheduled(); n != 3 {
		t.Fatalf("%d compactions scheduled after Unregister, want none more than 3", n)
	}
}

// TestDatabaseCompactsWithoutPebblesTicker: a database opened by OpenDB
// runs no goroutine of Pebble's default scheduler (whose 100 ms ticker woke
// an idle node ten times a second), and still compacts under writes.
func TestDatabaseCompactsWithoutPebblesTicker(t *testing.T) {
	db, err := OpenDB("db", Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "periodicGranter") {
		t.Fatal("Pebble's periodic granter runs")
	}
	val := make([]byte, 512)
	for i := 0; i < 40 && db.Metrics().Compact.Count == 0; i++ {
		b := db.NewBatch()
		for k := 0; k < 2000; k++ {
			b.Set(fmt.Appendf(nil, "key-%06d", (k*7919+i)%20000), val, nil)
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "a compaction", func() bool { return db.Metrics().Compact.Count > 0 })
	if l0 := db.Metrics().Levels[0].TablesCount; l0 > 20 {
		t.Fatalf("%d tables in L0 after the compactions", l0)
	}
}
