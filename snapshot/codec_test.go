package snapshot_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/rules"
	"github.com/rlserver/rlserver/shards"
	"github.com/rlserver/rlserver/snapshot"
)

var update = flag.Bool("update", false, "rewrite testdata/v1.snap from fixtureStore")

const fixtureNow = int64(1_750_000_000e9)

// fixtureStore returns a Store whose state is fixed: a key of every
// algorithm (a long log among them, which lives in a ring), a
// CL.THROTTLE key, two rules and a rule counter.
func fixtureStore() *shards.Store {
	s := shards.New(8)
	now := fixtureNow - 30e9
	p := engine.Params{Limit: 100, Window: 3600e9} // nothing expires by fixtureNow
	for i, a := range []engine.Algo{engine.Fixed, engine.Sliding, engine.Log, engine.Token, engine.Leaky, engine.GCRA} {
		for j := 0; j < 3; j++ {
			s.Check([]byte(fmt.Sprintf("%s:%d", a, j)), a, p, int64(1+i+j), now+int64(j)*1e9)
		}
	}
	for j := 0; j < 50; j++ {
		s.Check([]byte("log:long"), engine.Log, p, 1, now+int64(j)*1e8)
	}
	s.Throttle([]byte("cell"), 15, 30, 3600, 3, now)
	s.SetRule(rules.Rule{ID: "free-users", Target: "/users/*", Tier: "free", KeyType: "user", Algo: "sliding", Limit: 100, Window: "1m"})
	s.SetRule(rules.Rule{ID: "login", Target: "/login", Tier: "*", KeyType: "ip", Algo: "gcra", Limit: 5, Window: "1m", Shadow: true})
	q := &rules.Query{}
	q.Reset()
	q.Target, q.Tier, q.Cost = []byte("/users/7"), []byte("free"), 1
	q.AddID([]byte("user"), []byte("u7"))
	s.CheckRules(q, now)
	return s
}

func write(t *testing.T, s *shards.Store, now int64) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := snapshot.Write(&b, s, now); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRoundTrip: a snapshot read into a Store of another shard count holds
// the same state (digest), rules included, and replaces what was there.
func TestRoundTrip(t *testing.T) {
	src := fixtureStore()
	data := write(t, src, fixtureNow)
	dst := shards.New(64)
	dst.Check([]byte("stale"), engine.Fixed, engine.Params{Limit: 1, Window: 3600e9}, 1, fixtureNow)
	dst.SetRule(rules.Rule{ID: "stale", Target: "*", Tier: "*", KeyType: "ip", Algo: "fixed", Limit: 1, Window: "1s"})
	now, n, err := snapshot.Read(bytes.NewReader(data), dst)
	if err != nil || now != fixtureNow {
		t.Fatalf("Read: now %d, err %v", now, err)
	}
	if want := int64(src.Len() + src.RuleCount()); n != want {
		t.Fatalf("read %d records, want %d", n, want)
	}
	if d1, d2 := src.Digest(fixtureNow), dst.Digest(fixtureNow); d1 != d2 {
		t.Fatalf("digest after restore %x, want %x", d2, d1)
	}
	if _, ok := dst.Rule("stale"); ok {
		t.Fatal("restore kept a rule the snapshot does not hold")
	}
}

// TestEmptySnapshot: a Store with nothing is a valid snapshot of nothing.
func TestEmptySnapshot(t *testing.T) {
	data := write(t, shards.New(4), 5)
	dst := fixtureStore()
	if _, n, err := snapshot.Read(bytes.NewReader(data), dst); err != nil || n != 0 || dst.Len() != 0 || dst.RuleCount() != 0 {
		t.Fatalf("records %d, err %v, %d keys and %d rules left", n, err, dst.Len(), dst.RuleCount())
	}
}

// TestGoldenV1: testdata/v1.snap, written by version 1 of the codec from
// fixtureStore, still loads into the same state, and this build writes
// the same bytes (a change of format must bump the version and keep this
// fixture loading).
func TestGoldenV1(t *testing.T) {
	path := filepath.Join("testdata", "v1.snap")
	data := write(t, fixtureStore(), fixtureNow)
	if *update {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := shards.New(16)
	if _, _, err := snapshot.Read(bytes.NewReader(golden), dst); err != nil {
		t.Fatalf("the v1 fixture no longer loads: %v", err)
	}
	if d1, d2 := fixtureStore().Digest(fixtureNow), dst.Digest(fixtureNow); d1 != d2 {
		t.Fatalf("the v1 fixture loads to digest %x, want %x", d2, d1)
	}
	if !bytes.Equal(golden, data) {
		t.Fatal("this build writes other bytes than testdata/v1.snap: bump the version (and keep reading v1) or run with -update if the fixture's state changed")
	}
	// The first v1 fixture, written with the shards' keys in index order
	// rather than scrambled, loads to the same state.
	old, err := os.ReadFile(filepath.Join("testdata", "v1-slot-order.snap"))
	if err != nil {
		t.Fatal(err)
	}
	dst = shards.New(16)
	if _, _, err := snapshot.Read(bytes.NewReader(old), dst); err != nil || dst.Digest(fixtureNow) != fixtureStore().Digest(fixtureNow) {
		t.Fatalf("testdata/v1-slot-order.snap: err %v, or another state", err)
	}
}

// TestCorruptionIsAnError: every cut and a flipped bit anywhere are
// errors; so are another magic and another version.
func TestCorruptionIsAnError(t *testing.T) {
	data := write(t, fixtureStore(), fixtureNow)
	for cut := 0; cut < len(data); cut++ {
		if _, _, err := snapshot.Read(bytes.NewReader(data[:cut]), shards.New(1)); err == nil {
			t.Fatalf("cut at %d of %d bytes: no error", cut, len(data))
		}
	}
	for i := 0; i < len(data); i++ {
		bad := bytes.Clone(data)
		bad[i] ^= 0x10
		if _, _, err := snapshot.Read(bytes.NewReader(bad), shards.New(1)); err == nil {
			t.Fatalf("bit flipped in byte %d of %d: no error", i, len(data))
		}
	}
	if _, _, err := snapshot.Read(bytes.NewReader(append(bytes.Clone(data), 0)), shards.New(1)); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	bad := bytes.Clone(data)
	bad[7] = 9
	if _, _, err := snapshot.Read(bytes.NewReader(bad), shards.New(1)); !errors.Is(err, snapshot.ErrVersion) {
		t.Fatalf("version 9: %v", err)
	}
	if _, _, err := snapshot.Read(bytes.NewReader([]byte("REDIS0011xxxxxxxxxxx")), shards.New(1)); !errors.Is(err, snapshot.ErrFormat) {
		t.Fatalf("an RDB file: %v", err)
	}
}

// FuzzRead: no input panics the reader.
func FuzzRead(f *testing.F) {
	var b bytes.Buffer
	snapshot.Write(&b, fixtureStore(), fixtureNow)
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		snapshot.Read(bytes.NewReader(data), shards.New(2))
	})
}
