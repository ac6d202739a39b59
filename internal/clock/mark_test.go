package clock

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestResume: a table of marks left by an earlier run and what the clock
// resumes at (from the mark's decision time), given the boot and the wall
// clock now.
func TestResume(t *testing.T) {
	const h, d = time.Hour, 24 * time.Hour
	boot := func(id string, up time.Duration) Boot { return Boot{ID: id, Uptime: int64(up)} }
	for _, tc := range []struct {
		name     string
		offset   time.Duration // the mark's decision time less its wall clock
		markBoot Boot
		nowBoot  Boot
		wall     time.Duration // the wall clock now, from the mark's
		want     time.Duration // the decision time resumed at, from the mark's
	}{
		{"same boot, 10 s down, no step: the wall clock", 0, boot("a", h), boot("a", h+10*time.Second), 10 * time.Second, 10 * time.Second},
		{"same boot, the wall clock jumped a day while down: 1% of the 10 s", 0, boot("a", h), boot("a", h+10*time.Second), d + 10*time.Second, 10*time.Second + 100*time.Millisecond},
		{"same boot, the wall clock stepped back an hour while down", 0, boot("a", h), boot("a", h+10*time.Second), -h + 10*time.Second, 10*time.Second - 100*time.Millisecond},
		{"same boot, an hour's offset, 1000 s down", h, boot("a", h), boot("a", h+1000*time.Second), 1000 * time.Second, 1000*time.Second - 10*time.Second},
		{"same boot, suspended a day (the boot clock counts it)", 0, boot("a", h), boot("a", h+d), d, d},
		{"another boot, the wall clock as it is", 0, boot("a", h), boot("b", time.Minute), d, d},
		{"another boot, the mark's offset kept", 30 * time.Minute, boot("a", h), boot("b", time.Minute), 5 * time.Minute, 5 * time.Minute},
		{"another boot, the wall clock back: never before the mark", 0, boot("a", h), boot("b", time.Minute), -h, 0},
		{"boot unknown: as another boot", 0, boot("", h), boot("", h+time.Second), 5 * time.Minute, 5 * time.Minute},
		{"same id, boot clock behind the mark's: as another boot", 0, boot("a", h), boot("a", time.Minute), 5 * time.Minute, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Mark{Decided: t0 + int64(tc.offset), Wall: t0, Boot: tc.markBoot}
			f := newFake(t0 + int64(tc.wall))
			c := New(f)
			if got := time.Duration(c.Resume(m, tc.nowBoot) - m.Decided); got != tc.want {
				t.Fatalf("resumed at mark%+v, want mark%+v", got, tc.want)
			}
			if got := time.Duration(c.Now() - m.Decided); got != tc.want {
				t.Fatalf("Now() after Resume: mark%+v, want mark%+v", got, tc.want)
			}
			f.pass(time.Second) // it runs on from there
			if got := time.Duration(c.Now() - m.Decided); got < tc.want+990*time.Millisecond || got > tc.want+1010*time.Millisecond {
				t.Fatalf("a second later: mark%+v, want mark%+v plus about 1s", got, tc.want)
			}
		})
	}
}

// goldenMark is the mark of testdata/mark-v1.json.
var goldenMark = Mark{Decided: 1772370000123456789, Wall: 1772366400123456789,
	Boot: Boot{ID: "6f1c9a2e-3b7d-4c55-9e0a-1d2f3a4b5c6d", Uptime: 86400000000000}}

// TestMarkFormat: the version 1 file decodes to goldenMark, and
// goldenMark encodes to it byte for byte (regenerate with
// RL_UPDATE_GOLDEN=1 only when adding a version).
func TestMarkFormat(t *testing.T) {
	path := filepath.Join("testdata", "mark-v1.json")
	if os.Getenv("RL_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, Encode(goldenMark), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := Decode(b); err != nil || m != goldenMark {
		t.Fatalf("Decode(%s) = %+v, %v; want %+v", path, m, err, goldenMark)
	}
	if e := Encode(goldenMark); !bytes.Equal(e, b) {
		t.Fatalf("Encode = %s, want %s", e, b)
	}
	for _, bad := range []string{"", "{", "[]", `{"version":2,"decided_ns":1}`, `{"decided_ns":1}`, `{"version":"1"}`} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrBadMark) {
			t.Errorf("Decode(%q): %v, want ErrBadMark", bad, err)
		}
	}
}

// TestSaveLoad: Load finds no mark in a new directory, then what Save
// wrote; a garbled file is ErrBadMark and names the file.
func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rlserver.clock.json")
	if _, ok, err := Load(path); ok || err != nil {
		t.Fatalf("Load of no file: ok %v, err %v", ok, err)
	}
	if err := Save(path, goldenMark); err != nil {
		t.Fatal(err)
	}
	if m, ok, err := Load(path); !ok || err != nil || m != goldenMark {
		t.Fatalf("Load: %+v %v %v", m, ok, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("the temporary file is left: %v", err)
	}
	os.WriteFile(path, []byte("garbage"), 0o644)
	if _, _, err := Load(path); !errors.Is(err, ErrBadMark) || !bytes.Contains([]byte(err.Error()), []byte(path)) {
		t.Fatalf("Load of a garbled file: %v", err)
	}
}

// TestMarkTakesTheReading: Mark is the clock's decision time and wall
// clock, with the boot given.
func TestMarkTakesTheReading(t *testing.T) {
	f := newFake(t0)
	c := New(f)
	f.step(-time.Hour)
	b := Boot{ID: "x", Uptime: 5}
	if m := c.Mark(b); m.Decided != t0 || m.Wall != t0-int64(time.Hour) || m.Boot != b || m.Offset() != int64(time.Hour) {
		t.Fatalf("Mark = %+v", m)
	}
}
