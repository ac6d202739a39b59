package cluster

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/datadir"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/snapshot"
)

// fsm is the Raft FSM over the shard state, per hashicorp/raft's contract:
// Apply is deterministic (an entry's records are applied with the entry's
// time, never the local clock), Snapshot returns at once and Persist runs
// alongside Apply, and Restore replaces all state. A Persist that a
// rebuild or Restore overlapped fails (errStateReplaced): the store it read
// was cleared and refilled under it.
//
// The entries that this node wrote while it leads the group (their origin
// is the current one) are not applied: the applier collected their records
// from the very state they describe. origin is drawn anew each time the
// node starts to lead and is 0 while it does not, so every other entry,
// including this node's own from an earlier term, is applied.
//
// mu serializes applying entries with rebuild, which replaces the state
// when the node stops leading.
type fsm struct {
	mu     sync.Mutex
	store  *shards.Store
	origin atomic.Uint64
	// fail is told of an entry that cannot be applied: the node must stop
	// serving a state that no longer follows its log.
	fail func(index uint64, err error)
	// onSnapshot is told how long a snapshot took and how many records
	// and bytes it wrote, or its error.
	onSnapshot func(d time.Duration, records, bytes int64, err error)

	// gen counts the times the state was replaced (rebuild, Restore): a
	// snapshot whose Persist overlapped one would miss keys that entries
	// at or below its index set, and is not kept.
	gen atomic.Uint64

	applied   atomic.Uint64 // index of the last entry applied
	lastNow   atomic.Int64  // the time of the latest entry applied
	sinceSnap atomic.Int64  // bytes of entries applied since the last snapshot began
}

// ApplyBatch applies committed entries in order (raft.BatchingFSM).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	for i, l := range logs {
		out[i] = f.apply(l)
	}
	return out
}

// Apply applies one committed entry and returns nil or the error that made
// it impossible.
func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apply(l)
}

// apply is Apply with mu held.
func (f *fsm) apply(l *raft.Log) any {
	if l.Type == raft.LogCommand {
		if err := f.applyCommand(l.Data, f.origin.Load()); err != nil {
			f.fail(l.Index, err)
			return err
		}
		f.sinceSnap.Add(int64(len(l.Data)))
	}
	f.applied.Store(l.Index)
	return nil
}

// applyCommand applies an entry's records unless its origin is skip: an
// entry this node wrote while it leads, whose records it already holds
// (and whose checksum it need not verify: the bytes never left its
// memory).
func (f *fsm) applyCommand(data []byte, skip uint64) error {
	e, err := decodeHeader(data)
	if err != nil {
		return err
	}
	if e.origin != skip {
		if err := e.verify(); err != nil {
			return err
		}
		if _, err := f.store.ApplyRecords(e.records, e.now); err != nil {
			return err
		}
	}
	if e.now > f.lastNow.Load() {
		f.lastNow.Store(e.now)
	}
	return nil
}

// Snapshot returns a snapshot of the state as of the latest entry's time;
// its Persist writes the shards one at a time while Apply goes on, so it
// may hold changes newer than the snapshot's index. That is sound because
// every entry after it carries whole key states, not increments: replaying
// them over any newer state of a key ends in the state of the last one.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock() // not in the middle of a rebuild
	gen := f.gen.Load()
	f.mu.Unlock()
	f.sinceSnap.Store(0)
	return &fsmSnapshot{f: f, now: f.lastNow.Load(), gen: gen}, nil
}

// errStateReplaced is Persist's error when the state was rebuilt or
// restored while it was written.
var errStateReplaced = errors.New("cluster: the state was replaced while the snapshot was written; it is not kept")

// Restore replaces the whole state with the snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen.Add(1)
	now, _, err := snapshot.Read(rc, f.store)
	if err != nil {
		f.store.Clear()
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.lastNow.Store(now)
	f.sinceSnap.Store(0)
	return nil
}

type fsmSnapshot struct {
	f   *fsm
	now int64
	gen uint64 // the fsm's gen when the snapshot was taken
}

// Persist writes the state into sink, shard by shard.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	w := &countingWriter{w: sink}
	n, err := snapshot.Write(w, s.f.store, s.now)
	if err == nil && s.f.gen.Load() != s.gen {
		err = errStateReplaced
	}
	if err == nil {
		err = sink.Close()
	} else {
		sink.Cancel()
	}
	if s.f.onSnapshot != nil {
		s.f.onSnapshot(time.Since(start), n, w.n, err)
	}
	return err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Release does nothing: Persist holds no resources after it returns.
func (s *fsmSnapshot) Release() {}

// rebuild replaces the state with what the log holds up to the last entry
// applied: the latest snapshot, then every command entry after it,
// whatever its origin. A node that stops leading calls it, because its
// memory may hold changes that never committed (the entries in flight and
// the journal when it lost the lead). From then on no entry is skipped
// until the node leads again. A snapshot written while the node led may
// itself hold changes made after its index (see Snapshot); those that never
// committed stay, which can only make a key more charged than the log says.
func (f *fsm) rebuild(logs raft.LogStore, snaps raft.SnapshotStore) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen.Add(1)
	f.origin.Store(0)
	applied := f.applied.Load()
	f.store.Clear()
	from, err := f.restoreLatest(snaps, applied)
	if err != nil {
		return err
	}
	var l raft.Log
	for i := from + 1; i <= applied; i++ {
		if err := logs.GetLog(i, &l); err != nil {
			return fmt.Errorf("rebuild: entry %d: %w", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		if err := f.applyCommand(l.Data, 0); err != nil {
			return fmt.Errorf("rebuild: entry %d: %w", i, err)
		}
	}
	return nil
}

// restoreLatest restores the latest snapshot at or below index into the
// store and returns its index, or 0 if there is none.
func (f *fsm) restoreLatest(snaps raft.SnapshotStore, index uint64) (uint64, error) {
	metas, err := snaps.List()
	if err != nil {
		return 0, fmt.Errorf("rebuild: list snapshots: %w", err)
	}
	for _, m := range metas { // newest first
		if m.Index > index {
			continue
		}
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			return 0, fmt.Errorf("rebuild: open snapshot %s: %w", m.ID, err)
		}
		now, _, err := snapshot.Read(rc, f.store)
		rc.Close()
		if err != nil {
			return 0, fmt.Errorf("rebuild: read snapshot %s: %w", m.ID, err)
		}
		if now > f.lastNow.Load() {
			f.lastNow.Store(now)
		}
		return m.Index, nil
	}
	return 0, nil
}

// replayer is the fsm over a new, empty store with which the data
// directory bridges a hole in a group's log (datadir.Replayer, given as
// StorageOptions.Replay by OpenStorage).
type replayer struct{ f *fsm }

// newReplayer returns a replayer over a new store; an entry that cannot be
// applied fails no one: ApplyCommand returns its error.
func newReplayer() datadir.Replayer {
	return replayer{f: &fsm{store: shards.NewStore(shards.Options{}), fail: func(uint64, error) {}}}
}

// RestoreLatest restores the latest snapshot at or below index (restoreLatest).
func (r replayer) RestoreLatest(snaps raft.SnapshotStore, index uint64) (uint64, error) {
	return r.f.restoreLatest(snaps, index)
}

// ApplyCommand applies a command entry's records, all of them (no origin
// is skipped).
func (r replayer) ApplyCommand(data []byte) error { return r.f.applyCommand(data, 0) }

// WriteSnapshot writes the store as a snapshot as of the latest entry's time.
func (r replayer) WriteSnapshot(w io.Writer) error {
	_, err := snapshot.Write(w, r.f.store, r.f.lastNow.Load())
	return err
}

// resetOrigin stops skipping this node's entries: it no longer leads, and
// every entry it wrote is applied (a clean hand-off waited for them).
func (f *fsm) resetOrigin() {
	f.mu.Lock()
	f.origin.Store(0)
	f.mu.Unlock()
}

// snapshotDue reports whether the entries applied since the last snapshot
// call for a new one: floor bytes of them (SnapshotBytes), or twice the
// size of the last snapshot if that is more, so that writing snapshots
// never costs more than half of what writing the log costs, and a restart
// replays at most about twice the state.
func (f *fsm) snapshotDue(floor, lastSnapshotBytes int64) bool {
	return f.sinceSnap.Load() >= max(floor, 2*lastSnapshotBytes)
}
