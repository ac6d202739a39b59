package cluster

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/snapshot"
)

// fsm is the Raft FSM over the shard state, per hashicorp/raft's contract:
// Apply is deterministic (an entry's records are applied with the entry's
// time, never the local clock), Snapshot returns at once and Persist runs
// alongside Apply, and Restore replaces all state.
//
// The entries this process wrote itself (same origin) are not applied:
// the applier collected their records from the very state they describe.
type fsm struct {
	store  *shards.Store
	origin uint64
	// fail is told of an entry that cannot be applied: the node must stop
	// serving a state that no longer follows its log.
	fail func(index uint64, err error)
	// onSnapshot is told how long a snapshot took and how many records
	// and bytes it wrote, or its error.
	onSnapshot func(d time.Duration, records, bytes int64, err error)

	applied   atomic.Uint64 // index of the last entry applied
	lastNow   atomic.Int64  // the time of the latest entry applied
	sinceSnap atomic.Int64  // bytes of entries applied since the last snapshot began
}

// ApplyBatch applies committed entries in order (raft.BatchingFSM).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	for i, l := range logs {
		out[i] = f.Apply(l)
	}
	return out
}

// Apply applies one committed entry and returns nil or the error that made
// it impossible.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type == raft.LogCommand {
		if err := f.applyCommand(l.Data); err != nil {
			f.fail(l.Index, err)
			return err
		}
		f.sinceSnap.Add(int64(len(l.Data)))
	}
	f.applied.Store(l.Index)
	return nil
}

func (f *fsm) applyCommand(data []byte) error {
	e, err := decodeEntry(data)
	if err != nil {
		return err
	}
	if e.origin != f.origin {
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
	f.sinceSnap.Store(0)
	return &fsmSnapshot{f: f, now: f.lastNow.Load()}, nil
}

// Restore replaces the whole state with the snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
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
}

// Persist writes the state into sink, shard by shard.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	w := &countingWriter{w: sink}
	n, err := snapshot.Write(w, s.f.store, s.now)
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
