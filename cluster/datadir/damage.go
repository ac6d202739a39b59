package datadir

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/snapshot"
)

// ErrDamaged is returned by OpenStorage when the data directory lost or
// cut a file that held synced data, or a group's log cannot be read or has
// a hole that raft could not start over. The text names each file and what
// was lost; StorageOptions.AcceptDataLoss starts on what is left instead.
var ErrDamaged = errors.New("the data directory is damaged")

// damage is one thing OpenStorage found wrong.
type damage struct {
	file  string       // the file found missing or damaged, relative to the data directory; "" if unknown
	what  string       // what is wrong and what it lost
	group *groupCheck  // the group it hit, if it is a group's
	fatal bool         // AcceptDataLoss cannot start on it
	fix   func() error // what AcceptDataLoss does about it before the database is opened, if anything
}

func (d damage) String() string {
	if d.file == "" {
		return d.what
	}
	return d.file + " " + d.what
}

// refusal returns the error that refuses the directory for found: it
// wraps ErrDamaged, and ErrUnrepairable too if a damage is fatal.
func refusal(dir string, found []damage) error {
	parts := make([]string, 0, 3)
	for i, d := range found {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(found)-i))
			break
		}
		parts = append(parts, d.String())
	}
	if fatal(found) {
		return fmt.Errorf("%w: %s: %s (%w)", ErrDamaged, dir, strings.Join(parts, "; "), ErrUnrepairable)
	}
	return fmt.Errorf("%w: %s: %s", ErrDamaged, dir, strings.Join(parts, "; "))
}

// fatal reports whether a damage in found is fatal.
func fatal(found []damage) bool {
	for _, d := range found {
		if d.fatal {
			return true
		}
	}
	return false
}

// fileDamages returns the damages of the files through which Pebble finds
// the rest of the database in db (raftlog.CheckFiles): fatal, except a
// spare file, which AcceptDataLoss removes.
func fileDamages(fs vfs.FS, db string) ([]damage, error) {
	problems, err := raftlog.CheckFiles(fs, db)
	if err != nil {
		return nil, err
	}
	var found []damage
	for _, p := range problems {
		d := damage{file: filepath.Join(DBDir, p.Name), what: p.What, fatal: !p.Spare}
		if p.Spare {
			path := filepath.Join(db, p.Name)
			d.fix = func() error { return fs.Remove(path) }
			d.what += ": it holds no data; Pebble writes it again"
		}
		found = append(found, d)
	}
	return found, nil
}

// missingWALs returns a damage for each WAL that m lists and the database
// directory db lacks: Pebble had not removed it, so it may hold records
// that are in no table yet.
func missingWALs(fs vfs.FS, db string, m *mark) ([]damage, error) {
	if m == nil {
		return nil, nil
	}
	present, err := raftlog.WALFiles(fs, db)
	if err != nil {
		return nil, err
	}
	have := map[uint64]bool{}
	for _, w := range present {
		have[w] = true
	}
	var found []damage
	for _, w := range m.wals {
		if !have[w] {
			found = append(found, damage{file: filepath.Join(DBDir, raftlog.WALName(w)),
				what: "is missing: Pebble had not removed that write-ahead log, so it may have held records that are in no table"})
		}
	}
	return found, nil
}

// checkCounter compares the counter the database holds with the file's;
// newest names the newest WAL found before the database was opened ("" if
// it is missing, which is reported on its own).
func checkCounter(db *pebble.DB, m *mark, markBad bool, newest string) ([]damage, error) {
	have, found, err := counterIn(db)
	if err != nil {
		return nil, err
	}
	switch {
	case m == nil && found && !markBad:
		return []damage{{file: MarkFile, what: "is missing: what was synced cannot be checked"}}, nil
	case m != nil && have < m.counter:
		what := fmt.Sprintf("lost records synced before %s (the database's mark counter is %d, %s says %d)",
			stamp(m.written), have, MarkFile, m.counter)
		if newest == "" {
			what = "the database " + what
		}
		return []damage{{file: newest, what: what}}, nil
	}
	return nil, nil
}

// newestWAL names the newest WAL of the database directory db, with its
// size; "" if m lists a newer one (it is missing), or if there is none.
func newestWAL(fs vfs.FS, db string, m *mark) string {
	wals, _ := raftlog.WALFiles(fs, db)
	if len(wals) == 0 || m != nil && len(m.wals) > 0 && slices.Max(m.wals) > slices.Max(wals) {
		return ""
	}
	w := slices.Max(wals)
	fi, err := fs.Stat(filepath.Join(db, raftlog.WALName(w)))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s (the newest write-ahead log, %d bytes)", filepath.Join(DBDir, raftlog.WALName(w)), fi.Size())
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z") }

// groupCheck is what inspect found of one group.
type groupCheck struct {
	id      uint32
	logs    *raftlog.Store
	snaps   *snapshot.Store
	listErr error       // the snapshots' metadata cannot be read
	listed  []snapCheck // the snapshots listed, newest first
	sc      raftlog.Scanned
	scanErr error
	claim   uint64 // the mark's last index for the group
	claimed bool
	written int64 // when the mark was written
}

// snapCheck is one snapshot and whether it reads back whole.
type snapCheck struct {
	id    string
	index uint64
	err   error
}

// inspectGroup reads every snapshot and every log entry of a group.
func inspectGroup(id uint32, logs *raftlog.Store, snaps *snapshot.Store, m *mark) *groupCheck {
	c := &groupCheck{id: id, logs: logs, snaps: snaps}
	if m != nil {
		c.claim, c.claimed = m.groups[id]
		c.written = m.written
	}
	metas, err := snaps.List()
	c.listErr = err
	for _, meta := range metas {
		c.listed = append(c.listed, snapCheck{id: meta.ID, index: meta.Index, err: readSnapshot(snaps, meta.ID)})
	}
	c.sc, c.scanErr = logs.Scan()
	return c
}

// readSnapshot reads snapshot id to its end, which checks its chunks,
// size and checksum.
func readSnapshot(snaps *snapshot.Store, id string) error {
	_, rc, err := snaps.Open(id)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, rc)
	return errors.Join(err, rc.Close())
}

// base returns the index of the newest snapshot that reads back whole (0
// if none): raft restores it and replays the log after it.
func (c *groupCheck) base() uint64 {
	if c.listErr != nil {
		return 0
	}
	for _, s := range c.listed {
		if s.err == nil {
			return s.index
		}
	}
	return 0
}

// lost returns the first index after base whose entry is missing or
// cannot be read (0 if none): raft could not replay from there on.
func (c *groupCheck) lost() uint64 {
	base, sc := c.base(), &c.sc
	first := uint64(0)
	note := func(i uint64) {
		if i > base && (first == 0 || i < first) {
			first = i
		}
	}
	if sc.Entries > 0 && sc.Last > base && sc.First > base+1 {
		note(base + 1)
	}
	for _, rs := range [][]raftlog.Range{sc.Gaps, sc.Unreadable} {
		for _, r := range rs {
			if r.To > base {
				note(max(r.From, base+1))
			}
		}
	}
	if c.scanErr != nil {
		note(max(sc.Last+1, base+1))
	}
	return first
}

// damages describes what is wrong with the group.
func (c *groupCheck) damages() []damage {
	var found []damage
	add := func(format string, args ...any) {
		found = append(found, damage{what: fmt.Sprintf("group %d: ", c.id) + fmt.Sprintf(format, args...), group: c})
	}
	if c.listErr != nil {
		add("its snapshots cannot be listed: %v", c.listErr)
	}
	for _, s := range c.listed {
		if s.err != nil {
			add("snapshot %s (index %d) cannot be read: %v", s.id, s.index, s.err)
		}
	}
	base, sc := c.base(), &c.sc
	if sc.Entries > 0 && sc.Last > base && sc.First > base+1 {
		add("log entries %s are missing (the log starts at %d, and no snapshot holds what came before)",
			raftlog.Range{From: base + 1, To: sc.First - 1}, sc.First)
	}
	for _, r := range sc.Gaps {
		if r.To > base {
			add("log entries %s are missing", raftlog.Range{From: max(r.From, base+1), To: r.To})
		}
	}
	if n := len(sc.Unreadable); n > 0 {
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more ranges, up to %d)", n-1, sc.Unreadable[n-1].To)
		}
		add("log entries %s%s cannot be read: %v", sc.Unreadable[0], more, sc.BadErr)
	}
	if c.scanErr != nil {
		add("the log cannot be read: %v", c.scanErr)
	}
	if top := max(sc.Last, base); c.claimed && c.claim > top {
		add("log entries %s are missing (synced before %s, when %s was written)",
			raftlog.Range{From: top + 1, To: c.claim}, stamp(c.written), MarkFile)
	}
	return found
}

// groupStores returns the stores of group id in db: for reading only
// (snapshot.NewReader, which writes nothing) or as GroupStorage opens them.
type groupStores func(id uint32) (*raftlog.Store, *snapshot.Store, error)

// inspect checks every group that db or the mark knows of, with the
// stores that open gives.
func inspect(db *pebble.DB, m *mark, open groupStores) ([]damage, []*groupCheck, error) {
	ids, err := groupIDs(db, m)
	if err != nil {
		return nil, nil, err
	}
	var found []damage
	var checks []*groupCheck
	for _, id := range ids {
		logs, snaps, err := open(id)
		if err != nil {
			return nil, nil, err
		}
		c := inspectGroup(id, logs, snaps, m)
		found = append(found, c.damages()...)
		checks = append(checks, c)
	}
	return found, checks, nil
}

// groupIDs returns the groups the database holds anything of, and those
// the mark names, and group 0.
func groupIDs(db *pebble.DB, m *mark) ([]uint32, error) {
	seen := map[uint32]bool{groupID: true}
	ids := []uint32{groupID}
	for _, ns := range []raftlog.Namespace{raftlog.NamespaceLog, raftlog.NamespaceStable, raftlog.NamespaceSnapshot} {
		gs, err := raftlog.Groups(db, ns)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			if !seen[g] {
				seen[g], ids = true, append(ids, g)
			}
		}
	}
	if m != nil {
		for g := range m.groups {
			if !seen[g] {
				seen[g], ids = true, append(ids, g)
			}
		}
	}
	return ids, nil
}

// ErrUnrepairable is returned by OpenStorage, wrapped with ErrDamaged,
// when AcceptDataLoss could not start on what is left either: the
// database cannot be opened or its files cannot be read without the files
// that are missing, or nothing is left of a cluster node's meta group.
var ErrUnrepairable = errors.New("it cannot be repaired at start")

// repair makes a damaged group's storage one raft can start on. It
// deletes the snapshots that cannot be read; it bridges the holes in the
// log after the newest snapshot left, keeping every entry after them
// (bridge), or, if it cannot, drops the log from the first hole on; and,
// if nothing is left of the group, drops the group (a standalone node then
// starts empty; a cluster node's data group is sent its state again by its
// leader). It logs at ERROR what it dropped.
func (st *Storage) repair(c *groupCheck, standalone bool) error {
	if err := st.dropSnapshots(c); err != nil {
		return err
	}
	bridged := false
	if holes := c.holes(); len(holes) > 0 && c.scanErr == nil && holes[len(holes)-1].To < c.sc.Last {
		to := holes[len(holes)-1].To
		err := st.bridge(c, c.logs, c.snaps, to, standalone)
		switch {
		case err == nil:
			bridged = true
			st.log.Error("the changes in the lost log entries are gone (a key last changed there keeps its state before); "+
				"the group goes on from a snapshot of the rest at the last of them", "group", c.id,
				"lost", fmt.Sprint(holes), "snapshot_index", to, "kept_entries", raftlog.Range{From: to + 1, To: c.sc.Last})
		case !errors.Is(err, errNoConfiguration) && !errors.Is(err, errNoReplay):
			return err
		}
	}
	if !bridged {
		if err := st.dropEntries(c); err != nil {
			return err
		}
	}
	logs, err := raftlog.New(st.DB, c.id)
	if err != nil {
		return err
	}
	snaps, err := c.snaps.List()
	if err != nil {
		return err
	}
	st.marks.add(c.id, logs, c.snaps)
	if last, _ := logs.LastIndex(); last > 0 || len(snaps) > 0 {
		return nil
	}
	if !standalone && c.id == metaGroup {
		return fmt.Errorf("%w: %s: nothing is left of the meta group (%w): remove the directory and join the cluster again", ErrDamaged, st.dir, ErrUnrepairable)
	}
	if err := st.DropGroup(c.id); err != nil {
		return err
	}
	st.emptied = st.emptied || c.id == groupID
	st.log.Error("nothing is left of the group: it starts empty", "group", c.id, "standalone", standalone)
	return nil
}

// dropSnapshots deletes the group's snapshots that cannot be read (all of
// them if their metadata cannot be listed).
func (st *Storage) dropSnapshots(c *groupCheck) error {
	if c.listErr != nil {
		lo, hi := raftlog.NamespaceSnapshot.Bounds(c.id)
		if err := st.DB.DeleteRange(lo, hi, pebble.Sync); err != nil {
			return err
		}
		st.log.Error("every snapshot of the group deleted: their metadata cannot be read", "group", c.id)
	}
	for _, s := range c.listed {
		if s.err != nil {
			if err := c.snaps.Delete(s.id); err != nil {
				return err
			}
			st.log.Error("snapshot deleted: it cannot be read", "group", c.id, "snapshot", s.id, "index", s.index)
		}
	}
	return nil
}

// dropEntries deletes a group's entries from the first one lost after the
// newest readable snapshot on, and those before it that cannot be read.
func (st *Storage) dropEntries(c *groupCheck) error {
	b := st.DB.NewBatch()
	defer b.Close()
	lo, hi := raftlog.NamespaceLog.Bounds(c.id)
	key := func(i uint64) []byte { return raftlog.LogKey(c.id, i) }
	if from := c.lost(); from > 0 {
		if err := b.DeleteRange(key(from), hi, nil); err != nil {
			return err
		}
		st.log.Error("log entries dropped: raft cannot replay past a lost one", "group", c.id,
			"from", from, "to", c.sc.Last)
	}
	var bad uint64
	for _, r := range c.sc.Unreadable {
		if r.To <= c.base() {
			bad = r.To
		}
	}
	if bad > 0 {
		if err := b.DeleteRange(lo, key(bad+1), nil); err != nil {
			return err
		}
		st.log.Error("log entries dropped: they cannot be read (the snapshot holds their state)",
			"group", c.id, "to", bad)
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(pebble.Sync)
}
