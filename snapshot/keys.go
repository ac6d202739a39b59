package snapshot

import (
	"encoding/binary"
	"math"

	"github.com/rlserver/rlserver/raftlog"
)

// Keys under the group's prefix (raftlog.NamespaceSnapshot, group id):
//
//	prefix | 0x01 | num (8 bytes BE)                      the metadata record
//	prefix | 0x02 | num (8 bytes BE) | chunk (4 bytes BE) a chunk of data
//
// num is the snapshot's number, unique in the group: the Unix time of its
// Create in milliseconds, made strictly increasing by the Store. It is the
// last part of the snapshot's ID.
const (
	kindMeta  = 0x01
	kindChunk = 0x02
	kindEnd   = 0x03 // past the last kind
)

// keys builds the keys of one group.
type keys struct{ prefix []byte }

func newKeys(group uint32) keys {
	return keys{prefix: raftlog.NamespaceSnapshot.Prefix(group)}
}

func (k keys) kind(kind byte) []byte {
	return append(append(make([]byte, 0, raftlog.PrefixLen+1+8+4), k.prefix...), kind)
}

func (k keys) meta(num uint64) []byte {
	return binary.BigEndian.AppendUint64(k.kind(kindMeta), num)
}

func (k keys) chunk(num uint64, n uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(k.kind(kindChunk), num), n)
}

// metas returns the range of every metadata record.
func (k keys) metas() (lo, hi []byte) { return k.kind(kindMeta), k.kind(kindChunk) }

// allChunks returns the range of every chunk of every snapshot.
func (k keys) allChunks() (lo, hi []byte) { return k.kind(kindChunk), k.kind(kindEnd) }

// chunks returns the range of the chunks of snapshot num.
func (k keys) chunks(num uint64) (lo, hi []byte) {
	lo = binary.BigEndian.AppendUint64(k.kind(kindChunk), num)
	if num == math.MaxUint64 {
		return lo, k.kind(kindEnd)
	}
	return lo, binary.BigEndian.AppendUint64(k.kind(kindChunk), num+1)
}

// num returns the snapshot number in a meta or chunk key, and whether the
// key is long enough to hold one.
func (k keys) num(key []byte) (uint64, bool) {
	at := len(k.prefix) + 1
	if len(key) < at+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[at:]), true
}

// chunkNum returns the chunk number of a chunk key, and whether the key
// has the length of one.
func (k keys) chunkNum(key []byte) (uint32, bool) {
	at := len(k.prefix) + 1 + 8
	if len(key) != at+4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(key[at:]), true
}
