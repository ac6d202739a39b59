package datadir

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/internal/durable"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/snapshot"
)

// Storage is a node's data directory: one Pebble database (dir/db) that
// holds the Raft log, stable store and snapshots of the node's groups, an
// identity file (dir/rlserver.id) written once the database holds a group,
// so that a directory whose database has gone missing is refused instead
// of started empty, and a mark file (dir/rlserver.mark) that records what
// the database held, so that a start finds what a lost or cut file took
// with it (cluster/DESIGN.md, "Damaged files").
type Storage struct {
	DB     *pebble.DB
	Logs   *raftlog.Store
	Snaps  *snapshot.Store
	NodeID string
	// Space guards the directory's free disk space (StorageOptions.MinFreeDisk):
	// its Err refuses state changes, and every group's log and snapshot
	// store ask its Allow before they write.
	Space *raftlog.Space
	dir   string
	fs    vfs.FS
	log   *slog.Logger
	marks *marker
	// replay is StorageOptions.Replay.
	replay func() Replayer
	// emptied: AcceptDataLoss found nothing left of group 0 and dropped
	// it, so that the node starts empty.
	emptied bool
}

// StorageOptions configures OpenStorage.
type StorageOptions struct {
	// NodeID is the node's id; "" takes the one the directory holds, or
	// "node1" for a new directory. A different id than the directory's
	// is refused.
	NodeID string
	// FS is the file system; nil means the disk.
	FS vfs.FS
	// Logger receives Pebble's log, and the damage found at start.
	Logger *slog.Logger
	// RetainSnapshots is how many snapshots are kept (default 1: raft
	// truncates the log behind the newest, so an older one could not be
	// brought up to date anyway).
	RetainSnapshots int
	// MinFreeDisk is the free space below which state changes are refused
	// (raftlog.Space); 0 turns the guard off. DiskBallast is the size of
	// the ballast file kept in the directory; 0 keeps none. The guard
	// reads the disk's space with statfs, so it is off when FS is not the
	// disk (vfs.Default).
	MinFreeDisk int64
	DiskBallast int64
	// Registerer, when set, receives the rlserver_disk_* series.
	Registerer prometheus.Registerer
	// AcceptDataLoss starts on a damaged directory instead of refusing it
	// with ErrDamaged: what cannot be read is dropped (a snapshot, the log
	// from its first lost entry on), and every loss is logged at ERROR.
	AcceptDataLoss bool
	// MarkInterval is how often the mark file is brought up to date while
	// the logs change (default DefaultMarkInterval; negative: only at
	// start, on WAL changes and at Close).
	MarkInterval time.Duration
	// MemTableSize and CacheSize size the database's memtables and block
	// cache (raftlog.Options); 0 takes raftlog's defaults.
	MemTableSize, CacheSize int64
	// Replay returns a Replayer over a new, empty state, with which
	// AcceptDataLoss bridges a hole in a group's log (see Replayer).
	// Package cluster's OpenStorage sets it to its replication core's.
	// Nil: holes are not bridged, and the log is dropped from the first
	// one on, as for a group that has no configuration left.
	Replay func() Replayer
}

// Defaults of StorageOptions' disk guard, which rlserver's flags take:
// see raftlog/DESIGN.md, "Disk space", for why these numbers.
const (
	DefaultMinFreeDisk = 256 << 20
	DefaultDiskBallast = 64 << 20
)

// Errors of OpenStorage.
var (
	// ErrNodeID: the directory holds another node id than the one asked for,
	// or its identity file and its mark file name different nodes.
	ErrNodeID = errors.New("the data directory belongs to another node")
	// ErrLostStorage: the directory held a node, but its database is
	// missing, cannot be opened, or holds no log and no snapshot.
	ErrLostStorage = errors.New("the data directory lost its database")
)

// Names of the files in the data directory besides MarkFile; exported for
// the tests of package cluster, which damage a directory on purpose.
const (
	// IDFile is the identity file, which holds the node's id.
	IDFile = "rlserver.id"
	// DBDir is the directory of the Pebble database.
	DBDir = "db"
)

// NodeGroup is the id of the group whose stores OpenStorage opens with the
// directory (Storage.Logs and Storage.Snaps) and under whose prefix the
// directory keeps its own keys (the layout, the mark counter): a
// standalone node's one group, and a cluster node's meta group.
const NodeGroup = 0

const (
	groupID   = NodeGroup // the one group of a single node
	metaGroup = NodeGroup // a cluster node's meta group
)

// OpenStorage opens the data directory dir, creating it if it is new.
// Before it changes anything it checks the directory: the files its mark
// file lists, and, on the database opened read-only, the mark's counter and
// each group's last index, and every snapshot and log entry of every group
// (raft panics on an entry it cannot read). It refuses a directory that
// lost synced data or whose logs raft could not start on with ErrDamaged,
// naming the files and entries lost, unless o.AcceptDataLoss: then it
// drops what cannot be used, logs every loss at ERROR and goes on.
func OpenStorage(dir string, o StorageOptions) (*Storage, error) {
	o = o.withDefaults()
	// The directory's own entry, and later its database's, must survive a
	// crash: sync the directories that hold them.
	if err := o.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := durable.SyncDir(o.FS, filepath.Dir(filepath.Clean(dir))); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	known, err := readID(o.FS, dir)
	if err != nil {
		return nil, err
	}
	m, slot, size, markErr := readMarkSlots(o.FS, dir)
	if markErr != nil && !errors.Is(markErr, errBadMark) {
		return nil, fmt.Errorf("data directory: %s: %w", MarkFile, markErr)
	}
	id, err := identity(dir, known, o.NodeID, m, o.Logger)
	if err != nil {
		return nil, err
	}
	found, err := precheck(dir, o.FS, m, markErr)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if len(found) > 0 && (!o.AcceptDataLoss || fatal(found)) {
		return nil, refusal(dir, found)
	}
	for _, d := range found {
		if d.fix != nil {
			if err := d.fix(); err != nil {
				return nil, fmt.Errorf("data directory %s: %s: %w", dir, d.file, err)
			}
		}
	}
	st := &Storage{NodeID: id, dir: dir, fs: o.FS, log: o.Logger, replay: o.Replay,
		marks: newMarker(o.FS, dir, id, m, slot, size, o.Logger)}
	if err := st.open(o, known != "" || m != nil); err != nil {
		return nil, err
	}
	if err := st.start(o, found, known != ""); err != nil {
		st.DB.Close()
		st.marks.release()
		st.Space.Close()
		return nil, err
	}
	if o.Registerer != nil {
		registerDiskMetrics(o.Registerer, st.Space)
	}
	return st, nil
}

// open starts the free-space guard and opens the database for writing,
// watching its WALs for the mark.
func (st *Storage) open(o StorageOptions, mustExist bool) error {
	space, err := openSpace(st.dir, o)
	if err != nil {
		return err
	}
	db, err := raftlog.OpenDB(filepath.Join(st.dir, DBDir), raftlog.Options{FS: o.FS, Logger: o.Logger, MustExist: mustExist, WALs: st.marks,
		MemTableSize: o.MemTableSize, CacheSize: o.CacheSize})
	if err != nil {
		space.Close()
		if mustExist {
			return fmt.Errorf("%w: %s was node %q's, but its database cannot be opened: %v", ErrLostStorage, st.dir, st.NodeID, err)
		}
		return fmt.Errorf("open database in %s: %w", st.dir, err)
	}
	st.DB, st.Space = db, space
	st.marks.allow = space.Allow
	return nil
}

func (o StorageOptions) withDefaults() StorageOptions {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RetainSnapshots <= 0 {
		o.RetainSnapshots = 1
	}
	if o.MarkInterval == 0 {
		o.MarkInterval = DefaultMarkInterval
	}
	return o
}

// precheck checks the directory without changing it: the mark file, the
// WALs it lists, the files through which Pebble finds the rest, and, if
// there is a database, the database opened read-only (see OpenStorage).
func precheck(dir string, fs vfs.FS, m *mark, markErr error) ([]damage, error) {
	var found []damage
	if markErr != nil {
		found = append(found, damage{file: MarkFile, what: fmt.Sprintf("is damaged (%v): what was synced cannot be checked", markErr)})
	}
	path := filepath.Join(dir, DBDir)
	if !raftlog.Exists(fs, path) {
		return found, nil // a new directory, or one whose database is gone (OpenStorage says which)
	}
	missing, err := missingWALs(fs, path, m)
	if err != nil {
		return nil, err
	}
	files, err := fileDamages(fs, path)
	if err != nil {
		return nil, err
	}
	if found = append(append(found, missing...), files...); len(files) > 0 {
		return found, nil // Pebble would not open it
	}
	newest := newestWAL(fs, path, m)
	db, err := raftlog.OpenDB(path, raftlog.Options{FS: fs, ReadOnly: true})
	if err != nil {
		return append(found, damage{file: DBDir, what: fmt.Sprintf("cannot be opened: %v", err), fatal: true}), nil
	}
	defer db.Close()
	if blobs := raftlog.CheckBlobFiles(db, fs, path); len(blobs) > 0 {
		for _, b := range blobs {
			found = append(found, damage{file: filepath.Join(DBDir, b.Name), what: b.What + ": the values it held cannot be read", fatal: true})
		}
		return found, nil // reading their values would panic in Pebble
	}
	more, err := checkCounter(db, m, markErr != nil, newest)
	if err != nil {
		return nil, err
	}
	found = append(found, more...)
	more, _, err = inspect(db, m, func(id uint32) (*raftlog.Store, *snapshot.Store, error) {
		logs, err := raftlog.New(db, id)
		if err != nil {
			return nil, nil, err
		}
		snaps, err := snapshot.NewReader(db, id, 1)
		return logs, snaps, err
	})
	return append(found, more...), err
}

// identity returns the node id of the directory, from its identity file,
// its mark file and --node-id (wanted). An identity file that is missing
// while the mark names the node (a first start that stopped before
// MarkInitialised, or a file removed) is taken from the mark, and
// MarkInitialised writes it again.
func identity(dir, known, wanted string, m *mark, log *slog.Logger) (string, error) {
	switch {
	case known != "" && m != nil && m.node != known:
		return "", fmt.Errorf("%w: %s holds %s for node %q but %s for node %q", ErrNodeID, dir, IDFile, known, MarkFile, m.node)
	case known == "" && m != nil:
		log.Warn("the node id file is missing: the mark file names the node", "file", IDFile, "node_id", m.node)
		known = m.node
	}
	switch {
	case known != "" && wanted != "" && wanted != known:
		return "", fmt.Errorf("%w: %s holds node %q, not %q (--node-id)", ErrNodeID, dir, known, wanted)
	case known != "":
		return known, nil
	case wanted == "":
		return "node1", nil
	}
	return wanted, nil
}

// start opens the stores of group 0 and of every other group the
// database holds (so that the mark keeps their last indexes until
// GroupStorage opens them), repairs what precheck found if the damage is
// accepted, and starts keeping the mark.
func (st *Storage) start(o StorageOptions, found []damage, initialised bool) error {
	if err := durable.SyncDir(o.FS, st.dir); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if len(found) > 0 {
		if err := st.accept(found, o.RetainSnapshots); err != nil {
			return err
		}
	}
	if err := st.openGroups(o.RetainSnapshots); err != nil {
		return err
	}
	if initialised && !st.emptied {
		if err := st.checkNotEmpty(); err != nil {
			return err
		}
	}
	return st.marks.arm(st.DB, filepath.Join(st.dir, DBDir), o.MarkInterval)
}

// openGroups opens the stores of group 0, and has the marker keep the
// last index of every group the database holds.
func (st *Storage) openGroups(retain int) error {
	var err error
	st.Logs, st.Snaps = nil, nil // the repairs may have changed group 0
	if st.Logs, st.Snaps, err = st.GroupStorage(groupID, retain, st.log); err != nil {
		return err
	}
	ids, err := groupIDs(st.DB, nil)
	for _, id := range ids {
		if id == groupID || err != nil {
			continue
		}
		var logs *raftlog.Store
		if logs, err = raftlog.New(st.DB, id); err == nil {
			st.marks.add(id, logs, nil)
		}
	}
	return err
}

// accept logs each damage at ERROR, then inspects the groups again on the
// database opened for writing and repairs those that need it.
func (st *Storage) accept(found []damage, retain int) error {
	for _, d := range found {
		st.log.Error("the data directory is damaged; starting on what is left (accept data loss)",
			"file", d.file, "lost", d.what)
	}
	layout, err := st.LoadLayout()
	if err != nil {
		return err
	}
	_, checks, err := inspect(st.DB, st.marks.loaded(), func(id uint32) (*raftlog.Store, *snapshot.Store, error) {
		logs, err := raftlog.New(st.DB, id)
		if err != nil {
			return nil, nil, err
		}
		keep := retain
		if id != groupID {
			keep = 1 // as GroupStorage
		}
		snaps, err := snapshot.NewStore(st.DB, id, keep, st.log)
		if err != nil {
			return nil, nil, err
		}
		logs.SetGuard(st.Space)
		snaps.SetGuard(st.Space)
		return logs, snaps, nil
	})
	if err != nil {
		return err
	}
	for _, c := range checks {
		if len(c.damages()) > 0 {
			if err := st.repair(c, layout == nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// openSpace starts the free-space guard of dir (see
// StorageOptions.MinFreeDisk), off unless the directory is on the disk.
func openSpace(dir string, o StorageOptions) (*raftlog.Space, error) {
	so := raftlog.SpaceOptions{MinFree: o.MinFreeDisk, Ballast: o.DiskBallast, Logger: o.Logger}
	if o.FS != vfs.Default {
		so.MinFree, so.Ballast = 0, 0
	}
	return raftlog.OpenSpace(dir, so) // its errors name dir
}

// checkNotEmpty refuses a database that holds no Raft state although the
// directory says it did.
func (st *Storage) checkNotEmpty() error {
	last, err := st.Logs.LastIndex()
	if err != nil {
		return err
	}
	snaps, err := st.Snaps.List()
	if err != nil {
		return err
	}
	if last == 0 && len(snaps) == 0 {
		return fmt.Errorf("%w: %s was node %q's, but its database holds no log and no snapshot", ErrLostStorage, st.dir, st.NodeID)
	}
	return nil
}

// MarkInitialised writes the identity file, once the node's group has been
// bootstrapped into the database; from then on OpenStorage refuses the
// directory if the database is missing or empty.
func (st *Storage) MarkInitialised() error {
	path := filepath.Join(st.dir, IDFile)
	if _, err := st.fs.Stat(path); err == nil {
		return nil
	}
	return durable.WriteFile(st.fs, filepath.Join(st.dir, IDFile), []byte(st.NodeID+"\n"))
}

// Dir returns the path of the data directory, as OpenStorage was given it.
func (st *Storage) Dir() string { return st.dir }

// LogStats are the counters of a log store that a node reports.
type LogStats struct {
	Fsyncs       uint64
	EntriesBytes uint64
}

// LogStats returns the log store's counters for the node's metrics.
func (st *Storage) LogStats() LogStats {
	s := st.Logs.Stats()
	return LogStats{Fsyncs: s.Syncs, EntriesBytes: s.Bytes}
}

// Close brings the mark file up to date a last time, then closes the
// database and stops the free-space guard. Every raft on it has shut down.
func (st *Storage) Close() error {
	err := st.marks.close()
	if err != nil {
		st.log.Error("the mark file could not be written at close", "file", MarkFile, "err", err)
	}
	err = errors.Join(st.DB.Close(), err, st.marks.release())
	st.Space.Close()
	return err
}

// readID returns the node id the directory holds, or "" for a new one.
func readID(fs vfs.FS, dir string) (string, error) {
	f, err := fs.Open(filepath.Join(dir, IDFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 128)
	n, _ := f.Read(buf)
	id := strings.TrimSpace(string(buf[:n]))
	if id == "" {
		return "", fmt.Errorf("data directory: %s is empty", filepath.Join(dir, IDFile))
	}
	return id, nil
}

// GroupStorage returns the log store (which is also its stable store) and
// the snapshot store of group id in the node's database.
// Both ask the node's Space before they write.
func (st *Storage) GroupStorage(id uint32, retain int, log *slog.Logger) (*raftlog.Store, *snapshot.Store, error) {
	if id == groupID && st.Logs != nil {
		return st.Logs, st.Snaps, nil
	}
	logs, err := raftlog.New(st.DB, id)
	if err != nil {
		return nil, nil, err
	}
	snaps, err := snapshot.NewStore(st.DB, id, max(retain, 1), log)
	if err != nil {
		return nil, nil, err
	}
	logs.SetGuard(st.Space)
	snaps.SetGuard(st.Space)
	st.marks.add(id, logs, snaps)
	return logs, snaps, nil
}

// Layout is what a cluster node's data directory records of the cluster
// it belongs to, so that a restart opens the same groups without flags.
// It is written before the node's groups are bootstrapped, so that a node
// that crashes during its first start comes back as the cluster node it
// was becoming (and bootstraps what it had not yet).
type Layout struct {
	Version int      `json:"version"`
	Groups  int      `json:"groups"` // data groups in the cluster
	Hosted  []uint32 `json:"hosted"` // the data groups this node is a voter of
	Peers   []Peer   `json:"peers"`  // the initial members
	// Bootstrapped: the meta group and the hosted groups were
	// bootstrapped from Peers (version 2; a version 1 layout was written
	// only after they were).
	Bootstrapped bool `json:"bootstrapped,omitempty"`
}

// LayoutVersion is the version of the Layouts written now.
const LayoutVersion = 2

// NeedsBootstrap reports whether l's groups are still to be bootstrapped
// from Peers: false if they were, or need not be (a joining node's are
// added by the cluster; a version 1 layout was written only after they
// were).
func (l *Layout) NeedsBootstrap() bool {
	return !(l.Version < 2 || l.Bootstrapped || len(l.Peers) == 0)
}

// Peer is a member named in --peers.
type Peer struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
}

// layoutKey is the key of the Layout in the node's metadata namespace.
var layoutKey = append(raftlog.NamespaceNode.Prefix(groupID), "layout"...)

// ErrMode is returned when a data directory of a standalone node is
// opened as a cluster node, or the other way round.
var ErrMode = errors.New("the data directory belongs to a node of another kind")

// LoadLayout returns the Layout the directory records, or nil if it
// records none (a new directory, or a standalone node's).
func (st *Storage) LoadLayout() (*Layout, error) {
	v, closer, err := st.DB.Get(layoutKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the cluster layout: %w", err)
	}
	defer closer.Close()
	var l Layout
	if err := json.Unmarshal(v, &l); err != nil {
		return nil, fmt.Errorf("read the cluster layout: %w", err)
	}
	return &l, nil
}

// SaveLayout records l, synced.
func (st *Storage) SaveLayout(l Layout) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return st.DB.Set(layoutKey, b, pebble.Sync)
}

// HasState reports whether the directory already holds a node (it was
// initialised).
func (st *Storage) HasState() bool {
	last, _ := st.Logs.LastIndex()
	snaps, _ := st.Snaps.List()
	return last > 0 || len(snaps) > 0
}

// DropGroup deletes everything the database holds of group id — its log,
// stable store and snapshots — synced, for a replica that moved away.
func (st *Storage) DropGroup(id uint32) error {
	if err := st.marks.forget(id); err != nil {
		return err
	}
	b := st.DB.NewBatch()
	defer b.Close()
	for _, ns := range []raftlog.Namespace{raftlog.NamespaceLog, raftlog.NamespaceStable, raftlog.NamespaceSnapshot} {
		lo, hi := ns.Bounds(id)
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}
