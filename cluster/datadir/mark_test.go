package datadir

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Version 1 fixtures of the mark file, encoded by hand (with an
// independent uvarint, zig-zag varint and CRC-32C) from the format in
// mark.go. They must keep decoding to the same marks after any change.
var goldenMarks = []struct {
	name string
	m    mark
	hex  string
}{
	{"wals and groups", mark{seq: 7, node: "n1", counter: 5, written: 1_700_000_000_123_000_000,
		wals: []uint64{2, 4, 9}, groups: map[uint32]uint64{0: 10, 3: 7}},
		"524c4d4b0107026e310580d3f6d7c7bfce972f0302020502000a0307eb97b0de"},
	{"empty", mark{seq: 1, node: "node1", groups: map[uint32]uint64{}}, "524c4d4b0101056e6f646531000000002356d5a7"},
}

func TestGoldenMarks(t *testing.T) {
	for _, g := range goldenMarks {
		want, _ := hex.DecodeString(g.hex)
		if got := appendMark(nil, &g.m); !bytes.Equal(got, want) {
			t.Errorf("%s: appendMark = %x, want %s", g.name, got, g.hex)
		}
		m, err := decodeMark(want)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if got, want := fmt.Sprintf("%+v", *m), fmt.Sprintf("%+v", g.m); got != want {
			t.Errorf("%s: decoded %s, want %s", g.name, got, want)
		}
	}
}

// TestDecodeMarkRejectsDamage: every flipped bit and every cut of a mark
// is errBadMark, never a panic or a mark that says something else.
func TestDecodeMarkRejectsDamage(t *testing.T) {
	good, _ := hex.DecodeString(goldenMarks[0].hex)
	for i := 0; i < len(good)*8; i++ {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		if _, err := decodeMark(b); !errors.Is(err, errBadMark) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	for n := 0; n < len(good); n++ {
		if _, err := decodeMark(good[:n]); !errors.Is(err, errBadMark) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
}

// TestMarkFileWrites: the writer makes the file (two slots, the first
// holding the mark), then overwrites the slots in turn; readMark returns
// the newest; a record that outgrows its slot makes a larger file; no
// temporary file is left; no file reads as nil.
func TestMarkFileWrites(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if m, err := readMark(fs, "/d"); m != nil || err != nil {
		t.Fatalf("no file: %v %v", m, err)
	}
	w := newMarkWriter(fs, "/d", nil, 0, 0)
	for i := 1; i <= 5; i++ {
		m := mark{node: "n1", counter: uint64(i), groups: map[uint32]uint64{1: uint64(10 * i)}}
		if i == 4 { // outgrows the first file's 4 KiB slots
			for g := uint32(2); g < 1000; g++ {
				m.groups[g] = uint64(g) << 40
			}
		}
		if err := w.write(&m); err != nil {
			t.Fatal(err)
		}
		got, slot, size, err := readMarkSlots(fs, "/d")
		if err != nil || got.seq != uint64(i) || got.counter != uint64(i) || len(got.groups) != len(m.groups) {
			t.Fatalf("write %d: read %+v %v", i, got, err)
		}
		wantSlot, grown := (i-1)%2, size > minMarkSlot
		if i >= 4 {
			wantSlot = (i - 4) % 2
		}
		if slot != wantSlot || grown != (i >= 4) {
			t.Fatalf("write %d: slot %d of %d bytes, want slot %d, larger than %d bytes: %v", i, slot, size, wantSlot, minMarkSlot, i >= 4)
		}
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.List("/d")
	if len(names) != 1 || names[0] != MarkFile {
		t.Fatalf("files left: %v", names)
	}
}

// TestMarkTornWrite: a write torn by a crash (its slot garbled) leaves the
// previous mark; both slots garbled is errBadMark; a writer that starts on
// the file goes on in the other slot.
func TestMarkTornWrite(t *testing.T) {
	fs := vfs.NewMem()
	fs.MkdirAll("/d", 0o755)
	w := newMarkWriter(fs, "/d", nil, 0, 0)
	for i := 1; i <= 2; i++ {
		if err := w.write(&mark{node: "n1", counter: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	w.close()
	garble := func(off int64) {
		f, err := fs.OpenReadWrite("/d/"+MarkFile, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte{0xff, 0xee}, off)
		f.Close()
	}
	garble(minMarkSlot + 10) // the second write, in slot 1
	m, slot, size, err := readMarkSlots(fs, "/d")
	if err != nil || m.counter != 1 || slot != 0 {
		t.Fatalf("after a torn second write: %+v slot %d %v, want the first", m, slot, err)
	}
	w = newMarkWriter(fs, "/d", m, slot, size)
	if err := w.write(&mark{node: "n1", counter: 3}); err != nil {
		t.Fatal(err)
	}
	w.close()
	if m, slot, _, err := readMarkSlots(fs, "/d"); err != nil || m.counter != 3 || slot != 1 {
		t.Fatalf("the next write: %+v slot %d %v", m, slot, err)
	}
	garble(10)
	garble(minMarkSlot + 10)
	if _, err := readMark(fs, "/d"); !errors.Is(err, errBadMark) {
		t.Fatalf("both slots garbled: %v", err)
	}
}

func FuzzDecodeMark(f *testing.F) {
	for _, g := range goldenMarks {
		b, _ := hex.DecodeString(g.hex)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMark(b)
		if err != nil {
			if !errors.Is(err, errBadMark) {
				t.Fatalf("error %v is not errBadMark", err)
			}
			return
		}
		again, err := decodeMark(appendMark(nil, m))
		if err != nil || fmt.Sprintf("%+v", *again) != fmt.Sprintf("%+v", *m) {
			t.Fatalf("decoded %+v, re-encoded and decoded %+v %v", m, again, err)
		}
	})
}
