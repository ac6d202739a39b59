package raftlog

import (
	"bytes"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPacedFS: writes to table and blob files pause once every PaceBytes
// and reach the file unchanged; other files (the WAL) never pause.
func TestPacedFS(t *testing.T) {
	pauses := 0
	fs := pacedFS{FS: vfs.NewMem(), pause: func() { pauses++ }}
	data := bytes.Repeat([]byte("0123456789abcdef"), PaceBytes/16*5/2) // 2.5 × PaceBytes
	for _, c := range []struct {
		name   string
		pauses int
	}{{"000001.sst", 2}, {"000002.blob", 2}, {"000003.log", 0}, {"MANIFEST-000004", 0}} {
		pauses = 0
		f, err := fs.Create(c.name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		for p := data; len(p) > 0; p = p[min(len(p), 4096):] {
			// A copy: in race builds Pebble's MemFS mangles what it was given.
			if _, err := f.Write(bytes.Clone(p[:min(len(p), 4096)])); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if pauses != c.pauses {
			t.Errorf("%s: %d pauses for %d bytes, want %d", c.name, pauses, len(data), c.pauses)
		}
		r, err := fs.Open(c.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: read back %d bytes (%v), want the %d written", c.name, len(got), err, len(data))
		}
	}
}
