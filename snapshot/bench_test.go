package snapshot

import (
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkWriteRead writes a 16 MiB snapshot to a database on the real
// disk, closes it (the synced commit) and reads it back; the figure is
// the throughput of the round trip.
func BenchmarkWriteRead(b *testing.B) {
	db := openOn(b, vfs.Default, b.TempDir())
	defer mustClose(b, db)
	s := mustStore(b, db, 1, 1)
	d := payload(1, 16<<20)
	piece := 64 << 10 // what a bufio.Writer in front of the sink would hand over
	b.SetBytes(int64(len(d)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k, err := s.Create(1, uint64(i+1), 1, testConfig, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < len(d); off += piece {
			if _, err := k.Write(d[off:min(off+piece, len(d))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := k.Close(); err != nil {
			b.Fatal(err)
		}
		_, rc, err := s.Open(k.ID())
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, rc); err != nil || n != int64(len(d)) {
			b.Fatalf("read %d bytes: %v", n, err)
		}
		rc.Close()
	}
}
