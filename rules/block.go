package rules

import (
	"encoding/json"
	"errors"
	"fmt"
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
	c.block = &compiledBlock{After: b.After, Within: within, For: dur}
	return nil
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
	return Block{Identifier: identifier, Until: now + seconds*int64(time.Second), Reason: reason}, nil
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
// readers use one without locks while a writer builds the next. The
// blocks are spread over blockBuckets maps by a hash of the identifier,
// and a change copies one of them, so that making n blocks one by one
// (an attack from many addresses) costs O(n²/blockBuckets), not O(n²).
type BlockTable struct {
	buckets [blockBuckets]map[string]Block
	n       int
}

const blockBuckets = 256

// bucketOf returns the bucket of identifier k (FNV-1a), without
// allocating.
func bucketOf[S string | []byte](k S) int {
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h = (h ^ uint32(k[i])) * 16777619
	}
	return int(h % blockBuckets)
}

// Len returns the number of blocks held, expired ones included.
func (t *BlockTable) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// copyWith returns a copy of t whose bucket i is a copy of t's.
func (t *BlockTable) copyWith(i int) *BlockTable {
	n := &BlockTable{}
	if t != nil {
		*n = *t
	}
	m := make(map[string]Block, len(n.buckets[i])+1)
	for k, v := range n.buckets[i] {
		m[k] = v
	}
	n.buckets[i] = m
	return n
}

// With returns a table in which b replaces the block of its identifier.
func (t *BlockTable) With(b Block) *BlockTable {
	i := bucketOf(b.Identifier)
	n := t.copyWith(i)
	if _, ok := n.buckets[i][b.Identifier]; !ok {
		n.n++
	}
	n.buckets[i][b.Identifier] = b
	return n
}

// Without returns a table without the block of identifier, and whether
// identifier was blocked at now. It returns t itself if identifier had no
// block.
func (t *BlockTable) Without(identifier string, now int64) (*BlockTable, bool) {
	b, held := t.get(identifier)
	if !held {
		return t, false
	}
	i := bucketOf(identifier)
	n := t.copyWith(i)
	delete(n.buckets[i], identifier)
	n.n--
	return n, b.Until > now
}

// Pruned returns a table without the blocks that expired at now, or t
// itself if none did. It looks at every block and copies the buckets it
// changes.
func (t *BlockTable) Pruned(now int64) *BlockTable {
	if t == nil {
		return nil
	}
	n := t
	for i := range t.buckets {
		copied := false
		for k, b := range t.buckets[i] {
			if b.Until > now {
				continue
			}
			if !copied {
				n, copied = n.copyWith(i), true
			}
			delete(n.buckets[i], k)
			n.n--
		}
	}
	return n
}

func (t *BlockTable) get(identifier string) (Block, bool) {
	if t == nil {
		return Block{}, false
	}
	b, ok := t.buckets[bucketOf(identifier)][identifier]
	return b, ok
}

// Get returns the block of identifier if it is live at now.
func (t *BlockTable) Get(identifier string, now int64) (Block, bool) {
	b, ok := t.get(identifier)
	if !ok || b.Until <= now {
		return Block{}, false
	}
	return b, true
}

// All returns every block held, expired ones included, sorted by
// identifier.
func (t *BlockTable) All() []Block {
	if t == nil {
		return nil
	}
	out := make([]Block, 0, t.n)
	for i := range t.buckets {
		for _, b := range t.buckets[i] {
			out = append(out, b)
		}
	}
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
		if b, ok := t.buckets[bucketOf(k)][string(k)]; ok && b.Until > now && (!found || b.Until > best.Until) {
			best, found = b, true
		}
	}
	return best, found
}

// NewBlockTable returns a table of the given blocks, the later of two
// with one identifier winning.
func NewBlockTable(blocks ...Block) *BlockTable {
	t := &BlockTable{}
	for _, b := range blocks {
		i := bucketOf(b.Identifier)
		if t.buckets[i] == nil {
			t.buckets[i] = map[string]Block{}
		}
		if _, ok := t.buckets[i][b.Identifier]; !ok {
			t.n++
		}
		t.buckets[i][b.Identifier] = b
	}
	return t
}
