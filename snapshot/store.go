package snapshot

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// ChunkSize is the size of the chunks a snapshot's data is stored in; the
// last chunk of a snapshot may be shorter. A sink holds at most one chunk
// in memory.
const ChunkSize = 256 << 10

// Store is the raft.SnapshotStore of one Raft group, kept in a node's
// Pebble database (see the package doc). It is safe for concurrent use;
// each sink and reader it returns is used by one goroutine at a time. The
// Store does not own the database and has nothing to close, but every
// reader from Open must be closed before the database is.
type Store struct {
	db     *pebble.DB
	group  uint32
	retain int
	logger *slog.Logger
	keys   keys
	now    func() time.Time
	sync   *pebble.WriteOptions // of the metadata commit: pebble.Sync; crash tests swap in NoSync

	// mu serializes the commits of sinks (metadata and pruning) and
	// guards last.
	mu   sync.Mutex
	last uint64 // the highest snapshot number used or found

	stats  storeCounters
	guard  Guard  // nil: none
	onSave func() // set by OnSave before use, or nil
}

// Guard is asked before each chunk is written whether the disk can take
// it (raftlog.Space satisfies it; see SetGuard).
type Guard interface {
	// Allow returns an error, and the write is not made, if n more bytes
	// on disk would leave too little free space.
	Allow(n int64) error
}

// SetGuard makes every snapshot ask g before each chunk it writes, with
// twice the chunk's size (the WAL now, a flushed table later): a refusal
// fails the snapshot (its chunks are removed), which raft reports and
// tries again later, instead of Pebble meeting a full disk in its WAL.
// Call it before the Store is used.
func (s *Store) SetGuard(g Guard) { s.guard = g }

// OnSave makes the Store call fn after each snapshot a sink commits (what
// Stats counts in Snapshots), so that a watcher can sleep while nothing
// is saved. fn must not block. Call it before the Store is used.
func (s *Store) OnSave(fn func()) { s.onSave = fn }

var _ raft.SnapshotStore = (*Store)(nil)

// NewStore returns the snapshot store of group in db, which keeps the
// newest retain snapshots (at least 1). logger receives a line for each
// snapshot committed, pruned or found unfinished; nil discards them.
//
// NewStore cleans up after a crash: it range-deletes, with one synced
// commit, the chunks of every snapshot whose metadata was never committed,
// and the snapshots beyond retain. Two Stores of the same group must not
// be used at once.
func NewStore(db *pebble.DB, group uint32, retain int, logger *slog.Logger) (*Store, error) {
	if retain < 1 {
		return nil, fmt.Errorf("%w: retain %d", ErrBadRetain, retain)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		db:     db,
		group:  group,
		retain: retain,
		logger: logger.With("component", "snapshot", "group", group),
		keys:   newKeys(group),
		now:    time.Now,
		sync:   pebble.Sync,
	}
	if err := s.recover(); err != nil {
		return nil, err
	}
	return s, nil
}

// NewReader returns the snapshot store of group in db for List and Open
// only: unlike NewStore it writes nothing (it suits a database opened
// read-only), so it leaves a crash's unfinished chunks where they are, and
// Create must not be called on it.
func NewReader(db *pebble.DB, group uint32, retain int) (*Store, error) {
	if retain < 1 {
		return nil, fmt.Errorf("%w: retain %d", ErrBadRetain, retain)
	}
	return &Store{db: db, group: group, retain: retain, logger: slog.New(slog.DiscardHandler),
		keys: newKeys(group), now: time.Now, sync: pebble.Sync}, nil
}

// Create starts a snapshot of the state at index and term and returns its
// sink. Only raft snapshot version 1 is supported (else
// ErrSnapshotVersion). The snapshot exists, for List and Open, once the
// sink's Close has returned nil. trans is not used.
func (s *Store) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("%w: %d", ErrSnapshotVersion, version)
	}
	start := s.now()
	num := s.nextNum(start)
	k := &chunkSink{
		store: s,
		num:   num,
		start: start,
		buf:   make([]byte, 0, ChunkSize),
	}
	k.rec.meta = raft.SnapshotMeta{
		Version:            version,
		ID:                 fmt.Sprintf("%d-%d-%d", term, index, num),
		Index:              index,
		Term:               term,
		Configuration:      configuration.Clone(),
		ConfigurationIndex: configurationIndex,
	}
	return k, nil
}

// nextNum returns a snapshot number above every one used or found: now in
// Unix milliseconds, or one more than the last number if the clock has
// not moved past it.
func (s *Store) nextNum(now time.Time) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = max(uint64(max(now.UnixMilli(), 0)), s.last+1)
	return s.last
}

// List returns the metadata of the committed snapshots, newest first
// (highest term, then index, then the latest created), at most retain of
// them. A metadata record that does not decode fails the whole List with
// ErrCorruptSnapshot: skipping it could make raft restore an older
// snapshot whose following log entries are gone.
func (s *Store) List() ([]*raft.SnapshotMeta, error) {
	recs, err := s.records()
	if err != nil {
		return nil, err
	}
	metas := make([]*raft.SnapshotMeta, 0, min(len(recs), s.retain))
	for _, r := range recs[:min(len(recs), s.retain)] {
		m := r.meta
		metas = append(metas, &m)
	}
	return metas, nil
}

// Open returns the metadata of snapshot id and a reader that streams its
// data from one consistent view of the database: a snapshot pruned while
// it is read stays readable until the reader is closed. The reader holds
// one chunk at a time and fails with ErrCorruptSnapshot instead of io.EOF
// if the data is not exactly what Close committed. An unknown id gives
// ErrNoSnapshot. The caller must close the reader.
func (s *Store) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	num, ok := numOf(id)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrNoSnapshot, id)
	}
	lo, _ := s.keys.metas()
	_, hi := s.keys.allChunks()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: group %d: open %s: %w", s.group, id, err)
	}
	rec, err := s.recordAt(it, num)
	if err == nil && rec.meta.ID != id {
		err = fmt.Errorf("%w: %q (number %d holds %q)", ErrNoSnapshot, id, num, rec.meta.ID)
	}
	if err != nil {
		return nil, nil, errors.Join(err, it.Close())
	}
	m := rec.meta
	return &m, newChunkReader(it, s.keys, num, rec), nil
}

// recordAt positions it on the metadata of snapshot num and decodes it.
func (s *Store) recordAt(it *pebble.Iterator, num uint64) (*record, error) {
	key := s.keys.meta(num)
	if !it.SeekGE(key) || string(it.Key()) != string(key) {
		if err := it.Error(); err != nil {
			return nil, fmt.Errorf("snapshot: group %d: read metadata %d: %w", s.group, num, err)
		}
		return nil, fmt.Errorf("%w: number %d", ErrNoSnapshot, num)
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("snapshot: group %d: read metadata %d: %w", s.group, num, err)
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return nil, fmt.Errorf("group %d, snapshot number %d: %w", s.group, num, err)
	}
	return rec, nil
}

// numOf returns the snapshot number at the end of an ID.
func numOf(id string) (uint64, bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	return n, err == nil
}

// numbered is a committed snapshot's record with its number.
type numbered struct {
	*record
	num uint64
}

// records reads every metadata record, newest first.
func (s *Store) records() ([]numbered, error) {
	lo, hi := s.keys.metas()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("snapshot: group %d: list: %w", s.group, err)
	}
	var recs []numbered
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		recs, err = s.appendRecord(recs, it)
	}
	if ierr := errors.Join(it.Error(), it.Close()); err == nil && ierr != nil {
		err = fmt.Errorf("snapshot: group %d: list: %w", s.group, ierr)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(recs, newestFirst)
	return recs, nil
}

// appendRecord decodes the record under it and appends it to recs.
func (s *Store) appendRecord(recs []numbered, it *pebble.Iterator) ([]numbered, error) {
	num, ok := s.keys.num(it.Key())
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("snapshot: group %d: list: %w", s.group, err)
	}
	if !ok || len(it.Key()) != len(s.keys.meta(0)) {
		return nil, fmt.Errorf("%w: group %d: metadata key %x", ErrCorruptSnapshot, s.group, it.Key())
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return nil, fmt.Errorf("group %d, snapshot number %d: %w", s.group, num, err)
	}
	return append(recs, numbered{rec, num}), nil
}

// newestFirst orders snapshots as raft wants them listed: highest term,
// then highest index, then the latest created.
func newestFirst(a, b numbered) int {
	if c := cmpDesc(a.meta.Term, b.meta.Term); c != 0 {
		return c
	}
	if c := cmpDesc(a.meta.Index, b.meta.Index); c != 0 {
		return c
	}
	return cmpDesc(a.num, b.num)
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
