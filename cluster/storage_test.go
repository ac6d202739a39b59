package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rlserver/rlserver/engine"
)

// openOn opens storage and a node on dir in fs.
func openOn(t testing.TB, fs vfs.FS, dir string, clock *fakeClock, mod func(*Config)) (*Node, *Storage) {
	t.Helper()
	disk, err := OpenStorage(dir, StorageOptions{FS: fs})
	if err != nil {
		t.Fatalf("OpenStorage: %v", err)
	}
	n := open(t, &storage{logs: disk.Logs, stable: disk.Logs, snaps: disk.Snaps}, clock, func(c *Config) {
		c.NodeID = disk.NodeID
		c.ReuseEntries = true // raftlog copies what it stores
		if mod != nil {
			mod(c)
		}
	})
	if err := disk.MarkInitialised(); err != nil {
		t.Fatal(err)
	}
	return n, disk
}

// TestReplayOnPebble: 32-way load of every kind of change on a node whose
// log is in Pebble on disk; after a clean stop, a node on the reopened
// directory, replaying the log from its first entry, holds the same state.
func TestReplayOnPebble(t *testing.T) {
	dir, clock := t.TempDir(), newClock()
	n, disk := openOn(t, vfs.Default, dir, clock, func(c *Config) { c.SnapshotEntries = 1 << 40 })
	randomLoad(t, n, clock, 500, 1000)
	closeNode(t, n)
	disk.Close()
	m, disk2 := openOn(t, vfs.Default, dir, clock, nil)
	defer disk2.Close()
	defer closeNode(t, m)
	end := clock.now()
	for _, at := range []int64{end, end + 5e9} {
		if got, live := m.Digest(at), n.Digest(at); got != live {
			t.Fatalf("replayed digest at +%ds %x, live %x (%d vs %d keys)", (at-end)/1e9, got, live, m.Len(), n.Len())
		}
	}
}

// TestStrongCrashKeepsAcknowledged: strong-mode changes whose Sync
// returned survive a crash that loses every unsynced write (Pebble's
// crashable in-memory file system), with and without a snapshot in the
// middle.
func TestStrongCrashKeepsAcknowledged(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshot=", snap), func(t *testing.T) {
			fs, clock := vfs.NewCrashableMem(), newClock()
			n, _ := openOn(t, fs, "/data", clock, func(c *Config) { c.Consistency = Strong })
			p := engine.Params{Limit: 1000, Window: 3600e9}
			acked := map[string]int64{}
			for i := 0; i < 400; i++ {
				k := fmt.Sprint("k", i%37)
				if r, err := n.Check([]byte(k), engine.Token, p, 1, clock.advance(1e6)); err != nil || !r.Allowed {
					t.Fatalf("check %d: %+v %v", i, r, err)
				}
				if i%5 == 4 {
					syncNode(t, n)
					for j := i - 4; j <= i; j++ {
						acked[fmt.Sprint("k", j%37)]++
					}
				}
				if snap && i == 200 {
					if err := n.Snapshot(); err != nil {
						t.Fatal(err)
					}
				}
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			n.Close(ctx) // may or may not flush: the clone is taken
			cancel()
			m, disk := openOn(t, crashed, "/data", clock, nil)
			defer disk.Close()
			defer closeNode(t, m)
			for k, want := range acked {
				r, _ := m.Check([]byte(k), engine.Token, p, 0, clock.now())
				if used := p.Limit - r.Remaining; used < want {
					t.Fatalf("%s: %d acknowledged, %d restored", k, want, used)
				}
			}
		})
	}
}

// TestLostDatabaseIsRefused: a directory that held a node, whose database
// is then gone, is refused rather than started empty; so is another
// node's directory.
func TestLostDatabaseIsRefused(t *testing.T) {
	fs, clock := vfs.NewMem(), newClock()
	n, disk := openOn(t, fs, "/data", clock, nil)
	n.Check([]byte("k"), engine.Fixed, hour, 1, clock.now())
	closeNode(t, n)
	disk.Close()
	if _, err := OpenStorage("/data", StorageOptions{FS: fs, NodeID: "node2"}); !errors.Is(err, ErrNodeID) {
		t.Fatalf("another node id: %v", err)
	}
	if err := fs.RemoveAll("/data/db"); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStorage("/data", StorageOptions{FS: fs}); !errors.Is(err, ErrLostStorage) {
		t.Fatalf("database removed: %v", err)
	}
}
