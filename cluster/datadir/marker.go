package datadir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/snapshot"
)

// DefaultMarkInterval is how often, while its logs change, a node records
// in MarkFile the last index of each group's log and a new counter: losses
// of records synced within about this long before a crash cannot be told
// from the crash itself (cluster/DESIGN.md, "Damaged files").
const DefaultMarkInterval = 100 * time.Millisecond

// markKey is the key, in the node's metadata namespace, of the counter the
// database holds beside MarkFile's.
var markKey = append(raftlog.NamespaceNode.Prefix(groupID), "mark"...)

// marker keeps MarkFile true while the node runs. It is the database's
// raftlog.WALWatcher (the file lists the WALs Pebble has not removed) and
// every group Store's raftlog.SuffixWatcher (the file's last index of a
// group follows a deletion down before the entries go), and every interval
// in which a log changed it writes a new counter into the database, synced,
// then the file with that counter and each group's last index.
//
// Until arm, the groups' indexes and the counter stay those loaded from the
// file, which is written (with the WALs Pebble creates and removes while it
// opens) only if it was found whole: a start that refuses leaves the
// file's claims for the next start to check again.
type marker struct {
	fs  vfs.FS
	dir string
	log *slog.Logger
	now func() time.Time

	// allow, when set, is asked before the counter is written (the
	// disk guard, raftlog.Space.Allow): on a full disk the mark waits.
	allow func(n int64) error

	mu     sync.Mutex
	out    *markWriter
	m      mark // what the file says (or will): node, counter, WALs, and the groups until live
	armed  bool // the file may be written
	live   bool // the groups' indexes come from stores, no longer from m.groups
	db     *pebble.DB
	stores map[uint32]markedStores
	caps   map[uint32]uint64 // a deletion lowers the group's last index to this
	seen   uint64            // the stores' write count when the file was last written
	failed int               // writes failed in a row

	round   sync.Mutex    // one counter round at a time
	changed chan struct{} // poked (capacity 1) after each synced write of a store
	asleep  atomic.Bool   // run waits for a poke, its ticker stopped
	stop    chan struct{}
	done    chan struct{}
}

// markedStores are the stores of a group whose last index the file keeps.
type markedStores struct {
	logs  *raftlog.Store
	snaps *snapshot.Store
}

// newMarker returns the marker of node's data directory dir, holding m
// (what the file said, in slot of slots of size; nil for a directory
// without one, or a damaged one).
func newMarker(fs vfs.FS, dir, node string, m *mark, slot, size int, log *slog.Logger) *marker {
	k := &marker{fs: fs, dir: dir, log: log, now: time.Now, out: newMarkWriter(fs, dir, m, slot, size),
		stores: map[uint32]markedStores{}, caps: map[uint32]uint64{}, changed: make(chan struct{}, 1)}
	if m != nil {
		k.m, k.armed = *m, true
	}
	k.m.node = node
	if k.m.groups == nil {
		k.m.groups = map[uint32]uint64{}
	}
	return k
}

// WALCreated adds WAL num to the file's list.
func (k *marker) WALCreated(num uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i, found := slices.BinarySearch(k.m.wals, num); !found {
		k.m.wals = slices.Insert(k.m.wals, i, num)
	}
	k.writeLocked() // a failure is logged; the WAL's removal then goes unseen
}

// WALRemoving takes WAL num off the file's list before Pebble removes it.
func (k *marker) WALRemoving(num uint64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	i, found := slices.BinarySearch(k.m.wals, num)
	if !found {
		return nil
	}
	k.m.wals = slices.Delete(k.m.wals, i, i+1)
	if err := k.writeLocked(); err != nil {
		k.m.wals = slices.Insert(k.m.wals, i, num)
		return err
	}
	return nil
}

// Lowering records that group's last index is about to go down to last.
func (k *marker) Lowering(group uint32, last uint64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.caps[group] = last
	if err := k.writeLocked(); err != nil {
		delete(k.caps, group)
		return err
	}
	return nil
}

// Lowered ends what Lowering began: the Store's own last index is true again.
func (k *marker) Lowered(group uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.caps, group)
}

// loaded returns the groups' indexes the file held at start, and when it
// was written; before arm only.
func (k *marker) loaded() *mark {
	k.mu.Lock()
	defer k.mu.Unlock()
	return &mark{written: k.m.written, groups: maps.Clone(k.m.groups)}
}

// add makes the file keep the last index of group's log.
func (k *marker) add(group uint32, logs *raftlog.Store, snaps *snapshot.Store) {
	logs.Watch(k)
	logs.OnSync(k.poke)
	if snaps != nil {
		snaps.OnSave(k.poke)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stores[group] = markedStores{logs, snaps}
}

// forget stops keeping group, and writes the file without it, before the
// group's data is deleted.
func (k *marker) forget(group uint32) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.stores, group)
	delete(k.m.groups, group)
	return k.writeLocked()
}

// arm makes the file follow the database from now on: the WALs are those
// in the database directory dbPath, the groups' indexes those of the stores. It writes
// a first counter and the file, and then, every interval (none if it is
// not positive), a new one whenever a log changed. A write that fails is
// logged, not returned: a node that starts on a full disk (read-only)
// keeps the mark it found, which the WAL hooks keep true.
func (k *marker) arm(db *pebble.DB, dbPath string, interval time.Duration) error {
	counter, _, err := counterIn(db)
	if err != nil {
		return err
	}
	k.mu.Lock()
	// Listed with mu held: a WAL that Pebble removes meanwhile waits in
	// WALRemoving, and is taken off the list after it.
	wals, err := raftlog.WALFiles(k.fs, dbPath)
	if err == nil {
		k.db, k.armed, k.live = db, true, true
		k.m.wals = wals
		k.m.counter = max(k.m.counter, counter)
	}
	k.mu.Unlock()
	if err != nil {
		return err
	}
	k.mark(true) // a failure (a full disk) is logged, and the next round tries again
	k.stop, k.done = make(chan struct{}), make(chan struct{})
	go k.run(interval)
	return nil
}

// poke tells run that a store made a synced write.
func (k *marker) poke() {
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

// run writes the file every interval in which a log changed. While no
// store writes it sleeps: after a round that left nothing unmarked it
// stops its ticker until a store pokes it, and the next round is one
// interval after that write, as it would have been with the ticker
// running. An idle node's marker then wakes nobody (an idle cluster
// node's CPU is mostly its wake-ups; DESIGN.md, "Idle cost").
func (k *marker) run(interval time.Duration) {
	defer close(k.done)
	if interval <= 0 {
		<-k.stop
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	ticking := true
	for {
		var tick <-chan time.Time
		var changed chan struct{}
		if ticking {
			tick = t.C
		} else {
			changed = k.changed
		}
		select {
		case <-k.stop:
			return
		case <-changed:
			t.Reset(interval)
			ticking = true
			k.asleep.Store(false)
			continue
		case <-tick:
		}
		select { // a write from now on pokes again, and is marked
		case <-k.changed:
		default:
		}
		k.mark(false) // a failure is logged, and leaves the write unmarked
		if k.marked() {
			t.Stop()
			ticking = false
			k.asleep.Store(true)
		}
	}
}

// marked reports whether the file has counted every synced write the
// stores made so far.
func (k *marker) marked() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.writes() == k.seen
}

// release closes the file, once the database is closed.
func (k *marker) release() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.close()
}

// close stops the rounds and writes the file a last time, with the
// database still open.
func (k *marker) close() error {
	if k.stop == nil {
		return nil
	}
	close(k.stop)
	<-k.done
	k.stop = nil
	return k.mark(false)
}

// mark writes a new counter into the database, synced, then the file with
// it and each group's last index; unless force, only if a log or a
// snapshot store wrote since the last time. It does not hold mu across the
// database write: Pebble may call WALCreated from its commit pipeline.
func (k *marker) mark(force bool) error {
	k.round.Lock()
	defer k.round.Unlock()
	k.mu.Lock()
	writes, next, db := k.writes(), k.m.counter+1, k.db
	k.mu.Unlock()
	if !force && writes == k.seen {
		return nil
	}
	var err error
	if k.allow != nil {
		err = k.allow(64)
	}
	if err == nil {
		err = db.Set(markKey, binary.BigEndian.AppendUint64(nil, next), pebble.Sync)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		return k.failedLocked(fmt.Errorf("write the mark counter: %w", err))
	}
	k.m.counter = next
	if err := k.writeLocked(); err != nil {
		return err
	}
	k.seen = writes
	return nil
}

// writes returns how many synced writes the stores have made.
func (k *marker) writes() uint64 {
	var n uint64
	for _, s := range k.stores {
		n += s.logs.Stats().Syncs
		if s.snaps != nil {
			n += s.snaps.Stats().Snapshots
		}
	}
	return n
}

// writeLocked writes the file, if armed; k.mu is held.
func (k *marker) writeLocked() error {
	if !k.armed {
		return nil
	}
	m := k.m
	m.written = k.now().UnixNano()
	if k.live {
		m.groups = make(map[uint32]uint64, len(k.stores))
		for g, s := range k.stores {
			last, _ := s.logs.LastIndex()
			if c, ok := k.caps[g]; ok {
				last = min(last, c)
			}
			m.groups[g] = last
		}
	}
	if err := k.out.write(&m); err != nil {
		return k.failedLocked(fmt.Errorf("write %s: %w", MarkFile, err))
	}
	if k.failed > 0 {
		k.log.Info("the mark file is written again", "file", MarkFile, "failed_writes", k.failed)
	}
	k.failed = 0
	return nil
}

// failedLocked logs the first of a run of failed writes and returns err.
func (k *marker) failedLocked(err error) error {
	if k.failed == 0 {
		k.log.Warn("the mark file cannot be written: a loss of what is synced from now on may go unseen at the next start",
			"file", MarkFile, "err", err)
	}
	k.failed++
	return err
}

// counterIn reads the counter the database holds (0 if none).
func counterIn(db *pebble.DB) (uint64, bool, error) {
	v, closer, err := db.Get(markKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, true, fmt.Errorf("the mark counter holds %d bytes, not 8", len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}
