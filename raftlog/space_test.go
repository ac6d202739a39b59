package raftlog

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/internal/testutil"
)

const mb = 1 << 20

// fakeDisk is a filesystem whose free space the test sets; the ballast
// file, a real file in the test's directory, takes its size from it.
type fakeDisk struct {
	dir   string
	avail atomic.Int64 // without the ballast
	reads atomic.Int64
}

func (d *fakeDisk) usage(dir string) (uint64, uint64, error) {
	d.reads.Add(1)
	free := d.avail.Load()
	if fi, err := os.Stat(filepath.Join(d.dir, BallastFile)); err == nil {
		free -= fi.Size()
	}
	return uint64(max(free, 0)), 1 << 30, nil
}

// openFake opens a Space on a fake disk with avail bytes free, a reserve
// of 16 MiB and a 4 MiB ballast; it never polls by itself.
func openFake(t *testing.T, avail int64, logs *bytes.Buffer) (*Space, *fakeDisk, error) {
	t.Helper()
	d := &fakeDisk{dir: t.TempDir()}
	d.avail.Store(avail)
	s, err := OpenSpace(d.dir, SpaceOptions{MinFree: 16 * mb, Ballast: 4 * mb, Poll: time.Hour, Usage: d.usage,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err == nil {
		t.Cleanup(s.Close)
	}
	return s, d, err
}

func ballastThere(d *fakeDisk) bool {
	_, err := os.Stat(filepath.Join(d.dir, BallastFile))
	return err == nil
}

// TestSpaceThresholds walks a disk down and up again: refusal below the
// reserve (16 MiB), the ballast deleted below the floor (2 MiB) and made
// again once the reserve, an eighth and the ballast are free, service back
// from the reserve and an eighth (18 MiB) found by two polls in a row, one
// line when the refusal begins and one when it ends.
func TestSpaceThresholds(t *testing.T) {
	var logs bytes.Buffer
	s, d, err := openFake(t, 100*mb, &logs)
	if err != nil {
		t.Fatal(err)
	}
	if !ballastThere(d) || s.Err() != nil {
		t.Fatalf("at start with 100 MiB: ballast %v, refusal %v", ballastThere(d), s.Err())
	}
	for i, step := range []struct {
		avail       int64 // without the ballast
		wantLow     bool
		wantBallast bool
	}{
		{avail: 21 * mb, wantLow: false, wantBallast: true}, // 17 free with the ballast
		{avail: 19 * mb, wantLow: true, wantBallast: true},  // 15
		{avail: 6 * mb, wantLow: true, wantBallast: true},   // 2: the floor, not below
		{avail: 5 * mb, wantLow: true, wantBallast: false},  // 1: ballast deleted, 5 free
		{avail: 17 * mb, wantLow: true, wantBallast: false}, // below 18
		{avail: 19 * mb, wantLow: false, wantBallast: false},
		{avail: 21 * mb, wantLow: false, wantBallast: false}, // below 18 + 4 for the ballast
		{avail: 23 * mb, wantLow: false, wantBallast: true},
		{avail: 18 * mb, wantLow: true, wantBallast: true}, // 14 free: a second episode
		{avail: 30 * mb, wantLow: false, wantBallast: true},
	} {
		d.avail.Store(step.avail)
		for range resumeReadings { // a resumption needs that many polls
			if err := s.refresh(0, true); err != nil {
				t.Fatal(err)
			}
		}
		if low := s.Err() != nil; low != step.wantLow || ballastThere(d) != step.wantBallast {
			t.Fatalf("step %d (%d MiB): low %v, ballast %v; want %v, %v\n%s", i, step.avail/mb, low, ballastThere(d),
				step.wantLow, step.wantBallast, logs.String())
		}
	}
	st := s.Stats()
	if st.Episodes != 2 || st.Low || !st.BallastPresent {
		t.Fatalf("stats %+v", st)
	}
	for line, want := range map[string]int{"disk space low": 2, "disk space is back": 2, "ballast file deleted": 1, "ballast file created": 2} {
		if got := strings.Count(logs.String(), line); got != want {
			t.Errorf("%d lines with %q, want %d\n%s", got, line, want, logs.String())
		}
	}
}

// TestSpaceErrIsMISCONF: the refusal begins with MISCONF (the server
// passes it on as it is), names the flag and the directory, and wraps
// ErrDiskFull.
func TestSpaceErrIsMISCONF(t *testing.T) {
	var logs bytes.Buffer
	s, d, err := openFake(t, 100*mb, &logs)
	if err != nil {
		t.Fatal(err)
	}
	d.avail.Store(10 * mb)
	s.refresh(0, true)
	err = s.Err()
	if err == nil || !strings.HasPrefix(err.Error(), "MISCONF ") || !strings.Contains(err.Error(), "--min-free-disk") ||
		!strings.Contains(err.Error(), d.dir) || !errors.Is(err, ErrDiskFull) {
		t.Fatalf("refusal %v", err)
	}
	if a := testing.AllocsPerRun(100, func() { _ = s.Err() }); a != 0 {
		t.Fatalf("Err allocates %v times", a)
	}
}

// TestSpaceAllowReadsBeforeEveryWrite: a disk filled at once by another
// process is seen by the next write, not a poll later: Allow reads the
// free space, deletes the ballast when the disk is below the floor (2
// MiB), lets through a write that the ballast's room takes, refuses (and
// counts, and logs once) one that would leave less than the floor, and
// sets the refusal of state changes without waiting for a poll. Only the
// poller makes the ballast again and ends the refusal, after two polls.
func TestSpaceAllowReadsBeforeEveryWrite(t *testing.T) {
	var logs bytes.Buffer
	s, d, err := openFake(t, 40*mb, &logs) // 36 free with the ballast
	if err != nil {
		t.Fatal(err)
	}
	reads := d.reads.Load()
	if err := s.Allow(1000); err != nil || d.reads.Load() != reads+1 {
		t.Fatalf("allow: %v after %d readings, want 1", err, d.reads.Load()-reads)
	}
	d.avail.Store(4 * mb) // filled at once: 0 free with the ballast
	if err := s.Allow(mb); err != nil {
		t.Fatalf("a 1 MiB write with the ballast to delete: %v", err)
	}
	if ballastThere(d) || s.Err() == nil {
		t.Fatalf("ballast %v, refusal %v: want it deleted and state changes refused", ballastThere(d), s.Err())
	}
	for i := 0; i < 3; i++ {
		if err := s.Allow(3 * mb); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("a write past the floor: %v", err)
		}
	}
	if s.Stats().Refused != 3 || s.Room() != nil {
		t.Fatalf("refused %d, room %v", s.Stats().Refused, s.Room())
	}
	if n := strings.Count(logs.String(), "writes are refused"); n != 1 {
		t.Fatalf("%d lines for refused writes, want 1\n%s", n, logs.String())
	}
	d.avail.Store(100 * mb)
	if s.Allow(mb); ballastThere(d) || s.Err() == nil {
		t.Fatalf("after Allow with room: ballast %v, refusal %v; want only the poller to make the ballast and end the refusal", ballastThere(d), s.Err())
	}
	s.refresh(0, true)
	if !ballastThere(d) || s.Err() == nil {
		t.Fatalf("after one poll with room: ballast %v, refusal %v; want the ballast made, the refusal kept until a second poll", ballastThere(d), s.Err())
	}
	s.refresh(0, true)
	if s.Err() != nil {
		t.Fatal("two polls with room did not end the refusal")
	}
}

// TestOpenSpaceOnAFullDisk: below the floor (2 MiB) a start is refused
// with ErrDiskFull and a message naming the directory and the flag; with
// a ballast to delete, the start goes on, read-only.
func TestOpenSpaceOnAFullDisk(t *testing.T) {
	var logs bytes.Buffer
	_, d, err := openFake(t, mb, &logs)
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "--min-free-disk") || !strings.Contains(err.Error(), d.dir) {
		t.Fatalf("open on 1 MiB: %v", err)
	}
	// A ballast left by an earlier run, and a full disk.
	dir := t.TempDir()
	if err := writeBallast(filepath.Join(dir, BallastFile), 4*mb); err != nil {
		t.Fatal(err)
	}
	d = &fakeDisk{dir: dir}
	d.avail.Store(4 * mb) // 0 free with the ballast
	s, err := OpenSpace(dir, SpaceOptions{MinFree: 16 * mb, Ballast: 4 * mb, Poll: time.Hour, Usage: d.usage})
	if err != nil {
		t.Fatalf("open with a ballast to delete: %v", err)
	}
	defer s.Close()
	if ballastThere(d) || s.Err() == nil {
		t.Fatalf("ballast %v, refusal %v: want it deleted and a read-only start", ballastThere(d), s.Err())
	}
}

// TestSpaceOff: a reserve of 0 never refuses, never reads the disk and
// deletes a ballast left behind when the ballast is off too.
func TestSpaceOff(t *testing.T) {
	dir := t.TempDir()
	writeBallast(filepath.Join(dir, BallastFile), mb)
	d := &fakeDisk{dir: dir}
	s, err := OpenSpace(dir, SpaceOptions{Usage: d.usage})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Allow(1<<40) != nil || s.Err() != nil || d.reads.Load() != 0 || ballastThere(d) {
		t.Fatalf("guard off: allow %v, err %v, reads %d, ballast %v", s.Allow(1<<40), s.Err(), d.reads.Load(), ballastThere(d))
	}
}

// TestStoreLogsAsksTheGuard: a refused append fails with the guard's error
// and stores nothing; once the guard allows, the same entries go in.
func TestStoreLogsAsksTheGuard(t *testing.T) {
	st := mustNew(t, openMem(t), 1)
	g := &switchGuard{}
	st.SetGuard(g)
	g.refuse.Store(true)
	if err := st.StoreLogs(entries(1, 1, 3)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("refused append: %v", err)
	}
	if last, _ := st.LastIndex(); last != 0 {
		t.Fatalf("a refused append stored up to %d", last)
	}
	g.refuse.Store(false)
	mustStore(t, st, entries(1, 1, 3))
	var l raft.Log
	if err := st.GetLog(3, &l); err != nil || g.asked.Load() < 2*int64(len(l.Data)) {
		t.Fatalf("get 3: %v; guard asked for %d bytes", err, g.asked.Load())
	}
}

// switchGuard refuses while refuse is set, and counts the bytes asked.
type switchGuard struct {
	refuse atomic.Bool
	asked  atomic.Int64
}

func (g *switchGuard) Allow(n int64) error {
	if g.refuse.Load() {
		return ErrDiskFull
	}
	g.asked.Add(n)
	return nil
}

// BenchmarkStatfs: what one reading of the free space costs (Allow takes
// one per step of writes, the poller one every 100ms).
func BenchmarkStatfs(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		if _, _, err := statfs(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpaceErr: what the check path pays per state change.
func BenchmarkSpaceErr(b *testing.B) {
	s, err := OpenSpace(b.TempDir(), SpaceOptions{MinFree: mb, Poll: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < b.N; i++ {
		if s.Err() != nil {
			b.Fatal("refused")
		}
	}
}

// TestIdleSpaceReadsOnFirstErr: a Space that sees no write for
// idleReadings polls slows its poller down and marks its reading stale;
// the first Err after that reads the disk itself, so a disk filled while
// the node was idle is refused at the next check, not a slow poll later.
func TestIdleSpaceReadsOnFirstErr(t *testing.T) {
	d := &fakeDisk{dir: t.TempDir()}
	d.avail.Store(64 * mb)
	const poll = 20 * time.Millisecond
	s, err := OpenSpace(d.dir, SpaceOptions{MinFree: 16 * mb, Poll: poll, Usage: d.usage})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testutil.WaitFor(t, 10*time.Second, "the poller to go idle with no writes", s.stale.Load)
	reads := d.reads.Load()
	time.Sleep(3 * poll)
	if n := d.reads.Load() - reads; n > 1 {
		t.Errorf("an idle poller read the disk %d times in 3 polls", n)
	}
	d.avail.Store(8 * mb) // filled while idle
	if err := s.Err(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("the first Err after the disk filled: %v, want a refusal", err)
	}
	if s.stale.Load() {
		t.Fatal("still stale after Err read the disk")
	}
}
