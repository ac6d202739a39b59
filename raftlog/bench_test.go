package raftlog

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	raftbench "github.com/hashicorp/raft/bench"
)

// benchStore returns a Store on a database on the real disk, where syncs
// cost what they cost.
func benchStore(b *testing.B) *Store {
	b.Helper()
	db := openOn(b, vfs.Default, b.TempDir())
	b.Cleanup(func() { mustClose(b, db) })
	return mustNew(b, db, 1)
}

// raft's shared LogStore and StableStore benchmarks, as raft-boltdb runs them.
func BenchmarkFirstIndex(b *testing.B) { raftbench.FirstIndex(b, benchStore(b)) }
func BenchmarkLastIndex(b *testing.B)  { raftbench.LastIndex(b, benchStore(b)) }
func BenchmarkGetLog(b *testing.B)     { raftbench.GetLog(b, benchStore(b)) }
func BenchmarkStoreLog(b *testing.B)   { raftbench.StoreLog(b, benchStore(b)) }
func BenchmarkStoreLogs(b *testing.B)  { raftbench.StoreLogs(b, benchStore(b)) }
func BenchmarkDeleteRange(b *testing.B) {
	raftbench.DeleteRange(b, benchStore(b))
}
func BenchmarkSet(b *testing.B)       { raftbench.Set(b, benchStore(b)) }
func BenchmarkGet(b *testing.B)       { raftbench.Get(b, benchStore(b)) }
func BenchmarkSetUint64(b *testing.B) { raftbench.SetUint64(b, benchStore(b)) }
func BenchmarkGetUint64(b *testing.B) { raftbench.GetUint64(b, benchStore(b)) }

// BenchmarkStoreLogGroups appends one entry at a time to several groups of
// one database at once: their synced commits share the WAL's fsyncs, so
// the time per append falls as groups are added (compare with
// BenchmarkStoreLog).
func BenchmarkStoreLogGroups(b *testing.B) {
	db := openOn(b, vfs.Default, b.TempDir())
	defer mustClose(b, db)
	var next atomic.Uint32
	data := make([]byte, 100)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s, err := New(db, next.Add(1))
		if err != nil {
			b.Error(err)
			return
		}
		for i := uint64(1); pb.Next(); i++ {
			if err := s.StoreLog(&raft.Log{Index: i, Term: 1, Data: data}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkStoreLogGuarded is BenchmarkStoreLog with the disk guard
// asked before each append (a statfs each time): what the guard costs
// a synced write.
func BenchmarkStoreLogGuarded(b *testing.B) {
	st := benchStore(b)
	space, err := OpenSpace(b.TempDir(), SpaceOptions{MinFree: 1 << 20, Poll: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer space.Close()
	st.SetGuard(space)
	raftbench.StoreLog(b, st)
}
