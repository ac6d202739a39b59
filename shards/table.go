package shards

import (
	"encoding/binary"
	"fmt"

	"github.com/rlserver/rlserver/engine"
)

// table is the key state of one shard, laid out for memory: about 12 bytes
// of index and a record of the key's name plus 20 to 30 bytes of state per
// key (a log key about 5 more per entry), where a map of pointers to
// structs would take about 100.
//
// The index is an open-addressing hash table of uint64 slots, each the
// key's 32-bit hash tag (high half, never 0) and the reference of its
// record (low half); 0 is an empty slot. It uses Robin Hood linear probing,
// so that lookups of absent keys stop early, and backward-shift deletion,
// so that there are no tombstones; it grows by half when 7/8 full and
// shrinks when under 1/4 full.
//
// Records live in 4 KiB pages of an arena that holds no pointers, so the
// garbage collector never scans it. A record is
//
//	uvarint key length | key | algo | T (8 bytes LE) | varint expires-T
//	| varint N | varint P
//
// where the algo byte's high bit (dirtyBit) says that the key has changed
// since the journal last collected it (see journal.go),
// except that a log's record holds its log part (see inline.go) in place
// of N and P: its entries while it is short, else the index of its ring.
//
// Freed records go to free lists by exact length (a log record's length is
// rounded up to a multiple of logAlign), linked through their first four
// bytes; when the free space exceeds half of the pages the arena is
// compacted. Records longer than bigRecord get a page of their own. The
// rings of long logs are Go pointers and live in rings, referenced by
// index; short logs are decoded into the scratch ring for a check.
//
// A table is not safe for concurrent use; its shard's mutex guards it.
type table struct {
	slots  []uint64
	n      int // keys
	cursor int // where the next sweep starts

	pages     [][]byte
	cur       uint32            // page being filled
	room      int               // bytes left in page cur; 0 with no page
	pageBytes int64             // bytes of all pages
	free      map[uint32]uint32 // record length → head of its free list
	freeBytes int64
	freePages []uint32 // indexes of released big-record pages

	rings     []*engine.Ring
	freeRings []uint32
	ringBytes int64

	scratch *engine.Ring   // the inline log decoded last; see inline.go
	entries []engine.Entry // decodeLog's buffer
	tail    []byte         // the log part of the record being written
}

const (
	pageBits  = 12
	pageSize  = 1 << pageBits
	maxPages  = 1 << (32 - pageBits)
	bigRecord = pageSize / 4
	nilRef    = ^uint32(0)
	slotBytes = 8
	// ringOverhead is the Ring struct and its rings slot, beyond its buffer.
	ringOverhead = 56
	entryBytes   = 16 // an engine.Entry in a ring
)

// tagOf returns the index tag of a key hash: its high half, never 0. The
// low bits choose the shard.
func tagOf(h uint64) uint32 { return uint32(h>>32) | 1 }

// home returns the preferred slot of tag in a table of n slots.
func home(tag uint32, n int) int { return int(uint64(tag) * uint64(n) >> 32) }

// record returns the bytes from ref to the end of its page.
func (t *table) record(ref uint32) []byte {
	return t.pages[ref>>pageBits][ref&(pageSize-1):]
}

// recKey returns the key of a record and the offset after it.
func recKey(rec []byte) ([]byte, int) {
	klen, n := uvarint(rec)
	end := n + int(klen)
	return rec[n:end], end
}

// uvarint is binary.Uvarint with the one-byte case inlined.
func uvarint(b []byte) (uint64, int) {
	if b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return binary.Uvarint(b)
}

// varint is binary.Varint with the one-byte case inlined.
func varint(b []byte) (int64, int) {
	if b[0] < 0x80 {
		return int64(b[0]>>1) ^ -int64(b[0]&1), 1
	}
	return binary.Varint(b)
}

// find returns the slot holding key, or -1.
func (t *table) find(key []byte, tag uint32) int {
	n := len(t.slots)
	if n == 0 {
		return -1
	}
	i := home(tag, n)
	for d := 0; ; d++ {
		s := t.slots[i]
		if s == 0 {
			return -1
		}
		stag := uint32(s >> 32)
		if stag == tag {
			if k, _ := recKey(t.record(uint32(s))); string(k) == string(key) {
				return i
			}
		}
		if t.dist(i, stag) < d {
			return -1
		}
		if i++; i == n {
			i = 0
		}
	}
}

// dist returns how far slot i is from the home of tag.
func (t *table) dist(i int, tag uint32) int {
	h := home(tag, len(t.slots))
	if i >= h {
		return i - h
	}
	return i + len(t.slots) - h
}

// decode reads the record at slot i into e and returns the record's length
// (also in e.size). An inline log is decoded into the scratch ring, which
// the next decode reuses.
func (t *table) decode(i int, e *entry) int {
	rec := t.record(uint32(t.slots[i]))
	_, pos := recKey(rec)
	e.algo, e.dirty = engine.Algo(rec[pos]&^dirtyBit), rec[pos]&dirtyBit != 0
	e.st.T = int64(binary.LittleEndian.Uint64(rec[pos+1:]))
	pos += 9
	dexp, n1 := varint(rec[pos:])
	pos += n1
	e.expires = e.st.T + dexp
	if e.algo == engine.Log {
		pos = logSize(t.decodeLog(rec, pos, e))
	} else {
		n, n2 := varint(rec[pos:])
		pos += n2
		p, n3 := varint(rec[pos:])
		pos += n3
		e.st.N, e.st.P = n, p
		e.st.Log, e.spilled, e.ring, e.ringCap = nil, false, 0, 0
	}
	e.slot, e.size = i, pos
	return pos
}

// expiresAt returns the expiry of the record of slot i.
func (t *table) expiresAt(i int) int64 {
	rec := t.record(uint32(t.slots[i]))
	_, pos := recKey(rec)
	at := int64(binary.LittleEndian.Uint64(rec[pos+1:]))
	dexp, _ := varint(rec[pos+9:])
	return at + dexp
}

// encodedLen returns the length of the record of a key of keyLen bytes
// holding e, with tail, the log part from logTail, for the log.
func encodedLen(keyLen int, e *entry, tail []byte) int {
	n := uvarintLen(uint64(keyLen)) + keyLen + 9 + varintLen(e.expires-recordT(e))
	if e.algo == engine.Log {
		return logSize(n + len(tail))
	}
	return n + varintLen(e.st.N) + varintLen(e.st.P)
}

// encode writes the record of key and e, with tail for the log, into dst,
// which has exactly encodedLen bytes.
func encode(dst, key []byte, e *entry, tail []byte) {
	pos := binary.PutUvarint(dst, uint64(len(key)))
	pos += copy(dst[pos:], key)
	dst[pos] = byte(e.algo)
	if e.dirty {
		dst[pos] |= dirtyBit
	}
	at := recordT(e)
	binary.LittleEndian.PutUint64(dst[pos+1:], uint64(at))
	pos += 9
	pos += binary.PutVarint(dst[pos:], e.expires-at)
	if e.algo == engine.Log {
		copy(dst[pos:], tail)
		return
	}
	pos += binary.PutVarint(dst[pos:], e.st.N)
	binary.PutVarint(dst[pos:], e.st.P)
}

// recordT returns the T field of the record of e.
func recordT(e *entry) int64 {
	if e.algo == engine.Log {
		return logBase(e)
	}
	return e.st.T
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

// add stores a new key, which must not be present, holding e (whose ring
// fields it sets, for the log, taking e.st.Log if it keeps it as a ring).
func (t *table) add(key []byte, tag uint32, e *entry) {
	var tail []byte
	if e.algo == engine.Log {
		e.spilled, e.ring, e.ringCap = false, 0, 0
		tail = t.logTail(e)
	}
	size := encodedLen(len(key), e, tail)
	ref := t.alloc(size)
	encode(t.record(ref)[:size], key, e, tail)
	if (t.n+1)*8 > len(t.slots)*7 {
		t.resize(max(8, len(t.slots)*3/2))
	}
	t.place(uint64(tag)<<32 | uint64(ref))
	t.n++
}

// place inserts slot value s by Robin Hood probing: it takes the place of
// the first entry that is closer to its home than s is to its own.
func (t *table) place(s uint64) {
	n := len(t.slots)
	i := home(uint32(s>>32), n)
	for d := 0; ; d++ {
		cur := t.slots[i]
		if cur == 0 {
			t.slots[i] = s
			return
		}
		if cd := t.dist(i, uint32(cur>>32)); cd < d {
			t.slots[i], s = s, cur
			d = cd
		}
		if i++; i == n {
			i = 0
		}
	}
}

// resize rebuilds the index with size slots.
func (t *table) resize(size int) {
	old := t.slots
	t.slots = make([]uint64, size)
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
}

// rewrite stores e, changed by a check, back into the record of slot i.
// For the log it takes e.st.Log if it keeps it as a ring.
func (t *table) rewrite(i int, key []byte, e *entry) {
	ref := uint32(t.slots[i])
	var tail []byte
	if e.algo == engine.Log {
		tail = t.logTail(e)
	}
	oldLen := e.size
	size := encodedLen(len(key), e, tail)
	e.size = size
	if size == oldLen {
		encode(t.record(ref)[:size], key, e, tail)
		return
	}
	nref := t.alloc(size)
	encode(t.record(nref)[:size], key, e, tail)
	t.slots[i] = t.slots[i]&^(1<<32-1) | uint64(nref)
	t.release(ref, oldLen)
	t.maybeCompact()
}

// remove deletes the key of slot i.
func (t *table) remove(i int) {
	ref := uint32(t.slots[i])
	rec := t.record(ref)
	if ring, c, ok := spilledRing(rec); ok {
		t.accountRing(nil, c)
		t.freeRing(ring)
	}
	t.release(ref, recordLen(rec))
	n := len(t.slots)
	for {
		j := i + 1
		if j == n {
			j = 0
		}
		s := t.slots[j]
		if s == 0 || t.dist(j, uint32(s>>32)) == 0 {
			t.slots[i] = 0
			break
		}
		t.slots[i] = s
		i = j
	}
	t.n--
	switch {
	case t.n == 0:
		*t = table{scratch: t.scratch, entries: t.entries, tail: t.tail}
	case len(t.slots) > 8 && t.n*4 < len(t.slots):
		t.resize(max(8, t.n*2))
	}
	t.maybeCompact()
}

// alloc returns the reference of size free bytes.
func (t *table) alloc(size int) uint32 {
	if size > bigRecord {
		return t.newPage(size) << pageBits
	}
	if len(t.free) > 0 {
		if head, ok := t.free[uint32(size)]; ok {
			next := binary.LittleEndian.Uint32(t.record(head))
			if next == nilRef {
				delete(t.free, uint32(size))
			} else {
				t.free[uint32(size)] = next
			}
			t.freeBytes -= int64(size)
			return head
		}
	}
	if size > t.room {
		t.cur, t.room = t.newPage(pageSize), pageSize
	}
	ref := t.cur<<pageBits | uint32(pageSize-t.room)
	t.room -= size
	return ref
}

func (t *table) newPage(size int) uint32 {
	t.pageBytes += int64(size)
	if n := len(t.freePages); n > 0 && size > bigRecord {
		p := t.freePages[n-1]
		t.freePages = t.freePages[:n-1]
		t.pages[p] = make([]byte, size)
		return p
	}
	if len(t.pages) == maxPages {
		panic(fmt.Sprintf("shards: one shard holds more than %d bytes of keys; use more shards", int64(maxPages)*pageSize))
	}
	t.pages = append(t.pages, make([]byte, size))
	return uint32(len(t.pages) - 1)
}

// release frees the size bytes at ref.
func (t *table) release(ref uint32, size int) {
	if size > bigRecord {
		p := ref >> pageBits
		t.pageBytes -= int64(len(t.pages[p]))
		t.pages[p] = nil
		t.freePages = append(t.freePages, p)
		return
	}
	if t.free == nil {
		t.free = make(map[uint32]uint32)
	}
	next, ok := t.free[uint32(size)]
	if !ok {
		next = nilRef
	}
	binary.LittleEndian.PutUint32(t.record(ref), next)
	t.free[uint32(size)] = ref
	t.freeBytes += int64(size)
}

// maybeCompact copies every record into fresh pages, dropping the free
// space, once half of the pages is free, so that its cost is amortised
// over the frees that made it necessary. Call it only when every slot
// references its record.
func (t *table) maybeCompact() {
	if t.freeBytes <= 4*pageSize || t.freeBytes*2 <= t.pageBytes {
		return
	}
	t.compact()
}

// compact copies every record into fresh pages, dropping the free space.
// Call it only when every slot references its record.
func (t *table) compact() {
	old := t.pages
	*t = table{slots: t.slots, n: t.n, cursor: t.cursor, rings: t.rings,
		freeRings: t.freeRings, ringBytes: t.ringBytes,
		scratch: t.scratch, entries: t.entries, tail: t.tail}
	for i, s := range t.slots {
		if s == 0 {
			continue
		}
		ref := uint32(s)
		rec := old[ref>>pageBits][ref&(pageSize-1):]
		size := recordLen(rec)
		nref := t.alloc(size)
		copy(t.record(nref), rec[:size])
		t.slots[i] = s&^(1<<32-1) | uint64(nref)
	}
}

// recordLen returns the length of the record rec starts with.
func recordLen(rec []byte) int {
	_, pos := recKey(rec)
	algo := engine.Algo(rec[pos] &^ dirtyBit)
	pos += 9
	_, n := varint(rec[pos:])
	pos += n
	if algo == engine.Log {
		return logSize(pos + logPartLen(rec[pos:]))
	}
	for k := 0; k < 2; k++ {
		_, n := varint(rec[pos:])
		pos += n
	}
	return pos
}

// newRing stores r and returns its index.
func (t *table) newRing(r *engine.Ring) uint32 {
	t.ringBytes += ringOverhead
	if n := len(t.freeRings); n > 0 {
		i := t.freeRings[n-1]
		t.freeRings = t.freeRings[:n-1]
		t.rings[i] = r
		return i
	}
	t.rings = append(t.rings, r)
	return uint32(len(t.rings) - 1)
}

// accountRing moves the ring memory accounted from a buffer of capacity
// was entries to r's, and returns r's capacity (0 for nil).
func (t *table) accountRing(r *engine.Ring, was int32) int32 {
	c := int32(0)
	if r != nil {
		c = int32(r.Cap())
	}
	t.ringBytes += int64(c-was) * entryBytes
	return c
}

func (t *table) freeRing(i uint32) {
	t.rings[i] = nil
	t.ringBytes -= ringOverhead
	t.freeRings = append(t.freeRings, i)
}

// memory returns the bytes the table holds: index, pages and rings.
func (t *table) memory() int64 {
	return int64(len(t.slots))*slotBytes + t.pageBytes + t.ringBytes
}
