package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/rules"
)

// The meta group is the cluster's own Raft group (id metaGroup): every
// node is a member, and its FSM holds what every node must agree on and
// read locally — the number of data groups, each group's voters, each
// node's addresses, and the rules. Its entries are JSON commands (rare:
// rule changes and membership), applied deterministically; its snapshot is
// the whole state as JSON with a version.

// metaGroup is the meta group's id; data groups are 1..Groups.
const metaGroup = 0

// NodeInfo is what the cluster knows of a member.
type NodeInfo struct {
	ID   string `json:"id"`   // --node-id
	Raft string `json:"raft"` // address of its Raft listener
	RESP string `json:"resp"` // address clients reach its RESP port at
	HTTP string `json:"http"` // address of its HTTP API, "" if none
	// Leaving: the node asked to leave; no group is placed on it, and it
	// is forgotten once no group has it as a voter.
	Leaving bool `json:"leaving,omitempty"`
}

// metaState is the meta group's state.
type metaState struct {
	Version   int                   `json:"version"`
	Groups    int                   `json:"groups"`    // data groups, 1..Groups
	Placement map[int][]string      `json:"placement"` // group → voters' ids, preferred leader first
	Nodes     map[string]NodeInfo   `json:"nodes"`
	Rules     map[string]rules.Rule `json:"rules"`
	// Blocks are the blocked identifiers, by identifier, in a snapshot
	// only: the FSM keeps them in its block table (metaFSM.blocks). An
	// expired one never denies and is dropped within a second of changes.
	Blocks map[string]rules.Block `json:"blocks,omitempty"`
}

const metaVersion = 1

// metaCmd is one entry of the meta group's log.
type metaCmd struct {
	Op        string           `json:"op"` // init, hello, join, leave, forget, rule.set, rule.create, rule.del, block.set, block.del
	Groups    int              `json:"groups,omitempty"`
	Placement map[int][]string `json:"placement,omitempty"`
	Node      *NodeInfo        `json:"node,omitempty"`
	Peers     []NodeInfo       `json:"peers,omitempty"` // init: the initial members
	Rule      *rules.Rule      `json:"rule,omitempty"`
	ID        string           `json:"id,omitempty"`
	Block     *rules.Block     `json:"block,omitempty"` // block.set
	// At is the proposing node's clock when it made the command (ns; 0 in
	// entries of earlier versions, whose time is raft's AppendedAt, the
	// meta leader's wall clock). Blocks expire by it: a meta leader whose
	// wall clock stepped ahead would otherwise drop every block that
	// expires before its wall clock, for good.
	At int64 `json:"at,omitempty"`
}

// metaResult is what applying a metaCmd returns through raft's future.
type metaResult struct {
	Added  bool   `json:"added"`            // rule.set: a new id; rule.del: it existed
	Exists bool   `json:"exists,omitempty"` // rule.create: refused, the id is taken
	Err    string `json:"err"`              // a refusal, as the user should read it
}

// metaFSM applies the meta group's entries. Readers get immutable copies
// through view and ruleSet; all methods are safe for concurrent use.
type metaFSM struct {
	mu      sync.Mutex
	state   metaState
	view    atomic.Pointer[metaState] // a copy of state, replaced on change
	rules   atomic.Pointer[rules.Set]
	blocks  atomic.Pointer[rules.BlockTable] // nil when no block is held; written under mu
	applied atomic.Uint64
	// blocksPruned is the entry time expired blocks were last dropped at.
	blocksPruned int64
	// blocksMade counts the blocks applied here, by source (a rule id or
	// "manual"); under mu.
	blocksMade map[string]uint64
	// changed is called (outside mu) after every applied change.
	changed func()
}

func newMetaFSM() *metaFSM {
	f := &metaFSM{state: emptyMeta()}
	f.publish()
	return f
}

func emptyMeta() metaState {
	return metaState{Version: metaVersion, Placement: map[int][]string{}, Nodes: map[string]NodeInfo{}, Rules: map[string]rules.Rule{}}
}

// Apply applies one committed entry (raft.FSM).
func (f *metaFSM) Apply(l *raft.Log) any {
	defer f.applied.Store(l.Index)
	if l.Type != raft.LogCommand {
		return nil
	}
	var c metaCmd
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return metaResult{Err: fmt.Sprintf("ERR corrupt meta entry %d: %v", l.Index, err)}
	}
	f.mu.Lock()
	at := c.At // 0: an entry without a time drops no block
	if at == 0 && !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	res := f.apply(c, at)
	f.publish()
	f.mu.Unlock()
	if f.changed != nil {
		f.changed()
	}
	return res
}

// apply changes the state by c, made at now (the time in its log entry,
// the same on every node). Call with mu held.
func (f *metaFSM) apply(c metaCmd, now int64) metaResult {
	s := &f.state
	switch c.Op {
	case "init":
		if s.Groups == 0 { // the first init wins; every node sends the same
			s.Groups, s.Placement = c.Groups, c.Placement
			for _, p := range c.Peers {
				if _, ok := s.Nodes[p.ID]; !ok {
					s.Nodes[p.ID] = p
				}
			}
		}
	case "hello": // an update of a member's addresses
		if _, ok := s.Nodes[c.Node.ID]; c.Node != nil && ok {
			n := *c.Node
			n.Leaving = s.Nodes[n.ID].Leaving
			s.Nodes[n.ID] = n
		}
	case "join":
		if c.Node == nil || s.Groups == 0 {
			return metaResult{Err: "ERR the cluster is not initialised yet"}
		}
		n := *c.Node
		n.Leaving = false
		s.Nodes[n.ID] = n
		s.Placement = placement(activeNodes(s), s.Groups)
	case "leave":
		n, ok := s.Nodes[c.ID]
		if !ok {
			return metaResult{Err: fmt.Sprintf("ERR no node %q in the cluster", c.ID)}
		}
		if !n.Leaving && len(activeNodes(s)) <= 1 {
			return metaResult{Err: "ERR the last node cannot leave"}
		}
		n.Leaving = true
		s.Nodes[c.ID] = n
		s.Placement = placement(activeNodes(s), s.Groups)
	case "forget":
		if n, ok := s.Nodes[c.ID]; ok && n.Leaving {
			delete(s.Nodes, c.ID)
		}
	case "rule.set", "rule.create":
		if c.Rule == nil {
			return metaResult{Err: "ERR rule missing"}
		}
		_, exists := s.Rules[c.Rule.ID]
		if c.Op == "rule.create" && exists {
			return metaResult{Exists: true, Err: fmt.Sprintf("%v: %q", rules.ErrExists, c.Rule.ID)}
		}
		if _, err := rules.Compile(*c.Rule, 0); err != nil {
			return metaResult{Err: err.Error()}
		}
		s.Rules[c.Rule.ID] = *c.Rule
		return metaResult{Added: !exists}
	case "rule.del":
		_, exists := s.Rules[c.ID]
		delete(s.Rules, c.ID)
		return metaResult{Added: exists}
	case "block.set", "block.del":
		return f.applyBlock(c, now)
	default:
		return metaResult{Err: fmt.Sprintf("ERR unknown meta command %q", c.Op)}
	}
	return metaResult{}
}

// applyBlock applies a block.set or block.del at now to the block table
// (kept beside the state, not in it, so that a change copies a bucket of
// the table rather than every block). The blocks expired at now are
// dropped at most once a second of entry time. block.del's result says
// whether a live block was lifted. Call with mu held.
func (f *metaFSM) applyBlock(c metaCmd, now int64) metaResult {
	t := f.blocks.Load()
	if now != 0 && now-f.blocksPruned >= int64(time.Second) {
		t, f.blocksPruned = t.Pruned(now), now
	}
	var res metaResult
	switch {
	case c.Op == "block.del":
		t, res.Added = t.Without(c.ID, now)
	case c.Block == nil:
		res.Err = "ERR block missing"
	default:
		b := *c.Block
		b.TTL = 0
		if _, _, err := rules.ParseIdentifier(b.Identifier); err != nil {
			res.Err = err.Error()
			break
		}
		res.Added = true
		if b.Until <= now && now != 0 {
			break // expired already
		}
		t = t.With(b)
		src := b.Rule
		if src == "" {
			src = "manual"
		}
		if f.blocksMade == nil {
			f.blocksMade = map[string]uint64{}
		}
		f.blocksMade[src]++
	}
	if t.Len() == 0 {
		t = nil
	}
	f.blocks.Store(t)
	return res
}

// publish replaces the readers' copies of the state. Call with mu held.
func (f *metaFSM) publish() {
	cp := cloneMeta(f.state)
	f.view.Store(&cp)
	compiled := make([]*rules.Compiled, 0, len(cp.Rules))
	for _, r := range cp.Rules {
		if c, err := rules.Compile(r, 0); err == nil {
			compiled = append(compiled, c)
		}
	}
	f.rules.Store(rules.NewSet(compiled...))
}

func cloneMeta(s metaState) metaState {
	cp := metaState{Version: s.Version, Groups: s.Groups, Placement: make(map[int][]string, len(s.Placement)),
		Nodes: make(map[string]NodeInfo, len(s.Nodes)), Rules: make(map[string]rules.Rule, len(s.Rules))}
	for g, v := range s.Placement {
		cp.Placement[g] = append([]string(nil), v...)
	}
	for k, v := range s.Nodes {
		cp.Nodes[k] = v
	}
	for k, v := range s.Rules {
		cp.Rules[k] = v
	}
	return cp
}

// current returns the state as of the last entry applied; the caller must
// not change it.
func (f *metaFSM) current() *metaState { return f.view.Load() }

// ruleSet returns the rules as of the last entry applied.
func (f *metaFSM) ruleSet() *rules.Set { return f.rules.Load() }

// blockTable returns the blocks as of the last entry applied, nil if
// none.
func (f *metaFSM) blockTable() *rules.BlockTable { return f.blocks.Load() }

// blocksMadeCopy returns a copy of the counts of blocks applied here.
func (f *metaFSM) blocksMadeCopy() map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]uint64, len(f.blocksMade))
	for k, v := range f.blocksMade {
		out[k] = v
	}
	return out
}

// errMetaSnapshot is returned for a meta snapshot that cannot be read.
var errMetaSnapshot = errors.New("cluster: corrupt meta snapshot")

// Snapshot returns the state to persist (raft.FSM).
func (f *metaFSM) Snapshot() (raft.FSMSnapshot, error) {
	st := *f.current()
	if all := f.blockTable().All(); len(all) > 0 {
		st.Blocks = make(map[string]rules.Block, len(all))
		for _, b := range all {
			st.Blocks[b.Identifier] = b
		}
	}
	return metaSnapshot{state: st}, nil
}

// Restore replaces the state with the snapshot's (raft.FSM).
func (f *metaFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s metaState
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("%w: %v", errMetaSnapshot, err)
	}
	if s.Version != metaVersion {
		return fmt.Errorf("%w: version %d", errMetaSnapshot, s.Version)
	}
	fresh := emptyMeta()
	for k, v := range s.Placement {
		fresh.Placement[k] = v
	}
	for k, v := range s.Nodes {
		fresh.Nodes[k] = v
	}
	for k, v := range s.Rules {
		fresh.Rules[k] = v
	}
	blocks := make([]rules.Block, 0, len(s.Blocks))
	for _, b := range s.Blocks {
		blocks = append(blocks, b)
	}
	fresh.Groups = s.Groups
	f.mu.Lock()
	f.state = fresh
	if len(blocks) == 0 {
		f.blocks.Store(nil)
	} else {
		f.blocks.Store(rules.NewBlockTable(blocks...))
	}
	f.blocksPruned = 0
	f.publish()
	f.mu.Unlock()
	if f.changed != nil {
		f.changed()
	}
	return nil
}

type metaSnapshot struct{ state metaState }

// Persist writes the state as JSON.
func (s metaSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s.state); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release does nothing.
func (s metaSnapshot) Release() {}

// sortedRules returns the rules of s in id order.
func sortedRules(s *metaState) []rules.Rule {
	out := make([]rules.Rule, 0, len(s.Rules))
	for _, r := range s.Rules {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// activeNodes returns the ids of the nodes that are not leaving. Call with
// the state's lock held, or on a copy.
func activeNodes(s *metaState) []string {
	var ids []string
	for id, n := range s.Nodes {
		if !n.Leaving {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// placement returns the voters of each of groups data groups over the
// nodes ids: group g (1-based) has up to three voters, starting at node
// (g-1) mod n in id order, which is its preferred leader, so that leaders
// spread evenly.
func placement(ids []string, groups int) map[int][]string {
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	n := len(sorted)
	out := make(map[int][]string, groups)
	for g := 1; g <= groups; g++ {
		k := min(3, n)
		voters := make([]string, 0, k)
		for i := 0; i < k; i++ {
			voters = append(voters, sorted[(g-1+i)%n])
		}
		out[g] = voters
	}
	return out
}
