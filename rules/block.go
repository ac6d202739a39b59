package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// BlockSpec is a rule's "block" field: an identifier that the rule denies
// After times within Within is blocked for For, and every rules check
// that names it is then denied without charging any counter.
//
//	"block": {"after": 5, "within": "1m", "for": "15m"}
type BlockSpec struct {
	After  int64  `json:"after" yaml:"after"`
	Within string `json:"within" yaml:"within"`
	For    string `json:"for" yaml:"for"`
}

// MaxBlockAfter is the largest BlockSpec.After: the denials are counted
// exactly (a sliding log of one entry per denial), so the count is bounded
// like the log algorithm's limit.
const MaxBlockAfter = 10000

// compiledBlock is a validated BlockSpec.
type compiledBlock struct {
	After  int64
	Within int64 // ns
	For    int64 // ns
	// reason is the Reason of the blocks the rule makes, made once: every
	// block of the rule shares it.
	reason string
}

// checkBlock validates r.Block, if any, into c.block.
func (c *Compiled) checkBlock() error {
	b := c.Rule.Block
	if b == nil {
		return nil
	}
	id := c.Rule.ID
	if b.After < 1 || b.After > MaxBlockAfter {
		return invalid(id, "block.after", ErrBlockAfter, fmt.Sprintf("got %d", b.After))
	}
	within, ok := engine.ParseWindow([]byte(b.Within))
	if !ok || within < engine.MinWindow || within > engine.MaxWindow {
		return invalid(id, "block.within", ErrBlockDuration, got(b.Within))
	}
	dur, ok := engine.ParseWindow([]byte(b.For))
	if !ok || dur < engine.MinWindow || dur > engine.MaxWindow {
		return invalid(id, "block.for", ErrBlockDuration, got(b.For))
	}
	c.block = &compiledBlock{After: b.After, Within: within, For: dur,
		reason: fmt.Sprintf("rule %s denied it %d times within %s", id, b.After, time.Duration(within))}
	return nil
}

// BlockReason returns the Reason of the blocks the rule makes ("rule
// login denied it 5 times within 1m0s"), "" if it has no block.
func (c *Compiled) BlockReason() string {
	if c.block == nil {
		return ""
	}
	return c.block.reason
}

// BlockAfter returns the rule's block parameters: after how many denials
// within which span (ns) an identifier is blocked and for how long (ns);
// ok is false if the rule has no "block".
func (c *Compiled) BlockAfter() (after, within, dur int64, ok bool) {
	if c.block == nil {
		return 0, 0, 0, false
	}
	return c.block.After, c.block.Within, c.block.For, true
}

// Block is one blocked identifier. While it lasts, every rules check that
// names Identifier is denied without charging any counter.
type Block struct {
	// Identifier is "type=value", such as "ip=1.2.3.4".
	Identifier string `json:"id"`
	// Until is when the block ends, in Unix ns on the clock of the node
	// that made it.
	Until int64 `json:"until"`
	// Reason is the operator's reason, or for a block a rule made, a
	// sentence naming the rule.
	Reason string `json:"reason,omitempty"`
	// Rule is the id of the rule that made the block, "" for one made by
	// hand (RL.BLOCK, PUT /v1/blocks).
	Rule string `json:"rule,omitempty"`
	// TTL is the time left, filled by BlockTable.Active (not stored).
	TTL time.Duration `json:"-"`
	// Since is when the block was made, in Unix ns on the clock of the
	// node that made it (0 for a block made before it was recorded).
	Since int64 `json:"since,omitempty"`
}

// Bounds on blocks made by hand.
const (
	MaxBlockReason   = 256                   // longest reason, in bytes
	MaxBlockSeconds  = 366 * 24 * 3600       // longest block
	MaxIdentifierLen = MaxNameLen + 1 + 1024 // longest "type=value"
)

// Block errors.
var (
	ErrIdentifier    = errors.New("must be type=value, such as ip=1.2.3.4 or user=u1: a key type (1 to 64 letters, digits, '-', '_' or '.'), '=', and a value of 1 to 1024 bytes")
	ErrBlockSeconds  = errors.New("must be a whole number of seconds from 1 to 31622400 (366 days)")
	ErrBlockReason   = errors.New("must be at most 256 bytes")
	ErrInvalidBlock  = errors.New("invalid block")
	ErrBlockAfter    = errors.New("must be an integer from 1 to 10000: the number of denials within 'within' that blocks")
	ErrBlockDuration = errors.New(`must be a duration such as "30s", "1m", "15m" or "1h", from 1ms to 366d`)
)

// ParseIdentifier checks "type=value" and returns it split; the error
// wraps ErrInvalidBlock and ErrIdentifier.
func ParseIdentifier(s string) (typ, value string, err error) {
	typ, value, ok := strings.Cut(s, "=")
	if !ok || !ValidName(typ) || value == "" || len(value) > 1024 {
		return "", "", fmt.Errorf("%w: identifier: %w (got %s)", ErrInvalidBlock, ErrIdentifier, got(s))
	}
	return typ, value, nil
}

// NewBlock validates a block made by hand: identifier "type=value",
// seconds from 1 to MaxBlockSeconds, a reason of at most MaxBlockReason
// bytes; it lasts from now (Unix ns). Errors wrap ErrInvalidBlock and name the
// bad argument.
func NewBlock(identifier string, seconds int64, reason string, now int64) (Block, error) {
	if _, _, err := ParseIdentifier(identifier); err != nil {
		return Block{}, err
	}
	if seconds < 1 || seconds > MaxBlockSeconds {
		return Block{}, fmt.Errorf("%w: seconds: %w (got %d)", ErrInvalidBlock, ErrBlockSeconds, seconds)
	}
	if len(reason) > MaxBlockReason {
		return Block{}, fmt.Errorf("%w: reason: %w (got %d bytes)", ErrInvalidBlock, ErrBlockReason, len(reason))
	}
	return Block{Identifier: identifier, Until: now + seconds*int64(time.Second), Reason: reason, Since: now}, nil
}

// EncodeBlock returns b as JSON, for records and logs.
func EncodeBlock(b Block) []byte {
	out, _ := json.Marshal(b) // cannot fail: strings and an integer
	return out
}

// DecodeBlock decodes what EncodeBlock wrote.
func DecodeBlock(data []byte) (Block, error) {
	var b Block
	if err := json.Unmarshal(data, &b); err != nil {
		return b, err
	}
	if _, _, err := ParseIdentifier(b.Identifier); err != nil {
		return b, err
	}
	return b, nil
}

// BlockTable is an immutable set of blocks keyed by identifier. A nil
// *BlockTable is empty. Methods that change it return a new table, so
// readers use one without locks while a writer builds the next.
//
// The blocks are spread by a hash of the identifier over blockBuckets
// buckets, each a slice sorted by identifier, held in blockTop leaves of
// blockLeafSize buckets. A change copies the top array, one leaf and one
// bucket: about 3 KB plus n/4096 blocks, so that making n blocks one by
// one (an attack from many addresses) costs the garbage collector little
// even at a million blocks (with 256 maps of n/256 blocks, a block made
// at 400,000 copied 140 KB); WithCapped bounds n. A bucket is a slice, not
// a map: a table of a few blocks in many buckets takes little more than
// the blocks. Each bucket and leaf knows its earliest end, so that the
// block nearest to its end is found without looking at every block.
type BlockTable struct {
	leaves [blockTop]*blockLeaf
	n      int
	bytes  int64 // BlockBytes of every block
}

// blockLeaf is blockLeafSize buckets of a BlockTable. A leaf is never
// changed once published: a change copies it.
type blockLeaf struct {
	buckets [blockLeafSize][]Block // each sorted by identifier
	ends    [blockLeafSize]int64   // each bucket's earliest Until; noEnd if empty
	end     int64                  // the least of ends; noEnd if empty
}

// noEnd is the earliest end of an empty bucket or leaf.
const noEnd = math.MaxInt64

// newLeaf returns an empty leaf.
func newLeaf() *blockLeaf {
	l := &blockLeaf{end: noEnd}
	for i := range l.ends {
		l.ends[i] = noEnd
	}
	return l
}

const (
	blockTop      = 64
	blockLeafSize = 64
	blockBuckets  = blockTop * blockLeafSize
)

// blockOverhead is what a block takes in a BlockTable besides its
// strings: its place in a bucket (a Block) and a share of the bucket's
// slack, rounded up.
const blockOverhead = 96

// BlockBytes estimates the memory b takes in a BlockTable: its place and
// its strings. Blocks count against --maxmemory with it; it errs on the
// high side.
func BlockBytes(b Block) int64 {
	return blockOverhead + int64(len(b.Identifier)+len(b.Reason)+len(b.Rule))
}

// bucketOf returns the bucket of identifier k (FNV-1a), without
// allocating.
func bucketOf[S string | []byte](k S) int {
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h = (h ^ uint32(k[i])) * 16777619
	}
	return int(h % blockBuckets)
}

// search returns the index of identifier in bucket (sorted), or where it
// would go, and whether it is there.
func search(bucket []Block, identifier string) (int, bool) {
	lo, hi := 0, len(bucket)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bucket[m].Identifier < identifier {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(bucket) && bucket[lo].Identifier == identifier
}

// searchBytes is search for an identifier in a byte slice, without
// allocating (Find's, on the check path).
func searchBytes(bucket []Block, identifier []byte) (int, bool) {
	lo, hi := 0, len(bucket)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bucket[m].Identifier < string(identifier) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(bucket) && bucket[lo].Identifier == string(identifier)
}

// bucket returns bucket i, nil if empty.
func (t *BlockTable) bucket(i int) []Block {
	if t == nil || t.leaves[i/blockLeafSize] == nil {
		return nil
	}
	return t.leaves[i/blockLeafSize].buckets[i%blockLeafSize]
}

// Len returns the number of blocks held, expired ones included.
func (t *BlockTable) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Bytes returns the memory the blocks held take (BlockBytes of each).
func (t *BlockTable) Bytes() int64 {
	if t == nil {
		return 0
	}
	return t.bytes
}

// setBucket returns a copy of t in which bucket i is b (which the caller
// made: it is not shared), with n and bytes moved by dn and dbytes.
func (t *BlockTable) setBucket(i int, b []Block, dn int, dbytes int64) *BlockTable {
	n := &BlockTable{}
	if t != nil {
		*n = *t
	}
	leaf := newLeaf()
	if old := n.leaves[i/blockLeafSize]; old != nil {
		*leaf = *old
	}
	slot := i % blockLeafSize
	leaf.buckets[slot] = b
	leaf.ends[slot] = earliestEnd(b)
	leaf.end = noEnd
	for _, e := range leaf.ends {
		leaf.end = min(leaf.end, e)
	}
	n.leaves[i/blockLeafSize] = leaf
	n.n += dn
	n.bytes += dbytes
	return n
}

// earliestEnd returns the least Until of b, noEnd if b is empty.
func earliestEnd(b []Block) int64 {
	end := int64(noEnd)
	for i := range b {
		end = min(end, b[i].Until)
	}
	return end
}

// With returns a table in which b replaces the block of its identifier.
func (t *BlockTable) With(b Block) *BlockTable {
	i := bucketOf(b.Identifier)
	old := t.bucket(i)
	at, held := search(old, b.Identifier)
	if held {
		nb := append([]Block(nil), old...)
		nb[at] = b
		return t.setBucket(i, nb, 0, BlockBytes(b)-BlockBytes(old[at]))
	}
	nb := make([]Block, 0, len(old)+1)
	nb = append(append(append(nb, old[:at]...), b), old[at:]...)
	return t.setBucket(i, nb, 1, BlockBytes(b))
}

// without returns a table without the block at index at of bucket i.
func (t *BlockTable) without(i, at int) *BlockTable {
	old := t.bucket(i)
	nb := make([]Block, 0, len(old)-1)
	nb = append(append(nb, old[:at]...), old[at+1:]...)
	return t.setBucket(i, nb, -1, -BlockBytes(old[at]))
}

// WithCapped is With for a table of at most max blocks (0: no bound): if
// b is a new identifier and the table holds max blocks, the blocks
// nearest to their end (expired ones first) are dropped to make room.
// It returns the table and the number of blocks dropped. The same calls
// give the same table on every node.
func (t *BlockTable) WithCapped(b Block, max int) (*BlockTable, int) {
	dropped := 0
	if _, held := t.get(b.Identifier); max > 0 && !held {
		for t.Len() >= max {
			t = t.withoutEarliest()
			dropped++
		}
	}
	return t.With(b), dropped
}

// withoutEarliest returns a table without the block that ends first (of
// those that tie, the one in the first bucket, then the least
// identifier). t must hold a block.
func (t *BlockTable) withoutEarliest() *BlockTable {
	li := -1
	for i, leaf := range t.leaves {
		if leaf != nil && leaf.end != noEnd && (li < 0 || leaf.end < t.leaves[li].end) {
			li = i
		}
	}
	leaf := t.leaves[li]
	slot := -1
	for i, e := range leaf.ends {
		if e == leaf.end {
			slot = i
			break
		}
	}
	for at, b := range leaf.buckets[slot] {
		if b.Until == leaf.end {
			return t.without(li*blockLeafSize+slot, at)
		}
	}
	panic("rules: a block table's ends do not match its blocks")
}

// Without returns a table without the block of identifier, and whether
// identifier was blocked at now. It returns t itself if identifier had no
// block.
func (t *BlockTable) Without(identifier string, now int64) (*BlockTable, bool) {
	i := bucketOf(identifier)
	at, held := search(t.bucket(i), identifier)
	if !held {
		return t, false
	}
	live := t.bucket(i)[at].Until > now
	return t.without(i, at), live
}

// Pruned returns a table without the blocks that expired at now, or t
// itself if none did. It looks at the leaves' and buckets' earliest ends
// and copies what it changes.
func (t *BlockTable) Pruned(now int64) *BlockTable {
	if t == nil {
		return nil
	}
	n := t
	for li, leaf := range t.leaves {
		if leaf == nil || leaf.end > now {
			continue
		}
		for slot, e := range leaf.ends {
			if e > now {
				continue
			}
			old := leaf.buckets[slot]
			nb := make([]Block, 0, len(old))
			var gone int64
			for _, b := range old {
				if b.Until > now {
					nb = append(nb, b)
				} else {
					gone += BlockBytes(b)
				}
			}
			n = n.setBucket(li*blockLeafSize+slot, nb, len(nb)-len(old), -gone)
		}
	}
	return n
}

func (t *BlockTable) get(identifier string) (Block, bool) {
	b := t.bucket(bucketOf(identifier))
	if at, ok := search(b, identifier); ok {
		return b[at], true
	}
	return Block{}, false
}

// Get returns the block of identifier if it is live at now.
func (t *BlockTable) Get(identifier string, now int64) (Block, bool) {
	b, ok := t.get(identifier)
	if !ok || b.Until <= now {
		return Block{}, false
	}
	return b, true
}

// each calls fn for every block held, bucket by bucket.
func (t *BlockTable) each(fn func(b *Block)) {
	if t == nil {
		return
	}
	for _, leaf := range t.leaves {
		if leaf == nil {
			continue
		}
		for _, bucket := range leaf.buckets {
			for i := range bucket {
				fn(&bucket[i])
			}
		}
	}
}

// All returns every block held, expired ones included, sorted by
// identifier.
func (t *BlockTable) All() []Block {
	if t == nil {
		return nil
	}
	out := make([]Block, 0, t.n)
	t.each(func(b *Block) { out = append(out, *b) })
	sort.Slice(out, func(i, j int) bool { return out[i].Identifier < out[j].Identifier })
	return out
}

// Active returns the blocks live at now, sorted by identifier, with TTL
// set to the time each has left.
func (t *BlockTable) Active(now int64) []Block {
	all := t.All()
	out := all[:0]
	for _, b := range all {
		if b.Until > now {
			b.TTL = time.Duration(b.Until - now)
			out = append(out, b)
		}
	}
	return out
}

// Live returns the number of blocks live at now, without copying them.
func (t *BlockTable) Live(now int64) int {
	if t == nil {
		return 0
	}
	n := 0
	for _, leaf := range t.leaves {
		if leaf == nil {
			continue
		}
		for slot, bucket := range leaf.buckets {
			if leaf.ends[slot] > now {
				n += len(bucket)
				continue
			}
			for i := range bucket {
				if bucket[i].Until > now {
					n++
				}
			}
		}
	}
	return n
}

// Newest returns up to n of the blocks live at now, those made last
// (Since) first, then those ending last, with TTL set: a page's summary
// of a table that may hold a million. It copies only what it returns.
func (t *BlockTable) Newest(n int, now int64) []Block {
	if t == nil || n <= 0 {
		return nil
	}
	newer := func(a, b *Block) bool {
		if a.Since != b.Since {
			return a.Since > b.Since
		}
		if a.Until != b.Until {
			return a.Until > b.Until
		}
		return a.Identifier < b.Identifier
	}
	var top []Block // sorted, newest first
	t.each(func(b *Block) {
		if b.Until <= now || len(top) == n && !newer(b, &top[n-1]) {
			return
		}
		at := sort.Search(len(top), func(j int) bool { return newer(b, &top[j]) })
		if len(top) < n {
			top = append(top, Block{})
		}
		copy(top[at+1:], top[at:len(top)-1])
		top[at] = *b
		top[at].TTL = time.Duration(b.Until - now)
	})
	return top
}

// Find returns the longest-lasting block, live at now, of one of q's
// identifiers. It does not allocate once q's buffers have grown.
func (t *BlockTable) Find(q *Query, now int64) (Block, bool) {
	var best Block
	found := false
	if t.Len() == 0 {
		return best, false
	}
	for i := range q.IDs {
		id := &q.IDs[i]
		k := append(append(append(q.blockKey[:0], id.Type...), '='), id.Value...)
		q.blockKey = k
		bucket := t.bucket(bucketOf(k))
		if at, ok := searchBytes(bucket, k); ok {
			if b := bucket[at]; b.Until > now && (!found || b.Until > best.Until) {
				best, found = b, true
			}
		}
	}
	return best, found
}

// NewBlockTable returns a table of the given blocks, the later of two
// with one identifier winning.
func NewBlockTable(blocks ...Block) *BlockTable {
	last := make(map[string]Block, len(blocks))
	for _, b := range blocks {
		last[b.Identifier] = b
	}
	var byBucket [blockBuckets][]Block
	t := &BlockTable{}
	for _, b := range last {
		i := bucketOf(b.Identifier)
		byBucket[i] = append(byBucket[i], b)
		t.n++
		t.bytes += BlockBytes(b)
	}
	for i, bucket := range byBucket {
		if len(bucket) == 0 {
			continue
		}
		sort.Slice(bucket, func(x, y int) bool { return bucket[x].Identifier < bucket[y].Identifier })
		leaf := t.leaves[i/blockLeafSize]
		if leaf == nil {
			leaf = newLeaf()
			t.leaves[i/blockLeafSize] = leaf
		}
		slot := i % blockLeafSize
		leaf.buckets[slot], leaf.ends[slot] = bucket, earliestEnd(bucket)
		leaf.end = min(leaf.end, leaf.ends[slot])
	}
	return t
}
