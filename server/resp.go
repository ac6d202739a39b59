package server

import (
	"errors"
	"io"
	"math/bits"
)

// Protocol errors. Their texts are Redis's; the connection answers
// "-ERR " + text and closes.
var (
	errTooBig           = errors.New("Protocol error: request is larger than the server accepts")
	errMultibulkLength  = errors.New("Protocol error: invalid multibulk length")
	errBulkLength       = errors.New("Protocol error: invalid bulk length")
	errUnbalancedQuotes = errors.New("Protocol error: unbalanced quotes in request")
	errInlineTooBig     = errors.New("Protocol error: too big inline request")
	errBuffersFull      = errors.New("Protocol error: the server holds too much unparsed input from its clients; request refused")
)

// errExpectedDollar is Redis's error for an array element that is not a
// bulk string.
func errExpectedDollar(got byte) error {
	return errors.New("Protocol error: expected '$', got '" + string(got) + "'")
}

// maxMultibulk is Redis's bound on the number of arguments of one request.
const maxMultibulk = 1024 * 1024

// maxInline is Redis's bound on an inline command line (PROTO_INLINE_MAX_SIZE).
const maxInline = 64 << 10

// reader parses requests, RESP arrays of bulk strings or inline commands,
// from a connection into argument slices that point into its own buffer,
// so that a steady stream of requests is parsed without allocating. It
// bounds the size of one request (not of a pipelined batch) by max bytes:
// a larger one, or a bulk string announced larger, is errTooBig; an inline
// line longer than maxInline is errInlineTooBig.
//
// A request that arrives in pieces is parsed once: an array whose elements
// have not all arrived is resumed at its first incomplete element (see
// parseMultibulk), an inline line at the first byte not yet searched for
// its newline.
//
// Growth of the buffer beyond initialReadBuf and of the argument array
// beyond keptArgs is taken from budget, shared by every connection, and
// given back by release once the request is done; a request that finds
// the budget spent is errBuffersFull. A nil budget is unbounded.
//
// A reader is owned by one connection goroutine.
type reader struct {
	r      io.Reader
	max    int
	budget *budget
	held   int64 // taken from budget
	buf    []byte
	start  int // first unparsed byte
	end    int // end of the bytes read
	got    int // bytes the last fill read
	// scanned is how far an incomplete inline line has been searched for
	// its newline, so that a long line arriving in pieces is scanned once.
	scanned int
	// An array at start whose elements have not all arrived: its element
	// count (0 if none), how many elements are complete, and the offset
	// from start of the next one.
	mbCount int64
	mbDone  int64
	mbPos   int
	// offs holds, for that array, where its complete elements lie, from
	// start: the first byte and the end of each, in pairs. Each element is
	// checked and recorded once, as it arrives; the arguments are made
	// from offs in one pass when the last one has arrived (see collect).
	// It holds no pointers: growing it copies bytes, with no write
	// barriers, and the garbage collector never scans it.
	offs []uint32
	// args holds the arguments of the requests parsed since reset, back to
	// back; each request's arguments are a slice of it.
	args   [][]byte
	inline []byte // unquoted inline arguments
}

// reset forgets the requests parsed so far, whose arguments must no longer
// be used, so that their space is reused.
func (rd *reader) reset() {
	rd.args = rd.args[:0]
	rd.inline = rd.inline[:0]
}

// initialReadBuf is the size of a new connection's read buffer; it grows
// for a request that does not fit and shrinks back when it is drained.
const initialReadBuf = 16 << 10

// keptArgs is the argument array capacity a connection keeps between
// batches; a larger one, grown for one request, is released after it.
const keptArgs = 1024

// argBytes is the size of one element of the argument array.
const argBytes = 24

// keptOffs is the capacity of offs that a connection keeps between
// batches, room for keptArgs elements; a larger one is released after it.
const keptOffs = 2 * keptArgs

// offBytes is the size of one element of offs.
const offBytes = 4

// maxRequestLimit is the largest Config.MaxRequest: offs records offsets
// within a request as 32-bit numbers, and the read buffer holding one
// request grows to at most twice MaxRequest.
const maxRequestLimit = 1 << 30

// maxRead bounds what one read takes from a connection, so that an event
// loop, which reads once from each ready connection in turn, parses at
// most that much of one client's input before it serves the next: a
// client sending a large request cannot hold the others up for longer
// than it takes to parse maxRead bytes (Redis reads 16 KiB at a time).
const maxRead = 64 << 10

// buffered reports whether bytes that are not parsed yet are buffered.
func (rd *reader) buffered() bool { return rd.start < rd.end }

// fill reads once from the connection, at most maxRead bytes, after making
// room: the unparsed tail moves to the front of the buffer, which grows if
// the tail fills it.
func (rd *reader) fill() error {
	if rd.start == rd.end {
		rd.start, rd.end, rd.scanned = 0, 0, 0
	}
	if rd.end-rd.start > rd.max {
		return errTooBig
	}
	if rd.end == len(rd.buf) {
		if rd.start > 0 {
			n := copy(rd.buf, rd.buf[rd.start:rd.end])
			rd.scanned -= rd.start
			rd.start, rd.end = 0, n
		} else if err := rd.growBuf(); err != nil {
			return err
		}
	}
	n, err := rd.r.Read(rd.buf[rd.end:min(len(rd.buf), rd.end+maxRead)])
	rd.end, rd.got = rd.end+n, n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// growBuf doubles the buffer, which holds one incomplete request; a
// spare one is used if there is one, and a grown one it replaces is kept
// as a spare.
func (rd *reader) growBuf() error {
	if !rd.budget.take(int64(len(rd.buf))) {
		return errBuffersFull
	}
	rd.held += int64(len(rd.buf))
	nb := rd.bufSpares().get(2 * len(rd.buf))
	nb = nb[:cap(nb)]
	copy(nb, rd.buf[:rd.end])
	if len(rd.buf) > initialReadBuf {
		rd.bufSpares().put(rd.buf)
	}
	rd.buf = nb
	return nil
}

// bufSpares, offSpares and argSpares return the spares the reader takes
// its large arrays from and gives them back to: its budget's, or nil if it
// has none.
func (rd *reader) bufSpares() *spareArrays[byte] {
	if rd.budget == nil {
		return nil
	}
	return &rd.budget.spares.bufs
}

func (rd *reader) offSpares() *spareArrays[uint32] {
	if rd.budget == nil {
		return nil
	}
	return &rd.budget.spares.offs
}

func (rd *reader) argSpares() *spareArrays[[]byte] {
	if rd.budget == nil {
		return nil
	}
	return &rd.budget.spares.args
}

// push appends one argument, growing the array within the budget.
func (rd *reader) push(a []byte) error {
	if len(rd.args) < cap(rd.args) {
		rd.args = append(rd.args, a)
		return nil
	}
	return rd.grow(a)
}

// grow is push when the argument array is full. It stays out of line so
// that push, called for every argument, is inlined.
//
//go:noinline
func (rd *reader) grow(a []byte) error {
	if err := rd.reserve(1); err != nil {
		return err
	}
	rd.args = append(rd.args, a)
	return nil
}

// reserve makes room for n more arguments, within the budget: the array
// at least doubles, so that arguments pushed one at a time cost amortized
// constant time, and grows at once to hold all n, so that the arguments of
// a large array, whose number collect knows, are copied once. Beyond
// keptArgs its capacity is a power of two, so that it can be a spare.
//
// The array it replaces is left to the garbage collector, not kept as a
// spare: the requests parsed before in the batch use it.
func (rd *reader) reserve(n int) error {
	if cap(rd.args)-len(rd.args) >= n {
		return nil
	}
	size := max(2*cap(rd.args), len(rd.args)+n, 16)
	if size > keptArgs {
		size = 1 << bits.Len(uint(size-1))
	}
	if err := rd.take(size, cap(rd.args), keptArgs, argBytes); err != nil {
		return err
	}
	args := rd.argSpares().get(size)[:len(rd.args)]
	copy(args, rd.args)
	rd.args = args
	return nil
}

// mark records the offsets, from start, of an element of the array being
// parsed, growing offs within the budget.
func (rd *reader) mark(from, to int) error {
	if len(rd.offs)+2 <= cap(rd.offs) {
		rd.offs = append(rd.offs, uint32(from), uint32(to))
		return nil
	}
	return rd.growOffs(from, to)
}

// growOffs is mark when offs is full: it doubles offs within the budget,
// taking a spare one if there is one and keeping a grown one it replaces
// as a spare, then records the element.
func (rd *reader) growOffs(from, to int) error {
	size := max(2*cap(rd.offs), 32)
	if err := rd.take(size, cap(rd.offs), keptOffs, offBytes); err != nil {
		return err
	}
	offs := rd.offSpares().get(size)[:len(rd.offs)]
	copy(offs, rd.offs)
	if cap(rd.offs) > keptOffs {
		rd.offSpares().put(rd.offs)
	}
	rd.offs = append(offs, uint32(from), uint32(to))
	return nil
}

// take takes from the budget what growing an array from capacity from to
// size elements of elem bytes costs beyond the kept capacity, which is
// not counted.
func (rd *reader) take(size, from, kept, elem int) error {
	grown := int64(size-max(from, kept)) * int64(elem)
	if grown <= 0 {
		return nil
	}
	if !rd.budget.take(grown) {
		return errBuffersFull
	}
	rd.held += grown
	return nil
}

// rewind makes the requests from pos on unparsed again, for a batch that
// stops before running them. Call it after reset and before fill.
func (rd *reader) rewind(pos int) {
	rd.start, rd.scanned, rd.mbCount = pos, pos, 0
}

// release gives back what a request larger than usual made the reader
// hold, once it is done, to the budget and to its spares: the grown buffer
// if nothing is left in it, an argument array beyond keptArgs (cleared),
// and offsets beyond keptOffs unless an array still being parsed uses
// them. Call it after the batch has run, when no argument is used any
// more.
func (rd *reader) release() {
	if cap(rd.args) > keptArgs {
		clear(rd.args[:cap(rd.args)]) // past len too: an array cut short leaves arguments there
		rd.argSpares().put(rd.args)
		rd.args = nil
	}
	if cap(rd.offs) > keptOffs && rd.mbCount == 0 {
		rd.offSpares().put(rd.offs)
		rd.offs = nil
	}
	if cap(rd.inline) > maxInline {
		rd.inline = nil
	}
	if rd.start == rd.end && len(rd.buf) > initialReadBuf {
		rd.start, rd.end, rd.scanned = 0, 0, 0
		rd.bufSpares().put(rd.buf)
		rd.buf = make([]byte, initialReadBuf)
	}
	held := int64(max(len(rd.buf)-initialReadBuf, 0) + max(cap(rd.args)-keptArgs, 0)*argBytes +
		max(cap(rd.offs)-keptOffs, 0)*offBytes)
	rd.budget.give(rd.held - held)
	rd.held = held
}

// free gives back everything the reader took from the budget, and its
// large arrays to the spares, when its connection closes.
func (rd *reader) free() {
	rd.budget.give(rd.held)
	rd.held = 0
	if len(rd.buf) > initialReadBuf {
		rd.bufSpares().put(rd.buf)
	}
	if cap(rd.offs) > keptOffs {
		rd.offSpares().put(rd.offs)
	}
	if cap(rd.args) > keptArgs {
		clear(rd.args[:cap(rd.args)])
		rd.argSpares().put(rd.args)
	}
	rd.buf, rd.args, rd.offs, rd.inline = nil, nil, nil, nil
}

// next parses the next complete request in the buffer and returns its
// arguments, which stay valid until the next call to fill or reset, so that
// a whole pipelined batch can be parsed before it runs. It returns nil and
// no error when the buffer holds no complete request; empty requests ("*0",
// blank lines) are skipped as Redis does.
func (rd *reader) next() ([][]byte, error) {
	for rd.start < rd.end {
		mark := len(rd.args)
		var n int
		var err error
		if rd.buf[rd.start] == '*' {
			n, err = rd.parseMultibulk(rd.buf[rd.start:rd.end])
		} else {
			n, err = rd.parseInline(rd.buf[rd.start:rd.end])
		}
		if err != nil || n == 0 {
			rd.args = rd.args[:mark]
			return nil, err
		}
		rd.start += n
		rd.scanned = rd.start
		if len(rd.args) > mark {
			return rd.args[mark:len(rd.args):len(rd.args)], nil
		}
	}
	return nil, nil
}

// parseMultibulk parses "*<n>\r\n" and n bulk strings at the front of b,
// appending them to rd.args. It returns the bytes consumed, 0 if b is
// incomplete.
//
// An array that has all arrived, as a small request does, is parsed in
// one pass straight into rd.args. One that has not is remembered
// (mbCount, mbDone, mbPos) with the offsets of its complete elements in
// rd.offs, so that the next call resumes at its first incomplete element
// (resumeMultibulk): each element of a large array is checked once, as it
// arrives, and its arguments are made when the last one has arrived.
func (rd *reader) parseMultibulk(b []byte) (int, error) {
	if rd.mbCount > 0 {
		return rd.resumeMultibulk(b)
	}
	line, first, err := crlfLine(b, 1, errMultibulkLength)
	if first == 0 {
		return 0, err
	}
	count, ok := parseInt(line)
	if !ok || count > maxMultibulk {
		return 0, errMultibulkLength
	}
	pos := first
	for i := int64(0); i < count; i++ {
		from, to, err := rd.element(b, pos)
		if err != nil {
			return 0, err
		}
		if to < 0 {
			// The elements before i are complete: their offsets stand
			// for them until the array is (next parses them again).
			if err := rd.markFrom(b, first, i); err != nil {
				return 0, err
			}
			rd.mbCount, rd.mbDone, rd.mbPos = count, i, pos
			return 0, nil
		}
		if err := rd.push(b[from:to:to]); err != nil {
			return 0, err
		}
		pos = to + 2
	}
	return pos, nil
}

// resumeMultibulk goes on parsing the array at the front of b that a
// call before found incomplete, from its first incomplete element.
func (rd *reader) resumeMultibulk(b []byte) (int, error) {
	count, i, pos := rd.mbCount, rd.mbDone, rd.mbPos
	rd.mbCount = 0
	for ; i < count; i++ {
		from, to, err := rd.element(b, pos)
		if err != nil {
			return 0, err
		}
		if to < 0 {
			rd.mbCount, rd.mbDone, rd.mbPos = count, i, pos
			return 0, nil
		}
		if err := rd.mark(from, to); err != nil {
			return 0, err
		}
		pos = to + 2
	}
	return pos, rd.collect(b)
}

// markFrom records in rd.offs the offsets of the n elements of the array
// whose first element is at b[pos:], which element has checked.
func (rd *reader) markFrom(b []byte, pos int, n int64) error {
	rd.offs = rd.offs[:0]
	for k := int64(0); k < n; k++ {
		from, to, _ := rd.element(b, pos)
		if err := rd.mark(from, to); err != nil {
			return err
		}
		pos = to + 2
	}
	return nil
}

// element parses the bulk string "$<size>\r\n<data>\r\n" at b[pos:] and
// returns where its data lies; to is -1 if it has not all arrived. The
// common form of size, 1 to 18 digits without a leading zero, is read in
// one pass; anything else is left to crlfLine and parseInt to judge.
func (rd *reader) element(b []byte, pos int) (from, to int, err error) {
	if pos >= len(b) {
		return 0, -1, nil
	}
	if b[pos] != '$' {
		return 0, 0, errExpectedDollar(b[pos])
	}
	var size int64
	j := pos + 1
	for ; j < len(b) && j-pos <= 18 && '0' <= b[j] && b[j] <= '9'; j++ {
		size = size*10 + int64(b[j]-'0')
	}
	next := j + 2
	if j == pos+1 || j+1 >= len(b) || b[j] != '\r' || b[j+1] != '\n' || (b[pos+1] == '0' && j > pos+2) {
		line, n, err := crlfLine(b, pos+1, errBulkLength)
		if n == 0 {
			if err != nil {
				return 0, 0, err
			}
			return 0, -1, nil
		}
		var ok bool
		if size, ok = parseInt(line); !ok || size < 0 {
			return 0, 0, errBulkLength
		}
		next = n
	}
	if size > int64(rd.max) {
		return 0, 0, errTooBig
	}
	end := next + int(size)
	if end+2 > len(b) {
		return 0, -1, nil
	}
	if b[end] != '\r' || b[end+1] != '\n' {
		return 0, 0, errBulkLength
	}
	return next, end, nil
}

// collect appends the arguments of the complete array at the front of b,
// whose offsets markFrom and resumeMultibulk recorded in rd.offs, to
// rd.args: the array grows once, to hold them all.
func (rd *reader) collect(b []byte) error {
	offs := rd.offs
	if err := rd.reserve(len(offs) / 2); err != nil {
		return err
	}
	n := len(rd.args)
	args := rd.args[n : n+len(offs)/2]
	for k := range args {
		from, to := offs[2*k], offs[2*k+1]
		args[k] = b[from:to:to]
	}
	rd.args = rd.args[:n+len(args)]
	return nil
}

// crlfLine returns the line of b from i to the next "\r\n" and the offset
// after it; next is 0 if the line is incomplete. A newline without a
// carriage return, or a length line too long to hold a number, is bad.
func crlfLine(b []byte, i int, bad error) (line []byte, next int, err error) {
	for j := i; j < len(b); j++ {
		if b[j] == '\n' {
			if j == i || b[j-1] != '\r' {
				return nil, 0, bad
			}
			return b[i : j-1], j + 1, nil
		}
		if j-i > 32 {
			return nil, 0, bad
		}
	}
	return nil, 0, nil
}

// parseInline parses one inline command line at the front of b, appending
// its arguments to rd.args and splitting it as Redis's sdssplitargs does: arguments separated
// by spaces, "double quotes" with \n \r \t \b \a \\ \" and \xHH escapes,
// 'single quotes' with \' only. It returns the bytes consumed, 0 if the
// line is incomplete.
func (rd *reader) parseInline(b []byte) (int, error) {
	from := max(rd.scanned-rd.start, 0)
	nl := -1
	for j := from; j < len(b); j++ {
		if b[j] == '\n' {
			nl = j
			break
		}
	}
	if nl < 0 {
		if len(b) > maxInline {
			return 0, errInlineTooBig
		}
		rd.scanned = rd.start + len(b)
		return 0, nil
	}
	if nl > maxInline {
		return 0, errInlineTooBig
	}
	line := b[:nl]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if err := rd.splitInline(line); err != nil {
		return 0, err
	}
	return nl + 1, nil
}

func (rd *reader) splitInline(line []byte) error {
	for i := 0; ; {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return nil
		}
		if line[i] != '"' && line[i] != '\'' {
			j := i
			for j < len(line) && !isSpace(line[j]) {
				j++
			}
			if err := rd.push(line[i:j:j]); err != nil {
				return err
			}
			i = j
			continue
		}
		start := len(rd.inline)
		n, err := rd.unquote(line[i:])
		if err != nil {
			return err
		}
		// rd.inline may have moved while growing; the slices taken before
		// keep the old array alive and stay valid.
		if err := rd.push(rd.inline[start:len(rd.inline):len(rd.inline)]); err != nil {
			return err
		}
		i += n
	}
}

// unquote appends the quoted argument at the front of s to rd.inline and
// returns the bytes it took, including the closing quote.
func (rd *reader) unquote(s []byte) (int, error) {
	q := s[0]
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			if i+1 < len(s) && !isSpace(s[i+1]) {
				return 0, errUnbalancedQuotes
			}
			return i + 1, nil
		case c == '\\' && i+1 < len(s) && q == '\'' && s[i+1] == '\'':
			c, i = '\'', i+1
		case c == '\\' && i+3 < len(s) && q == '"' && s[i+1] == 'x' && isHex(s[i+2]) && isHex(s[i+3]):
			c, i = unhex(s[i+2])<<4|unhex(s[i+3]), i+3
		case c == '\\' && i+1 < len(s) && q == '"':
			i++
			c = s[i]
			switch c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'a':
				c = '\a'
			}
		}
		rd.inline = append(rd.inline, c)
	}
	return 0, errUnbalancedQuotes
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
