package engine

import (
	"encoding/binary"
	"errors"
	"math"
)

// The binary encoding of a key's state, used by replication and snapshots.
// It is stable: version 1 is
//
//	version byte (1) | algo byte | varint T | varint N | varint P
//	| for log only: uvarint count, then per entry varint At (the first
//	  absolute, the rest as the gap from the previous) and uvarint Cost
//
// Decoding rejects unknown versions and algorithms, truncated input,
// varints not in their shortest form (so that each state has exactly one
// encoding), unsorted or non-positive log entries, entry times beyond int64,
// log costs summing above MaxLimit, and counts larger than the input.
const codecVersion = 1

// ErrCorrupt is returned by DecodeState for input it cannot decode.
var ErrCorrupt = errors.New("engine: corrupt state encoding")

// AppendState appends the encoding of (a, st) to dst and returns the
// extended slice.
func AppendState(dst []byte, a Algo, st *State) []byte {
	dst = append(dst, codecVersion, byte(a))
	dst = binary.AppendVarint(dst, st.T)
	dst = binary.AppendVarint(dst, st.N)
	dst = binary.AppendVarint(dst, st.P)
	if a != Log {
		return dst
	}
	if st.Log == nil {
		return binary.AppendUvarint(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(st.Log.Len()))
	var prev int64
	for i := 0; i < st.Log.Len(); i++ {
		e := st.Log.At(i)
		dst = binary.AppendVarint(dst, e.At-prev)
		dst = binary.AppendUvarint(dst, uint64(e.Cost))
		prev = e.At
	}
	return dst
}

// DecodeState decodes one state from the front of b and returns it with the
// number of bytes read. The returned State does not reference b.
func DecodeState(b []byte) (Algo, State, int, error) {
	var st State
	if len(b) < 2 || b[0] != codecVersion || !Algo(b[1]).Valid() {
		return 0, st, 0, ErrCorrupt
	}
	a := Algo(b[1])
	off := 2
	for _, f := range []*int64{&st.T, &st.N, &st.P} {
		v, n := varint(b[off:])
		if n <= 0 {
			return 0, st, 0, ErrCorrupt
		}
		*f, off = v, off+n
	}
	if a != Log {
		return a, st, off, nil
	}
	count, n := uvarint(b[off:])
	if n <= 0 || count > uint64(len(b)-off-n)/2 {
		return 0, st, 0, ErrCorrupt
	}
	off += n
	if count == 0 {
		return a, st, off, nil
	}
	st.Log = &Ring{}
	var prev int64
	for i := uint64(0); i < count; i++ {
		gap, n1 := varint(b[off:])
		if n1 <= 0 || (i > 0 && (gap <= 0 || prev > math.MaxInt64-gap)) {
			return 0, st, 0, ErrCorrupt
		}
		cost, n2 := uvarint(b[off+n1:])
		if n2 <= 0 || cost == 0 || cost > uint64(MaxLimit-st.Log.Sum()) {
			return 0, st, 0, ErrCorrupt
		}
		off += n1 + n2
		prev += gap
		st.Log.Push(Entry{At: prev, Cost: int64(cost)})
	}
	return a, st, off, nil
}

// varint reads a signed varint in its shortest form from the front of b;
// n <= 0 means it is missing, overlong or not the shortest.
func varint(b []byte) (v int64, n int) {
	v, n = binary.Varint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, 0 // a trailing zero byte: a shorter encoding exists
	}
	return v, n
}

// uvarint is varint for unsigned values.
func uvarint(b []byte) (v uint64, n int) {
	v, n = binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, 0
	}
	return v, n
}
