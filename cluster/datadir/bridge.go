package datadir

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/snapshot"
)

// Replayer rebuilds a group's state for a bridge (see StorageOptions.Replay):
// the newest snapshot before a hole restored, then every command entry up
// to the hole's end that can still be read applied in order, then the
// state written as a snapshot. Package cluster's replication core supplies
// it (its FSM over a new store): this package never decodes an entry.
// A Replayer is used by one goroutine, once.
type Replayer interface {
	// RestoreLatest restores the newest snapshot of snaps at or below
	// index into the state and returns its index, or 0 if there is none.
	RestoreLatest(snaps raft.SnapshotStore, index uint64) (uint64, error)
	// ApplyCommand applies the data of a command entry (raft.LogCommand);
	// an error says it cannot be read, and the bridge counts it in the
	// hole.
	ApplyCommand(data []byte) error
	// WriteSnapshot writes the state to w in the snapshot codec
	// (snapshot.Write), as of the time of the newest entry or snapshot
	// it applied.
	WriteSnapshot(w io.Writer) error
}

// holes returns the ranges after base (the newest readable snapshot) whose
// entries are missing or cannot be read, in order, as far as the log goes.
func (c *groupCheck) holes() []raftlog.Range {
	base, sc := c.base(), &c.sc
	var out []raftlog.Range
	if sc.Entries > 0 && sc.Last > base && sc.First > base+1 {
		out = append(out, raftlog.Range{From: base + 1, To: sc.First - 1})
	}
	for _, rs := range [][]raftlog.Range{sc.Gaps, sc.Unreadable} {
		for _, r := range rs {
			if r.To > base {
				out = append(out, raftlog.Range{From: max(r.From, base+1), To: r.To})
			}
		}
	}
	return out
}

// errNoConfiguration: a bridge found no Raft configuration to give its
// snapshot, and the node is not standalone, whose configuration it knows.
var errNoConfiguration = errors.New("no raft configuration is left before the hole")

// errNoReplay: StorageOptions.Replay is nil, so there is nothing to
// rebuild the state with, and the hole is not bridged.
var errNoReplay = errors.New("no replay to rebuild the state with")

// bridge makes a log with holes after its snapshot one raft can start on,
// keeping every entry after the last hole (to): it rebuilds the state of
// the snapshot and of every entry up to to that can still be read, in
// order, writes it as a snapshot at index to, and deletes the entries up
// to to. Entries hold whole key states, so what is lost is exactly the
// changes in the holes that no later entry wrote again: a key last changed
// in a hole keeps the state it had before. standalone gives the node's own
// configuration when none is left; otherwise a group without one is not
// bridged (errNoConfiguration), nor is any without st.replay
// (errNoReplay).
func (st *Storage) bridge(c *groupCheck, logs *raftlog.Store, snaps *snapshot.Store, to uint64, standalone bool) error {
	if st.replay == nil {
		return errNoReplay
	}
	f := st.replay()
	base, err := f.RestoreLatest(snaps, to)
	if err != nil {
		return err
	}
	conf, confIndex, err := snapshotConfiguration(snaps, base)
	if err != nil {
		return err
	}
	var l raft.Log
	for i := base + 1; i <= to; i++ {
		if logs.GetLog(i, &l) != nil {
			continue // in a hole
		}
		switch l.Type {
		case raft.LogCommand:
			if err := f.ApplyCommand(l.Data); err != nil {
				continue // cannot be read: in a hole too
			}
		case raft.LogConfiguration:
			conf, confIndex = raft.DecodeConfiguration(l.Data), i
		}
	}
	if len(conf.Servers) == 0 {
		if !standalone {
			return errNoConfiguration
		}
		conf = raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(st.NodeID),
			Address: raft.ServerAddress(st.NodeID), Suffrage: raft.Voter}}}
		confIndex = to
	}
	if err := logs.GetLog(to+1, &l); err != nil {
		return fmt.Errorf("group %d: read entry %d after the hole: %w", c.id, to+1, err)
	}
	sink, err := snaps.Create(1, to, l.Term, conf, confIndex, nil)
	if err != nil {
		return err
	}
	if err := f.WriteSnapshot(sink); err != nil {
		return errors.Join(err, sink.Cancel())
	}
	if err := sink.Close(); err != nil {
		return err
	}
	return logs.DeleteRange(0, to)
}

// snapshotConfiguration returns the configuration of the group's
// snapshot at index (none for 0).
func snapshotConfiguration(snaps *snapshot.Store, index uint64) (raft.Configuration, uint64, error) {
	if index == 0 {
		return raft.Configuration{}, 0, nil
	}
	metas, err := snaps.List()
	if err != nil {
		return raft.Configuration{}, 0, err
	}
	for _, m := range metas {
		if m.Index == index {
			return m.Configuration, m.ConfigurationIndex, nil
		}
	}
	return raft.Configuration{}, 0, nil
}
