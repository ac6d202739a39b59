package shards

import (
	"encoding/binary"
	"math/bits"

	"github.com/rlserver/rlserver/engine"
)

// The entries of a sliding window log live in its key's record while the
// log is short, and in an engine.Ring of the table's rings (the log has
// "spilled") while it is long. The log part of a record, after the expiry,
// is one of
//
//	inline:  uvarint count<<1 | entries
//	spilled: uvarint ring<<1 | 1 | uvarint capacity of the ring accounted
//	         in ringBytes
//
// An inline log's first entry is at the time in the record's T field (the
// engine's T, N and P are always 0 for the log, and the record stores no N
// and P; a spilled log's T field is 0), and its entries are
//
//	uvarint cost of the first | if more: byte w | per later entry: a gap
//	word of w bytes LE, gap<<1 | 1 for a cost of 1 or gap<<1 followed by
//	uvarint cost
//
// where the gap is the time in ns since the previous entry and w the
// fewest bytes that hold every gap word of the log. Fixed-width gaps are
// read with one load and no branch per byte; in RL.CHECK's workload they
// take no more room than varints, since a log's gaps are of one order.
//
// A check decodes an inline log into the table's scratch ring, runs the
// engine on it and encodes it back, so that it follows no pointer and does
// not allocate. That costs time linear in the entries (about 7 ns each on
// a warm key), where a ring costs up to three dependent cache misses, so a
// log spills past spillAt entries and comes back inline at unspillAt, half
// as many, so that a key whose log hovers around spillAt does not move
// back and forth.
//
// spillAt is measured, checking 100,000 keys in random order: logs of a
// steady 16 entries are faster inline than in rings, of 24 and 32 slower.
// But on RL.CHECK's workload, where a key's entries vary around a mean,
// spilling at 32 beat 16 and 24 in time and memory at a mean of 10 and of
// 20 entries (keys that once crossed a lower threshold keep their rings),
// and spilling at 48 took 11% more time for 12% less memory at 20.
const (
	spillAt   = 32
	unspillAt = 16
	logAlign  = 8 // see logSize
	// maxInlineSpan bounds the time from a log's first entry to its last,
	// so that a gap shifted left by one fits in a uint64. A log trimmed by
	// a check spans less than engine.MaxWindow; a longer one spills.
	maxInlineSpan = 1 << 62
)

// logSize returns the space a log record of n bytes takes: n rounded up
// to a multiple of logAlign, so that a check that changes the log by an
// entry often leaves the record where it is (in RL.CHECK's workload, 51%
// of checks move it rather than 75%), and fewer free lists of distinct
// lengths hold freed records (130 bytes per 10-entry key rather than 150,
// free space included).
func logSize(n int) int { return (n + logAlign - 1) &^ (logAlign - 1) }

// scratchRing returns the table's scratch ring, emptied. Call it only when
// the ring it returned before is no longer in use: it is the log of the
// entry decoded last.
func (t *table) scratchRing() *engine.Ring {
	if t.scratch == nil {
		t.scratch = new(engine.Ring)
	}
	t.scratch.Reset()
	return t.scratch
}

// fresh returns the state of a new key for algorithm a: for the log, an
// empty log in the scratch ring, so that a new key's check allocates
// nothing.
func (t *table) fresh(a engine.Algo) engine.State {
	if a != engine.Log {
		return engine.State{}
	}
	return engine.State{Log: t.scratchRing()}
}

// inline reports whether a log of n entries, r, belongs inline: at most
// most entries spanning less than maxInlineSpan.
func inline(r *engine.Ring, n, most int) bool {
	if n > most {
		return false
	}
	return n < 2 || uint64(r.Last().At-r.At(0).At) < maxInlineSpan
}

// logLen returns the number of entries of e's log.
func logLen(e *entry) int {
	if e.st.Log == nil {
		return 0
	}
	return e.st.Log.Len()
}

// logTail returns the log part of the record of e, a log entry, in the
// table's tail buffer, valid until the next call. It first moves the log
// inline or out to a ring as its length asks, and takes ownership of
// e.st.Log if it keeps it as a ring.
func (t *table) logTail(e *entry) []byte {
	r, n := e.st.Log, logLen(e)
	switch {
	case e.spilled && inline(r, n, unspillAt):
		t.accountRing(nil, e.ringCap)
		t.freeRing(e.ring)
		e.spilled, e.ring, e.ringCap = false, 0, 0
		if t.scratch == nil && r != nil && r.Cap() <= 2*spillAt {
			t.scratch = r // a spill took the scratch ring: this one replaces it
		}
	case e.spilled:
		t.rings[e.ring] = r
		e.ringCap = t.accountRing(r, e.ringCap)
	case !inline(r, n, spillAt):
		if r == t.scratch {
			t.scratch = nil // the ring is the key's now
		}
		e.spilled, e.ring = true, t.newRing(r)
		e.ringCap = t.accountRing(r, 0)
	}
	b := t.tail[:0]
	if e.spilled {
		b = binary.AppendUvarint(b, uint64(e.ring)<<1|1)
		b = binary.AppendUvarint(b, uint64(e.ringCap))
	} else {
		b = appendEntries(b, r, n)
	}
	t.tail = b
	return b
}

// appendEntries appends the inline form of the n entries of r.
func appendEntries(b []byte, r *engine.Ring, n int) []byte {
	b = binary.AppendUvarint(b, uint64(n)<<1)
	if n == 0 {
		return b
	}
	first := r.At(0)
	b = binary.AppendUvarint(b, uint64(first.Cost))
	if n == 1 {
		return b
	}
	var all uint64 // every gap word ORed: its length is the longest's
	prev := first.At
	for i := 1; i < n; i++ {
		at := r.At(i).At
		all |= uint64(at-prev)<<1 | 1
		prev = at
	}
	w := (bits.Len64(all) + 7) / 8
	b = append(b, byte(w))
	if need := len(b) + (n-1)*(8+binary.MaxVarintLen64); cap(b) < need {
		b = append(make([]byte, 0, 2*need), b...)
	}
	prev = first.At
	for i := 1; i < n; i++ {
		en := r.At(i)
		word := uint64(en.At-prev) << 1
		prev = en.At
		if en.Cost == 1 {
			word |= 1
		}
		binary.LittleEndian.PutUint64(b[len(b):len(b)+8], word)
		b = b[:len(b)+w]
		if en.Cost != 1 {
			b = binary.AppendUvarint(b, uint64(en.Cost))
		}
	}
	return b
}

// gapWord reads a gap word of w bytes from the front of b.
func gapWord(b []byte, w int) uint64 {
	if len(b) >= 8 {
		return binary.LittleEndian.Uint64(b) & (uint64(1)<<(8*w) - 1) // all ones for w = 8
	}
	var x uint64
	for i := w - 1; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x
}

// logBase returns the T field of the record of e, a log entry: the time of
// the first inline entry, or 0.
func logBase(e *entry) int64 {
	if e.spilled || logLen(e) == 0 {
		return 0
	}
	return e.st.Log.At(0).At
}

// decodeLog reads the log part of a record, which starts at rec[pos:],
// into e, whose st.T holds the record's T field, and returns the offset
// after it. An inline log is decoded into the scratch ring.
func (t *table) decodeLog(rec []byte, pos int, e *entry) int {
	at := e.st.T
	e.st.T, e.st.N, e.st.P = 0, 0, 0
	h, n := uvarint(rec[pos:])
	pos += n
	if h&1 != 0 {
		c, n := uvarint(rec[pos:])
		e.spilled, e.ring, e.ringCap = true, uint32(h>>1), int32(c)
		e.st.Log = t.rings[e.ring]
		return pos + n
	}
	e.spilled, e.ring, e.ringCap = false, 0, 0
	es := t.entries[:0]
	if count := int(h >> 1); count > 0 {
		cost, n := uvarint(rec[pos:])
		pos += n
		es = append(es, engine.Entry{At: at, Cost: int64(cost)})
		w := 0
		if count > 1 {
			w = int(rec[pos])
			pos++
		}
		for k := 1; k < count; k++ {
			word := gapWord(rec[pos:], w)
			pos += w
			at += int64(word >> 1)
			cost = 1
			if word&1 == 0 {
				cost, n = uvarint(rec[pos:])
				pos += n
			}
			es = append(es, engine.Entry{At: at, Cost: int64(cost)})
		}
	}
	t.entries = es
	e.st.Log = t.scratchRing()
	e.st.Log.Load(es)
	return pos
}

// logPartLen returns the length of the log part at the front of b.
func logPartLen(b []byte) int {
	h, pos := uvarint(b)
	if h&1 != 0 {
		_, n := uvarint(b[pos:])
		return pos + n
	}
	count := int(h >> 1)
	if count == 0 {
		return pos
	}
	_, n := uvarint(b[pos:])
	pos += n
	if count == 1 {
		return pos
	}
	w := int(b[pos])
	pos++
	for k := 1; k < count; k++ {
		one := b[pos]&1 != 0
		pos += w
		if !one {
			_, n = uvarint(b[pos:])
			pos += n
		}
	}
	return pos
}

// logPart returns the offset of the log part of rec, a log record.
func logPart(rec []byte) int {
	_, pos := recKey(rec)
	_, n := varint(rec[pos+9:])
	return pos + 9 + n
}

// spilledRing returns the ring index and accounted capacity of a log
// record whose log has spilled, and false for other records.
func spilledRing(rec []byte) (uint32, int32, bool) {
	_, pos := recKey(rec)
	if engine.Algo(rec[pos]&^dirtyBit) != engine.Log {
		return 0, 0, false
	}
	pos = logPart(rec)
	h, n := uvarint(rec[pos:])
	if h&1 == 0 {
		return 0, 0, false
	}
	c, _ := uvarint(rec[pos+n:])
	return uint32(h >> 1), int32(c), true
}
