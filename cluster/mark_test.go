package cluster

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
	{"wals and groups", mark{node: "n1", counter: 5, written: 1_700_000_000_123_000_000,
		wals: []uint64{2, 4, 9}, groups: map[uint32]uint64{0: 10, 3: 7}},
		"524c4d4b01026e310580d3f6d7c7bfce972f0302020502000a03073f96bfbb"},
	{"empty", mark{node: "node1", groups: map[uint32]uint64{}}, "524c4d4b01056e6f64653100000000e1a04a8c"},
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

// TestMarkFileRoundTrip: writeMark replaces the file atomically (no
// temporary file is left) and readMark reads it back; no file reads as nil.
func TestMarkFileRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if m, err := readMark(fs, "/d"); m != nil || err != nil {
		t.Fatalf("no file: %v %v", m, err)
	}
	for _, g := range goldenMarks {
		if err := writeMark(fs, "/d", &g.m); err != nil {
			t.Fatal(err)
		}
		m, err := readMark(fs, "/d")
		if err != nil || fmt.Sprintf("%+v", *m) != fmt.Sprintf("%+v", g.m) {
			t.Fatalf("%s: read %+v %v", g.name, m, err)
		}
	}
	names, _ := fs.List("/d")
	if len(names) != 1 || names[0] != markFile {
		t.Fatalf("files left: %v", names)
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
