// Package meta is the state machine of a cluster's meta group, the
// cluster's own Raft group: every node is a member, and its FSM holds what
// every node must agree on and read locally — the number of data groups,
// each group's voters, each node's addresses, the rules and the blocks.
// Its entries are JSON commands (rare: rule changes and membership),
// applied deterministically; its snapshot is the whole state as JSON with
// a version. Package cluster runs the group (its raft instance, joining,
// leaving, proposing); this package only applies what the log says, and
// imports nothing of cluster.
package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/rules"
)

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

// State is the meta group's state.
type State struct {
	Version   int                   `json:"version"`
	Groups    int                   `json:"groups"`    // data groups, 1..Groups
	Placement map[int][]string      `json:"placement"` // group → voters' ids, preferred leader first
	Nodes     map[string]NodeInfo   `json:"nodes"`
	Rules     map[string]rules.Rule `json:"rules"`
	// Blocks are the blocked identifiers, by identifier, in a snapshot
	// only: the FSM keeps them in its block table (FSM.blocks). An
	// expired one never denies and is dropped within a second of changes.
	Blocks map[string]rules.Block `json:"blocks,omitempty"`
	// Done is the requests applied last (see Cmd.Req), oldest first,
	// in a snapshot only: the FSM keeps them in FSM.done.
	Done []doneReq `json:"done,omitempty"`
}

// doneReq is a request the meta group applied, with what it answered.
type doneReq struct {
	Req    string `json:"req"`
	Result Result `json:"result"`
}

// MaxDone bounds the requests the meta group remembers the answers of: a
// request retried after more changes than this from all nodes is applied
// again (rule and block changes are idempotent; only their counts differ).
const MaxDone = 4096

const version = 1

// Cmd is one entry of the meta group's log.
type Cmd struct {
	Op        string           `json:"op"` // init, hello, join, leave, forget, rule.set, rule.create, rule.del, block.set, block.del
	Groups    int              `json:"groups,omitempty"`
	Placement map[int][]string `json:"placement,omitempty"`
	Node      *NodeInfo        `json:"node,omitempty"`
	Peers     []NodeInfo       `json:"peers,omitempty"` // init: the initial members
	Rule      *rules.Rule      `json:"rule,omitempty"`
	ID        string           `json:"id,omitempty"`
	Block     *rules.Block     `json:"block,omitempty"`  // block.set
	Change    *rules.Change    `json:"change,omitempty"` // rules.change
	// Max, in a block.set, is the proposer's --max-blocks (0: no bound):
	// beyond it the blocks nearest to their end are dropped, on every node
	// alike.
	Max int `json:"max,omitempty"`
	// Req, when set, names the request (unique: the proposing node's
	// prefix and a count). A request applied already is answered as it
	// was then, and changes nothing: a proposer that lost the answer (its
	// leader stalled or moved after the commit) sends it again, and learns
	// that it committed rather than making it twice.
	Req string `json:"req,omitempty"`
	// At is the proposing node's clock when it made the command (ns; 0 in
	// entries of earlier versions, whose time is raft's AppendedAt, the
	// meta leader's wall clock). Blocks expire by it: a meta leader whose
	// wall clock stepped ahead would otherwise drop every block that
	// expires before its wall clock, for good.
	At int64 `json:"at,omitempty"`
}

// Result is what applying a Cmd returns through raft's future.
type Result struct {
	Added  bool                `json:"added"`            // rule.set: a new id; rule.del: it existed
	Exists bool                `json:"exists,omitempty"` // rule.create: refused, the id is taken
	Err    string              `json:"err"`              // a refusal, as the user should read it
	Change *rules.ChangeResult `json:"change,omitempty"` // rules.change: what it did
}

// FSM applies the meta group's entries. Readers get immutable copies
// through view and ruleSet; all methods are safe for concurrent use.
type FSM struct {
	mu      sync.Mutex
	state   State
	view    atomic.Pointer[State] // a copy of state, replaced on change
	rules   atomic.Pointer[rules.Set]
	blocks  atomic.Pointer[rules.BlockTable] // nil when no block is held; written under mu
	applied atomic.Uint64
	// blocksPruned is the entry time expired blocks were last dropped at.
	blocksPruned int64
	// blocksMade counts the blocks applied here, by source (a rule id or
	// "manual"); under mu.
	blocksMade map[string]uint64
	// blocksDropped counts the blocks dropped to stay within a block.set's
	// Max (--max-blocks).
	blocksDropped atomic.Uint64
	// bytes, if not nil, is kept at the blocks' memory
	// (ClusterConfig.BlockBytes).
	bytes *atomic.Int64
	// done holds the answers of the requests applied last (Cmd.Req),
	// doneRing their names: in the order applied until it holds MaxDone,
	// then a ring whose oldest is at doneNext; under mu.
	done     map[string]Result
	doneRing []string
	doneNext int
}

// New returns the FSM of an empty meta group. If blockBytes is not nil, it
// is kept at the memory the blocks take (ClusterConfig.BlockBytes).
func New(blockBytes *atomic.Int64) *FSM {
	f := &FSM{state: emptyState(), done: map[string]Result{}, bytes: blockBytes}
	f.publish(true)
	return f
}

func emptyState() State {
	return State{Version: version, Placement: map[int][]string{}, Nodes: map[string]NodeInfo{}, Rules: map[string]rules.Rule{}}
}

// Apply applies one committed entry (raft.FSM).
func (f *FSM) Apply(l *raft.Log) any {
	defer f.applied.Store(l.Index)
	if l.Type != raft.LogCommand {
		return nil
	}
	var c Cmd
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return Result{Err: fmt.Sprintf("ERR corrupt meta entry %d: %v", l.Index, err)}
	}
	f.mu.Lock()
	if res, ok := f.done[c.Req]; ok && c.Req != "" {
		f.mu.Unlock()
		return res // applied already: answered as then, nothing changes
	}
	at := c.At // 0: an entry without a time drops no block
	if at == 0 && !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	res := f.apply(c, at)
	f.remember(c.Req, res)
	f.publish(strings.HasPrefix(c.Op, "rule"))
	f.mu.Unlock()
	return res
}

// apply changes the state by c, made at now (the time in its log entry,
// the same on every node). Call with mu held.
func (f *FSM) apply(c Cmd, now int64) Result {
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
			return Result{Err: "ERR the cluster is not initialised yet"}
		}
		n := *c.Node
		n.Leaving = false
		s.Nodes[n.ID] = n
		s.Placement = Placement(ActiveNodes(s), s.Groups)
	case "leave":
		n, ok := s.Nodes[c.ID]
		if !ok {
			return Result{Err: fmt.Sprintf("ERR no node %q in the cluster", c.ID)}
		}
		if !n.Leaving && len(ActiveNodes(s)) <= 1 {
			return Result{Err: "ERR the last node cannot leave"}
		}
		n.Leaving = true
		s.Nodes[c.ID] = n
		s.Placement = Placement(ActiveNodes(s), s.Groups)
	case "forget":
		if n, ok := s.Nodes[c.ID]; ok && n.Leaving {
			delete(s.Nodes, c.ID)
		}
	case "rule.set", "rule.create":
		if c.Rule == nil {
			return Result{Err: "ERR rule missing"}
		}
		_, exists := s.Rules[c.Rule.ID]
		if c.Op == "rule.create" && exists {
			return Result{Exists: true, Err: fmt.Sprintf("%v: %q", rules.ErrExists, c.Rule.ID)}
		}
		if _, err := rules.Compile(*c.Rule, 0); err != nil {
			return Result{Err: err.Error()}
		}
		s.Rules[c.Rule.ID] = *c.Rule
		return Result{Added: !exists}
	case "rule.del":
		_, exists := s.Rules[c.ID]
		delete(s.Rules, c.ID)
		return Result{Added: exists}
	case "rules.change":
		return applyChange(s, c.Change)
	case "block.set", "block.del":
		return f.applyBlock(c, now)
	default:
		return Result{Err: fmt.Sprintf("ERR unknown meta command %q", c.Op)}
	}
	return Result{}
}

// applyChange applies a rules.change to s: every rule of ch or none.
func applyChange(s *State, ch *rules.Change) Result {
	if ch == nil {
		return Result{Err: "ERR change missing"}
	}
	if _, err := ch.Compile(); err != nil {
		return Result{Err: err.Error()}
	}
	var res rules.ChangeResult
	for _, id := range ch.Delete {
		if _, ok := s.Rules[id]; ok {
			delete(s.Rules, id)
			res.Deleted++
		}
	}
	for _, r := range ch.Set {
		if _, ok := s.Rules[r.ID]; ok {
			res.Replaced++
		} else {
			res.Added++
		}
		s.Rules[r.ID] = r
	}
	return Result{Change: &res}
}

// remember records the answer of request req (none if ""), forgetting
// the oldest beyond MaxDone. Call with mu held.
func (f *FSM) remember(req string, res Result) {
	if req == "" {
		return
	}
	f.done[req] = res
	if len(f.doneRing) < MaxDone {
		f.doneRing = append(f.doneRing, req)
		return
	}
	delete(f.done, f.doneRing[f.doneNext])
	f.doneRing[f.doneNext] = req
	f.doneNext = (f.doneNext + 1) % MaxDone
}

// doneOrder returns the requests remembered, oldest first. Call with mu
// held.
func (f *FSM) doneOrder() []string {
	return append(append([]string(nil), f.doneRing[f.doneNext:]...), f.doneRing[:f.doneNext]...)
}

// applyBlock applies a block.set or block.del at now to the block table
// (kept beside the state, not in it, so that a change copies a bucket of
// the table rather than every block). The blocks expired at now are
// dropped at most once a second of entry time. block.del's result says
// whether a live block was lifted. Call with mu held.
func (f *FSM) applyBlock(c Cmd, now int64) Result {
	t := f.blocks.Load()
	if now != 0 && now-f.blocksPruned >= int64(time.Second) {
		t, f.blocksPruned = t.Pruned(now), now
	}
	var res Result
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
		var dropped int
		t, dropped = t.WithCapped(b, c.Max)
		f.blocksDropped.Add(uint64(dropped))
		src := b.Rule
		if src == "" {
			src = "manual"
		}
		if f.blocksMade == nil {
			f.blocksMade = map[string]uint64{}
		}
		f.blocksMade[src]++
	}
	f.storeBlocks(t)
	return res
}

// storeBlocks publishes t (nil when empty) and its memory. Call with mu
// held.
func (f *FSM) storeBlocks(t *rules.BlockTable) {
	if t.Len() == 0 {
		t = nil
	}
	f.blocks.Store(t)
	if f.bytes != nil {
		f.bytes.Store(t.Bytes())
	}
}

// publish replaces the readers' copies of the state; the rules are copied
// and compiled again only if rulesChanged (a block or membership change
// costs nothing per rule). Call with mu held.
func (f *FSM) publish(rulesChanged bool) {
	prev := f.view.Load()
	if prev == nil {
		rulesChanged = true
	}
	cp := cloneState(f.state, rulesChanged)
	if !rulesChanged {
		cp.Rules = prev.Rules // unchanged, and readers do not change it
	}
	f.view.Store(&cp)
	if !rulesChanged {
		return
	}
	compiled := make([]*rules.Compiled, 0, len(cp.Rules))
	for _, r := range cp.Rules {
		if c, err := rules.Compile(r, 0); err == nil {
			compiled = append(compiled, c)
		}
	}
	f.rules.Store(rules.NewSet(compiled...))
}

// cloneState returns a copy of s, its rules too if withRules (else the
// copy has none).
func cloneState(s State, withRules bool) State {
	cp := State{Version: s.Version, Groups: s.Groups, Placement: make(map[int][]string, len(s.Placement)),
		Nodes: make(map[string]NodeInfo, len(s.Nodes))}
	for g, v := range s.Placement {
		cp.Placement[g] = append([]string(nil), v...)
	}
	for k, v := range s.Nodes {
		cp.Nodes[k] = v
	}
	if withRules {
		cp.Rules = make(map[string]rules.Rule, len(s.Rules))
		for k, v := range s.Rules {
			cp.Rules[k] = v
		}
	}
	return cp
}

// Current returns the state as of the last entry applied; the caller must
// not change it.
func (f *FSM) Current() *State { return f.view.Load() }

// Rules returns the rules as of the last entry applied.
func (f *FSM) Rules() *rules.Set { return f.rules.Load() }

// Blocks returns the blocks as of the last entry applied, nil if none.
func (f *FSM) Blocks() *rules.BlockTable { return f.blocks.Load() }

// Applied returns the index of the last entry applied.
func (f *FSM) Applied() uint64 { return f.applied.Load() }

// BlocksDropped returns how many blocks were dropped to stay within a
// block.set's Max (--max-blocks).
func (f *FSM) BlocksDropped() uint64 { return f.blocksDropped.Load() }

// BlocksMade returns a copy of the counts of blocks applied here, by
// source (a rule id or "manual").
func (f *FSM) BlocksMade() map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]uint64, len(f.blocksMade))
	for k, v := range f.blocksMade {
		out[k] = v
	}
	return out
}

// errSnapshot is returned for a meta snapshot that cannot be read.
var errSnapshot = errors.New("cluster: corrupt meta snapshot")

// Snapshot returns the state to persist (raft.FSM).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	st := *f.Current() // as of the last entry applied, with the blocks and requests below
	blocks := f.Blocks()
	order := f.doneOrder()
	st.Done = make([]doneReq, len(order))
	for i, req := range order {
		st.Done[i] = doneReq{Req: req, Result: f.done[req]}
	}
	f.mu.Unlock()
	if all := blocks.All(); len(all) > 0 {
		st.Blocks = make(map[string]rules.Block, len(all))
		for _, b := range all {
			st.Blocks[b.Identifier] = b
		}
	}
	return snapshot{state: st}, nil
}

// Restore replaces the state with the snapshot's (raft.FSM).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var s State
	if err := json.NewDecoder(rc).Decode(&s); err != nil {
		return fmt.Errorf("%w: %v", errSnapshot, err)
	}
	if s.Version != version {
		return fmt.Errorf("%w: version %d", errSnapshot, s.Version)
	}
	fresh := emptyState()
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
	f.storeBlocks(rules.NewBlockTable(blocks...))
	f.blocksPruned = 0
	f.done, f.doneRing, f.doneNext = map[string]Result{}, nil, 0
	for _, d := range s.Done {
		f.remember(d.Req, d.Result)
	}
	f.publish(true)
	f.mu.Unlock()
	return nil
}

type snapshot struct{ state State }

// Persist writes the state as JSON.
func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s.state); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release does nothing.
func (s snapshot) Release() {}

// SortedRules returns the rules of s in id order.
func SortedRules(s *State) []rules.Rule {
	out := make([]rules.Rule, 0, len(s.Rules))
	for _, r := range s.Rules {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ActiveNodes returns the ids of the nodes that are not leaving. Call with
// the state's lock held, or on a copy.
func ActiveNodes(s *State) []string {
	var ids []string
	for id, n := range s.Nodes {
		if !n.Leaving {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// Placement returns the voters of each of groups data groups over the
// nodes ids: group g (1-based) has up to three voters, starting at node
// (g-1) mod n in id order, which is its preferred leader, so that leaders
// spread evenly.
func Placement(ids []string, groups int) map[int][]string {
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
