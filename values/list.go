package values

import "fmt"

// deque is a list's elements in a ring buffer whose capacity is a power of
// two: pushes and pops at both ends in O(1), indexing in O(1). Elements
// are never changed once stored (replies may share them).
type deque struct {
	buf  [][]byte
	head int // index in buf of the first element
	n    int
	size int64 // the elements' share of the value's Size
}

// listElemOverhead is what a list element costs beside its bytes.
const listElemOverhead = 24

func elemSize(b []byte) int64 { return int64(len(b)) + listElemOverhead }

func (d *deque) len() int { return d.n }

// at returns the i-th element, 0 <= i < n.
func (d *deque) at(i int) []byte {
	b := d.buf[(d.head+i)&(len(d.buf)-1)]
	return b[:len(b):len(b)]
}

// grow makes room for one more element.
func (d *deque) grow() {
	if d.n < len(d.buf) {
		return
	}
	c := 2 * len(d.buf)
	if c == 0 {
		c = 4
	}
	d.resize(c)
}

// resize moves the elements to a buffer of capacity c (a power of two, at
// least n).
func (d *deque) resize(c int) {
	nb := make([][]byte, c)
	for i := 0; i < d.n; i++ {
		nb[i] = d.buf[(d.head+i)&(len(d.buf)-1)]
	}
	d.buf, d.head = nb, 0
}

// shrink gives back a buffer much larger than the elements.
func (d *deque) shrink() {
	if len(d.buf) > 16 && d.n < len(d.buf)/4 {
		d.resize(len(d.buf) / 2)
	}
}

// pushFront inserts a copy of b before the first element.
func (d *deque) pushFront(b []byte) {
	d.grow()
	d.head = (d.head - 1) & (len(d.buf) - 1)
	d.buf[d.head] = append([]byte(nil), b...)
	d.n++
	d.size += elemSize(b)
}

// pushBack appends a copy of b.
func (d *deque) pushBack(b []byte) {
	d.grow()
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = append([]byte(nil), b...)
	d.n++
	d.size += elemSize(b)
}

// popFront removes and returns the first element; n > 0.
func (d *deque) popFront() []byte {
	b := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
	d.size -= elemSize(b)
	d.shrink()
	return b
}

// popBack removes and returns the last element; n > 0.
func (d *deque) popBack() []byte {
	i := (d.head + d.n - 1) & (len(d.buf) - 1)
	b := d.buf[i]
	d.buf[i] = nil
	d.n--
	d.size -= elemSize(b)
	d.shrink()
	return b
}

// trim keeps the elements from start to end inclusive (0 <= start <= end
// < n), dropping the others.
func (d *deque) trim(start, end int) {
	for i := end + 1; i < d.n; i++ {
		j := (d.head + i) & (len(d.buf) - 1)
		d.size -= elemSize(d.buf[j])
		d.buf[j] = nil
	}
	d.n = end + 1
	for range start {
		d.size -= elemSize(d.buf[d.head])
		d.buf[d.head] = nil
		d.head = (d.head + 1) & (len(d.buf) - 1)
		d.n--
	}
	if len(d.buf) > 16 && d.n < len(d.buf)/4 {
		c := len(d.buf)
		for c > 16 && d.n < c/4 {
			c /= 2
		}
		d.resize(c)
	}
}

// verify recomputes the elements' size and checks the ring's shape.
func (d *deque) verify() (int64, error) {
	if len(d.buf)&(len(d.buf)-1) != 0 || d.n > len(d.buf) || d.n < 0 {
		return 0, fmt.Errorf("values: list ring of %d holds %d", len(d.buf), d.n)
	}
	var size int64
	for i := 0; i < d.n; i++ {
		size += elemSize(d.at(i))
	}
	if size != d.size {
		return 0, fmt.Errorf("values: list elements size %d, recorded %d", size, d.size)
	}
	return size, nil
}
