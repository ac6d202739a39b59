package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/raftlog"
	"github.com/rlserver/rlserver/snapshot"
)

// Storage is a node's data directory: one Pebble database (dir/db) that
// holds the Raft log, stable store and snapshots of the node's groups, and
// an identity file (dir/rlserver.id) written once the database holds a
// group, so that a directory whose database has gone missing is refused
// instead of started empty.
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
}

// StorageOptions configures OpenStorage.
type StorageOptions struct {
	// NodeID is the node's id; "" takes the one the directory holds, or
	// "node1" for a new directory. A different id than the directory's
	// is refused.
	NodeID string
	// FS is the file system; nil means the disk.
	FS vfs.FS
	// Logger receives Pebble's log.
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
}

// Defaults of StorageOptions' disk guard, which rlserver's flags take:
// see raftlog/DESIGN.md, "Disk space", for why these numbers.
const (
	DefaultMinFreeDisk = 256 << 20
	DefaultDiskBallast = 64 << 20
)

// Errors of OpenStorage.
var (
	ErrNodeID      = errors.New("the data directory belongs to another node")
	ErrLostStorage = errors.New("the data directory lost its database")
)

const (
	idFile  = "rlserver.id"
	dbDir   = "db"
	groupID = 0 // the one group of a single node
)

// OpenStorage opens the data directory dir, creating it if it is new.
func OpenStorage(dir string, o StorageOptions) (*Storage, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.RetainSnapshots <= 0 {
		o.RetainSnapshots = 1
	}
	// The directory's own entry, and later its database's, must survive a
	// crash: sync the directories that hold them.
	if err := o.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if err := syncDir(o.FS, filepath.Dir(filepath.Clean(dir))); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	known, err := readID(o.FS, dir)
	if err != nil {
		return nil, err
	}
	space, err := openSpace(dir, o)
	if err != nil {
		return nil, err
	}
	id := o.NodeID
	switch {
	case known != "" && id != "" && id != known:
		return nil, fmt.Errorf("%w: %s holds node %q, not %q (--node-id)", ErrNodeID, dir, known, id)
	case known != "":
		id = known
	case id == "":
		id = "node1"
	}
	db, err := raftlog.OpenDB(filepath.Join(dir, dbDir), raftlog.Options{FS: o.FS, Logger: o.Logger, MustExist: known != ""})
	if err != nil {
		space.Close()
		if known != "" {
			return nil, fmt.Errorf("%w: %s was node %q's, but its database cannot be opened: %v", ErrLostStorage, dir, known, err)
		}
		return nil, fmt.Errorf("open database in %s: %w", dir, err)
	}
	st := &Storage{DB: db, NodeID: id, Space: space, dir: dir, fs: o.FS}
	if err = syncDir(o.FS, dir); err != nil {
		err = fmt.Errorf("data directory: %w", err)
	} else {
		st.Logs, st.Snaps, err = st.GroupStorage(groupID, o.RetainSnapshots, o.Logger)
	}
	if err == nil && known != "" {
		err = st.checkNotEmpty()
	}
	if err != nil {
		db.Close()
		space.Close()
		return nil, err
	}
	if o.Registerer != nil {
		registerDiskMetrics(o.Registerer, space)
	}
	return st, nil
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
	path := filepath.Join(st.dir, idFile)
	if _, err := st.fs.Stat(path); err == nil {
		return nil
	}
	f, err := st.fs.Create(path+".tmp", vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(st.NodeID + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = st.fs.Rename(path+".tmp", path)
	}
	if err == nil {
		err = syncDir(st.fs, st.dir)
	}
	return err
}

// syncDir makes the entries of directory path durable.
func syncDir(fs vfs.FS, path string) error {
	d, err := fs.OpenDir(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// LogStats returns the log store's counters for the node's metrics.
func (st *Storage) LogStats() LogStats {
	s := st.Logs.Stats()
	return LogStats{Fsyncs: s.Syncs, EntriesBytes: s.Bytes}
}

// Close closes the database and stops the free-space guard.
func (st *Storage) Close() error {
	err := st.DB.Close()
	st.Space.Close()
	return err
}

// readID returns the node id the directory holds, or "" for a new one.
func readID(fs vfs.FS, dir string) (string, error) {
	f, err := fs.Open(filepath.Join(dir, idFile))
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
		return "", fmt.Errorf("data directory: %s is empty", filepath.Join(dir, idFile))
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

// layoutVersion is the version of the Layouts written now.
const layoutVersion = 2

// bootstrapped reports whether l's groups were bootstrapped, or need not
// be (a joining node's are added by the cluster).
func (l *Layout) bootstrapped() bool {
	return l.Version < 2 || l.Bootstrapped || len(l.Peers) == 0
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
