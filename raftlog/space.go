package raftlog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Space guards the free space of the filesystem that holds a node's data
// directory, so that Pebble never runs out of it: Pebble treats a failed
// write of its WAL or MANIFEST as fatal. See DESIGN.md, "Disk space".
//
// Its thresholds are fractions of the reserve, SpaceOptions.MinFree (R):
//
//   - below R, Err reports a refusal: the node admits no new state change
//     (a check that charges, a reset, a rule change), so that memory does
//     not run ahead of a log that may not take it;
//   - once two polls in a row find R + R/8 free, it serves again (the
//     eighth and the second reading keep it from flapping);
//   - below R/8 (the floor), the disk is nearly full — something other
//     than the node's own bounded writes is eating it — and the ballast
//     file is deleted, which gives the node its size back to finish the
//     writes it holds, flush, compact and stop; it is created again (by
//     the poller) once R + R/8 + its size are free;
//   - a write that would leave less than the floor even so is refused by
//     Allow before Pebble sees it (log entries, snapshot chunks), and a
//     start is refused (OpenSpace fails with ErrDiskFull).
//
// Free space is read with statfs every poll interval, and by Allow before
// every write the node makes (about 3µs: under 1% of the synced write it
// precedes), so that a disk filled at once by another process is seen
// before the next write, not a poll later. A node that writes nothing for
// idleReadings polls in a row (and is not refusing) is idle: the poller
// then reads only every idlePolls intervals, and marks the reading stale,
// so that the first Err after that takes a reading itself before it
// answers (and wakes the poller): a check is judged by a reading taken
// after it came, never by one an idle second old. A Space is safe for
// concurrent use.
type Space struct {
	dir     string
	ballast string // the ballast file's path
	o       SpaceOptions

	free     atomic.Int64          // bytes available at the last reading, less those reported since
	total    atomic.Int64          // of the filesystem
	since    atomic.Int64          // bytes reported by Allow since the last reading
	refusal  atomic.Pointer[error] // set while free < MinFree (see Err)
	stale    atomic.Bool           // idle: Err reads before it answers (see Space)
	writes   atomic.Uint64         // Allow calls, for the poller to tell an idle node
	floorErr error                 // Allow's refusal
	hasBall  atomic.Bool           // the ballast file exists
	refused  atomic.Uint64         // writes Allow refused
	episodes atomic.Uint64         // times the refusal began
	lowAt    atomic.Int64          // Unix ns when the refusal began, or 0

	mu      sync.Mutex // serialises readings and ballast changes
	warned  bool       // Allow's refusal was logged in this episode
	above   int        // polls in a row that found resumeAt free
	noBall  bool       // the ballast could not be created: say so once
	stop    chan struct{}
	done    chan struct{}
	woken   chan struct{} // Err took a stale reading's place: poll at the pace again
	closeMu sync.Once
}

// SpaceOptions configures OpenSpace.
type SpaceOptions struct {
	// MinFree is the reserve R in bytes (see Space); 0 turns the guard off:
	// Err and Allow then never refuse and nothing is polled.
	MinFree int64
	// Ballast is the size of the ballast file kept in the directory; 0
	// keeps none (and deletes one left by an earlier run).
	Ballast int64
	// Poll is how often free space is read; default 100ms.
	Poll time.Duration
	// Logger receives one line when a refusal begins and one when it ends,
	// and the ballast's deletions and creations; nil discards them.
	Logger *slog.Logger
	// Usage returns the bytes available to the process and the size of
	// the filesystem holding dir; nil reads them with statfs. Tests fake it.
	Usage func(dir string) (avail, total uint64, err error)
}

// BallastFile is the name of the ballast file in the data directory. An
// operator who needs room at once may delete it; the node creates it
// again once the disk has room.
const BallastFile = "rlserver.ballast"

// resumeReadings is how many polls in a row must find the disk with room
// before state changes are served again: space that comes back for an
// instant (a file deleted and rewritten, a failed allocation given back)
// does not end a refusal only to begin another.
const resumeReadings = 2

// DefaultPoll is SpaceOptions.Poll's default.
const DefaultPoll = 100 * time.Millisecond

// ErrDiskFull is returned, wrapped with the figures, by OpenSpace when the
// disk has too little free space to start on, and by Allow for a write
// that would take the free space below the floor. Err's refusal wraps it
// too.
var ErrDiskFull = errors.New("raftlog: not enough free disk space")

// OpenSpace reads the free space of dir's filesystem, deletes the ballast
// file if the disk is below the floor and creates it if there is room, and
// starts polling. It fails with ErrDiskFull if less than the floor is free
// even without the ballast. The caller closes the Space.
func OpenSpace(dir string, o SpaceOptions) (*Space, error) {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Usage == nil {
		o.Usage = statfs
	}
	s := &Space{dir: dir, ballast: filepath.Join(dir, BallastFile), o: o, stop: make(chan struct{}), done: make(chan struct{}), woken: make(chan struct{}, 1)}
	s.floorErr = fmt.Errorf("%w: a write would leave less than %s free on %s (an eighth of --min-free-disk)", ErrDiskFull, mib(s.floor()), dir)
	if fi, err := os.Stat(s.ballast); err == nil && fi.Mode().IsRegular() {
		s.hasBall.Store(true)
	}
	if o.MinFree <= 0 {
		if s.hasBall.Load() && o.Ballast <= 0 {
			s.deleteBallast("the ballast is turned off")
		}
		close(s.done)
		return s, nil
	}
	avail, _, err := o.Usage(dir)
	if err != nil {
		return nil, fmt.Errorf("raftlog: free space of %s: %w", dir, err)
	}
	free := int64(min(avail, 1<<62))
	if fi, err := os.Stat(s.ballast); err == nil && s.hasBall.Load() {
		free += fi.Size() // the ballast's room is the node's
	}
	if free < s.floor() {
		return nil, fmt.Errorf("%w: %s has %s free, less than the %s a node needs to start (an eighth of --min-free-disk %s); free some space and start again",
			ErrDiskFull, dir, mib(free), mib(s.floor()), mib(o.MinFree))
	}
	if err := s.refresh(0, true); err != nil {
		return nil, fmt.Errorf("raftlog: free space of %s: %w", dir, err)
	}
	go s.poll()
	return s, nil
}

// statfs reads the space of dir's filesystem.
func statfs(dir string) (avail, total uint64, err error) {
	u, err := vfs.Default.GetDiskUsage(dir)
	return u.AvailBytes, u.TotalBytes, err
}

func (s *Space) floor() int64 { return s.o.MinFree / 8 }

func (s *Space) resumeAt() int64 { return s.o.MinFree + s.o.MinFree/8 }

// Err returns the error that refuses a state change now, or nil: while
// less than MinFree is free, an error wrapping ErrDiskFull whose text
// begins with "MISCONF", Redis's word for a server that cannot persist,
// so that the server passes it on to clients as it is. It is one
// atomic load and allocates nothing: it is asked on every check (two
// loads; and the first check after the node was idle takes a reading).
func (s *Space) Err() error {
	if s.stale.Load() {
		s.freshen()
	}
	return s.Refusal()
}

// Refusal is Err without taking a reading: the refusal as of the last
// one, which the poller takes at least every idlePolls Polls. A caller
// that asks periodically on an idle node (status, hand-overs) uses it, so
// that its asking does not keep the poller at its busy pace.
func (s *Space) Refusal() error {
	if e := s.refusal.Load(); e != nil {
		return *e
	}
	return nil
}

// Allow is asked before a write of about n bytes to the database (the
// caller counts what the write will cost on disk: a log entry is written
// to the WAL and once more when its memtable is flushed). It reads the
// free space, deleting the ballast if the disk is below the floor, and
// returns an error wrapping ErrDiskFull, and the write must not be made,
// if n bytes would leave less than the floor free; else nil.
func (s *Space) Allow(n int64) error {
	s.writes.Add(1)
	if s.room(n) {
		return nil
	}
	s.refused.Add(1)
	s.mu.Lock()
	if !s.warned {
		s.warned = true
		s.o.Logger.Error("the disk is nearly full: the node's writes are refused before they reach the database",
			"dir", s.dir, "free", mib(s.free.Load()), "floor", mib(s.floor()))
	}
	s.mu.Unlock()
	return s.floorErr
}

// Room returns Allow's error if a write would be refused now, without
// counting a write or a refusal.
func (s *Space) Room() error {
	if s.room(0) {
		return nil
	}
	return s.floorErr
}

// freshen takes a reading in place of the idle poller's stale one, and
// has the poller read at its pace again. Callers that find the reading
// stale wait for the one that takes it.
func (s *Space) freshen() {
	s.mu.Lock()
	if s.stale.Load() {
		s.refreshLocked(0, false) // an error keeps the last reading: see refresh
		s.stale.Store(false)
		select {
		case s.woken <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// room reads the free space and reports whether at least the floor is
// left after n more bytes; if so, it counts them until the next reading.
func (s *Space) room(n int64) bool {
	if s.o.MinFree <= 0 {
		return true
	}
	s.refresh(n, false) // an error keeps the last reading: see refresh
	if s.free.Load()-s.since.Load()-n < s.floor() {
		return false
	}
	s.since.Add(n)
	return true
}

// poll reads the free space every Poll until Close; every idlePolls
// Polls while the node is idle (see Space).
func (s *Space) poll() {
	defer close(s.done)
	t := time.NewTimer(s.o.Poll)
	defer t.Stop()
	failing, quiet, writes := false, 0, s.writes.Load()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.woken:
			quiet = 0
		}
		err := s.refresh(0, true)
		if err != nil && !failing {
			s.o.Logger.Warn("cannot read the free disk space; the last reading stands", "dir", s.dir, "err", err)
		}
		failing = err != nil
		if w := s.writes.Load(); w != writes || s.refusal.Load() != nil || failing {
			quiet, writes = 0, w
		} else {
			quiet++
		}
		next := s.o.Poll
		if quiet >= idleReadings {
			s.stale.Store(true)
			next *= idlePolls
		}
		t.Reset(next)
	}
}

// idleReadings is how many polls in a row without a write make a node
// idle; idlePolls how many Polls apart an idle node's poller reads.
const (
	idleReadings = 10
	idlePolls    = 10
)

// refresh reads the free space, deletes the ballast below the floor (and,
// when polling, creates it again once there is room for it), and sets or
// clears the refusal, as if the pending bytes about to be written were
// already gone. On a failed reading the last one stands.
func (s *Space) refresh(pending int64, polling bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshLocked(pending, polling)
}

// refreshLocked is refresh with mu held.
func (s *Space) refreshLocked(pending int64, polling bool) error {
	free, err := s.read(pending)
	if err != nil {
		return err
	}
	switch {
	case free < s.floor() && s.hasBall.Load():
		if s.deleteBallast("the disk is nearly full (less than an eighth of --min-free-disk free)") {
			if free, err = s.read(pending); err != nil {
				return err
			}
		}
	case polling && (!s.hasBall.Load() || s.o.Ballast <= 0) && free >= s.resumeAt()+s.o.Ballast:
		if s.o.Ballast <= 0 {
			if s.hasBall.Load() {
				s.deleteBallast("the ballast is turned off")
			}
		} else if s.createBallast() {
			if free, err = s.read(pending); err != nil {
				return err
			}
		}
	}
	s.judge(free, polling)
	return nil
}

// read takes a statfs reading, resets the bytes counted since the last,
// and returns the free space less pending. Call with mu held.
func (s *Space) read(pending int64) (int64, error) {
	avail, total, err := s.o.Usage(s.dir)
	if err != nil {
		return 0, err
	}
	free := int64(min(avail, 1<<62))
	s.free.Store(free)
	s.total.Store(int64(min(total, 1<<62)))
	s.since.Store(0)
	return free - pending, nil
}

// judge sets the refusal below MinFree, and clears it once resumeReadings
// polls in a row found resumeAt free. Call with mu held.
func (s *Space) judge(free int64, polling bool) {
	low := s.refusal.Load() != nil
	if free < s.resumeAt() {
		s.above = 0
	} else if low && polling {
		s.above++
	}
	switch {
	case !low && free < s.o.MinFree:
		var err error = lowError(fmt.Sprintf("MISCONF disk space low: less than --min-free-disk (%s) is free on %s, so state changes are refused until space is freed (reads still work; see INFO persistence)",
			mib(s.o.MinFree), s.dir))
		s.refusal.Store(&err)
		s.lowAt.Store(time.Now().UnixNano())
		s.episodes.Add(1)
		s.o.Logger.Error("disk space low: refusing state changes until space is freed", "dir", s.dir,
			"free", mib(free), "min_free_disk", mib(s.o.MinFree), "resume_at", mib(s.resumeAt()), "ballast", s.hasBall.Load())
	case low && s.above >= resumeReadings:
		since := time.Duration(time.Now().UnixNano() - s.lowAt.Load())
		s.refusal.Store(nil)
		s.lowAt.Store(0)
		s.o.Logger.Info("disk space is back: serving state changes again", "dir", s.dir, "free", mib(free),
			"refused_for", since.Round(time.Millisecond), "writes_refused", s.refused.Load(), "ballast", s.hasBall.Load())
		s.warned = false
	}
}

// deleteBallast removes the ballast file and reports whether it did. Call
// with mu held.
func (s *Space) deleteBallast(why string) bool {
	if err := os.Remove(s.ballast); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.o.Logger.Error("cannot delete the ballast file", "path", s.ballast, "err", err)
		return false
	}
	s.hasBall.Store(false)
	s.o.Logger.Warn("ballast file deleted: "+why, "path", s.ballast, "bytes", s.o.Ballast)
	return true
}

// createBallast writes the ballast file, synced, and reports whether it
// did; a failed attempt removes what it wrote and is said once. Call with
// mu held.
func (s *Space) createBallast() bool {
	tmp := s.ballast + ".tmp"
	err := writeBallast(tmp, s.o.Ballast)
	if err == nil {
		err = os.Rename(tmp, s.ballast)
	}
	if err != nil {
		os.Remove(tmp)
		if !s.noBall {
			s.noBall = true
			s.o.Logger.Warn("cannot create the ballast file; trying again when there is room", "path", s.ballast, "err", err)
		}
		return false
	}
	s.noBall = false
	s.hasBall.Store(true)
	s.o.Logger.Info("ballast file created", "path", s.ballast, "bytes", s.o.Ballast)
	return true
}

// writeBallast creates path holding n bytes of allocated disk space.
func writeBallast(path string, n int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, n)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fill writes n zero bytes to f, for filesystems without fallocate.
func fill(f *os.File, n int64) error {
	buf := make([]byte, 1<<20)
	for n > 0 {
		w, err := f.Write(buf[:min(int64(len(buf)), n)])
		if err != nil {
			return err
		}
		n -= int64(w)
	}
	return nil
}

// Close stops polling. The ballast file stays for the next start.
func (s *Space) Close() {
	s.closeMu.Do(func() { close(s.stop) })
	<-s.done
}

// SpaceStats is what Stats reports.
type SpaceStats struct {
	// Guarded is false when MinFree is 0 (the guard is off).
	Guarded bool
	// Low is true while state changes are refused; LowSince is when that
	// began (zero when not Low); Episodes counts the times it began.
	Low      bool
	LowSince time.Time
	Episodes uint64
	// Free is the bytes available at the last reading, less the writes
	// counted since; Total the filesystem's size.
	Free, Total int64
	// MinFree and Ballast are the options; BallastPresent whether the
	// ballast file exists now.
	MinFree, Ballast int64
	BallastPresent   bool
	// Refused counts the writes Allow refused.
	Refused uint64
}

// Stats returns the Space's state now, for INFO persistence and metrics.
func (s *Space) Stats() SpaceStats {
	st := SpaceStats{Guarded: s.o.MinFree > 0, Low: s.refusal.Load() != nil, Episodes: s.episodes.Load(),
		Free: s.free.Load() - s.since.Load(), Total: s.total.Load(), MinFree: s.o.MinFree, Ballast: s.o.Ballast,
		BallastPresent: s.hasBall.Load(), Refused: s.refused.Load()}
	if at := s.lowAt.Load(); at != 0 && st.Low {
		st.LowSince = time.Unix(0, at)
	}
	return st
}

// lowError is Err's refusal: its text is the whole message, and it wraps
// ErrDiskFull.
type lowError string

func (e lowError) Error() string { return string(e) }

func (e lowError) Unwrap() error { return ErrDiskFull }

// mib formats n bytes for a log line or an error.
func mib(n int64) string {
	if n >= 10<<20 || n <= -10<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
}
