package values

import "fmt"

// hashVal is a hash's fields. They are kept in a slice in insertion order,
// with a map from field to position once there are more than a few. While
// Redis would keep the hash as a listpack (at most 512 fields, none and no
// value over 64 bytes) a deletion keeps the order, so HGETALL lists the
// fields as Redis does; past that Redis's order is its hash table's, and a
// deletion here moves the last field into the hole.
type hashVal struct {
	ents    []hent
	idx     map[string]int // field → position in ents; nil while few fields
	ordered bool           // Redis would still hold this hash as a listpack
	size    int64          // the fields' share of the value's Size
}

// hent is one field and its value.
type hent struct {
	field string
	val   strVal
}

const (
	hashIndexAt         = 16  // fields from which lookups use the map
	hashListpackEntries = 512 // Redis's hash-max-listpack-entries
	hashListpackValue   = 64  // Redis's hash-max-listpack-value
	hashEntryOverhead   = 64  // a field's cost beside its bytes, index included
)

func (e *hent) cost() int64 { return int64(len(e.field)) + e.val.size() + hashEntryOverhead }

func (h *hashVal) len() int { return len(h.ents) }

// find returns field's position, -1 if the hash has no such field.
func (h *hashVal) find(field []byte) int {
	if h.idx != nil {
		if i, ok := h.idx[string(field)]; ok {
			return i
		}
		return -1
	}
	for i := range h.ents {
		if h.ents[i].field == string(field) {
			return i
		}
	}
	return -1
}

// noteLength records that Redis would see a field or value of n bytes
// for this hash (HSET turns a listpack into a hash table for its
// arguments' lengths before writing any).
func (h *hashVal) noteLength(n int) {
	if n > hashListpackValue {
		h.ordered = false
	}
}

// set stores a copy of val as field's value and reports whether the field
// is new.
func (h *hashVal) set(field, val []byte) (added bool) {
	h.noteLength(len(field))
	h.noteLength(len(val))
	i, added := h.slot(field)
	h.size -= h.ents[i].cost()
	h.ents[i].val.setBytes(val)
	h.size += h.ents[i].cost()
	return added
}

// setOwned stores val, which the caller gives up, as field's value.
func (h *hashVal) setOwned(field, val []byte) {
	h.noteLength(len(field))
	h.noteLength(len(val))
	i, _ := h.slot(field)
	h.size -= h.ents[i].cost()
	h.ents[i].val.setOwned(val)
	h.size += h.ents[i].cost()
}

// setInt stores n as field's value.
func (h *hashVal) setInt(field []byte, n int64) {
	h.noteLength(len(field))
	i, _ := h.slot(field)
	h.size -= h.ents[i].cost()
	h.ents[i].val.setInt(n)
	h.size += h.ents[i].cost()
}

// slot returns field's position, adding the field (with an empty value)
// if it is new.
func (h *hashVal) slot(field []byte) (int, bool) {
	if i := h.find(field); i >= 0 {
		return i, false
	}
	h.ents = append(h.ents, hent{field: string(field)})
	i := len(h.ents) - 1
	h.size += h.ents[i].cost()
	switch {
	case h.idx != nil:
		h.idx[h.ents[i].field] = i
	case len(h.ents) > hashIndexAt:
		h.idx = make(map[string]int, 2*len(h.ents))
		for j := range h.ents {
			h.idx[h.ents[j].field] = j
		}
	}
	if len(h.ents) > hashListpackEntries {
		h.ordered = false
	}
	return i, true
}

// del removes field and reports whether it was there.
func (h *hashVal) del(field []byte) bool {
	i := h.find(field)
	if i < 0 {
		return false
	}
	h.size -= h.ents[i].cost()
	if h.idx != nil {
		delete(h.idx, h.ents[i].field)
	}
	last := len(h.ents) - 1
	if h.ordered {
		copy(h.ents[i:], h.ents[i+1:])
		if h.idx != nil {
			for j := i; j < last; j++ {
				h.idx[h.ents[j].field] = j
			}
		}
	} else if i != last {
		h.ents[i] = h.ents[last]
		if h.idx != nil {
			h.idx[h.ents[i].field] = i
		}
	}
	h.ents[last] = hent{}
	h.ents = h.ents[:last]
	return true
}

// verify checks the index and the recorded size.
func (h *hashVal) verify() error {
	var size int64
	for i := range h.ents {
		size += h.ents[i].cost()
		if h.idx != nil && h.idx[h.ents[i].field] != i {
			return fmt.Errorf("values: hash field %q at %d, indexed at %d", h.ents[i].field, i, h.idx[h.ents[i].field])
		}
		if h.find([]byte(h.ents[i].field)) != i {
			return fmt.Errorf("values: hash field %q twice", h.ents[i].field)
		}
	}
	if h.idx != nil && len(h.idx) != len(h.ents) {
		return fmt.Errorf("values: hash of %d fields indexes %d", len(h.ents), len(h.idx))
	}
	if size != h.size {
		return fmt.Errorf("values: hash fields size %d, recorded %d", size, h.size)
	}
	return nil
}
