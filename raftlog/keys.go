package raftlog

import (
	"encoding/binary"
	"math"
)

// Namespace is the first byte of every key in a node's Pebble database: it
// names the store that owns the key. The group id follows it (4 bytes,
// big-endian), then the store's own key. DESIGN.md has the table; a new
// store takes a new namespace here, so that no two stores ever share keys.
type Namespace byte

// The namespaces of a node's database.
const (
	// NamespaceLog holds the Raft log: the key ends with the entry's
	// index (8 bytes, big-endian), so keys sort by index.
	NamespaceLog Namespace = 0x01
	// NamespaceStable holds the stable store: the key ends with raft's
	// key (such as "CurrentTerm").
	NamespaceStable Namespace = 0x02
	// NamespaceSnapshot holds package snapshot's store.
	NamespaceSnapshot Namespace = 0x03
	// NamespaceNode is reserved for the node's own metadata.
	NamespaceNode Namespace = 0x04
)

// PrefixLen is the length of the prefix that begins every key: the
// namespace byte and the group id.
const PrefixLen = 5

// logKeyLen is the length of a log key: the prefix and the index.
const logKeyLen = PrefixLen + 8

// Prefix returns a new slice holding the PrefixLen bytes that begin every
// key of namespace ns and group. The caller owns it and may append to it.
func (ns Namespace) Prefix(group uint32) []byte {
	b := make([]byte, 1, PrefixLen+16)
	b[0] = byte(ns)
	return binary.BigEndian.AppendUint32(b, group)
}

// Bounds returns the range of every key of namespace ns and group: lower
// is inclusive (the prefix), upper exclusive. Both are new slices owned by
// the caller; they suit pebble.IterOptions and DeleteRange.
func (ns Namespace) Bounds(group uint32) (lower, upper []byte) {
	lower = ns.Prefix(group)
	if group == math.MaxUint32 {
		return lower, []byte{byte(ns) + 1}
	}
	return lower, ns.Prefix(group + 1)
}

// appendLogKey appends the log key of index to prefix, a log prefix.
func appendLogKey(prefix []byte, index uint64) []byte {
	return binary.BigEndian.AppendUint64(prefix, index)
}

// LogKey returns a new slice holding the key of the log entry at index of
// group, for a caller that deletes a group's entries in its own batch.
func LogKey(group uint32, index uint64) []byte {
	return appendLogKey(NamespaceLog.Prefix(group), index)
}
