// Package pulse carries a node's raft heartbeats to the other nodes,
// coalesced: every heartbeat this node's group leaders send to one other
// node travels in one internal call per tick (Method), and the receiving
// node runs each through its group's raft heartbeat handler, in process.
// An idle cluster then exchanges one small message per node pair per tick
// instead of a raft RPC per group, per follower, every tenth of the
// heartbeat timeout (see cluster/DESIGN.md, "Idle cost").
//
// Nothing is sent that raft did not ask for: a tick carries exactly the
// heartbeats raft's replication goroutines are waiting on (each waits for
// the tick's answer, as for a raft RPC), so a leader that steps down stops
// sending them, and a follower's lastContact is refreshed only by a
// leader that is alive and leading.
//
// QuietTransport (quiet.go) is a group's raft transport over the pulse:
// it sends the heartbeats with the ticks and answers, while nothing
// changed, the empty appends raft sends every CommitTimeout.
//
// The package knows nothing of package cluster: a Pulse makes its calls
// through a Caller (transport.Mux.Call) and learns the node's status mark
// through Mark and Marked.
package pulse

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/transport"
	"github.com/rlserver/rlserver/internal/wire"
)

// Method is the internal call that carries a tick's heartbeats.
const Method = "raft.hb"

// MaxGroup is the largest group id a tick carries (cluster.MaxGroups).
const MaxGroup = 1024

// errNoReplica is a heartbeat's error when the node it went to has no
// running replica of the group.
var errNoReplica = errors.New("cluster: no replica of the group on that node")

// errPulseStopped is a heartbeat's error once the node is closing.
var errPulseStopped = errors.New("cluster: heartbeats stopped")

// Caller makes one internal call (transport.Mux.Call).
type Caller func(ctx context.Context, addr, method string, body []byte) ([]byte, error)

// Pulse coalesces this node's raft heartbeats per peer node and serves the
// peers' ticks to this node's groups.
type Pulse struct {
	call    Caller
	period  time.Duration // at most one tick per peer per period
	timeout time.Duration // a tick's call waits this long for its answer
	now     func() time.Time
	done    chan struct{}
	// self names this node in ticks and answers; Mark, if set, returns
	// this node's status mark, sent with them, and Marked hears another
	// node's (see cluster's Cluster.statusMark). Both are set before the
	// first tick.
	self   string
	Mark   func() uint64
	Marked func(node string, mark uint64)

	mu       sync.Mutex
	stopped  bool
	peers    map[raft.ServerAddress]*pulsePeer
	handlers map[uint32]beatHandler // this node's groups, by id
}

// beatHandler is a group's raft heartbeat fast path (raft's
// SetHeartbeatHandler) and the epoch that names this registration: a new
// raft for the group, here or after a restart, has another epoch.
type beatHandler struct {
	fn    func(raft.RPC)
	epoch uint64
}

// New returns node self's pulse, which ticks at most every period, makes
// its calls with call and waits timeout for a tick's answer.
func New(self string, call Caller, period, timeout time.Duration, now func() time.Time) *Pulse {
	return &Pulse{self: self, call: call, period: period, timeout: timeout, now: now, done: make(chan struct{}),
		peers: map[raft.ServerAddress]*pulsePeer{}, handlers: map[uint32]beatHandler{}}
}

// appendMark appends this node's name and status mark (0: none).
func (p *Pulse) appendMark(out []byte) []byte {
	var m uint64
	if p.Mark != nil {
		m = p.Mark()
	}
	return binary.AppendUvarint(appendBytes(out, []byte(p.self)), m)
}

// readMark reads a node's name and status mark and passes them on.
func (p *Pulse) readMark(d *wire.Decoder) {
	node, m := d.Bytes(), d.Uvarint()
	if !d.Bad && m != 0 && p.Marked != nil {
		p.Marked(string(node), m)
	}
}

// Stop ends the ticks: heartbeats waiting and to come fail.
func (p *Pulse) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		close(p.done)
	}
}

// serve registers group's heartbeat handler and returns its epoch; a nil
// fn unregisters it.
func (p *Pulse) serve(group uint32, fn func(raft.RPC)) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fn == nil {
		delete(p.handlers, group)
		return 0
	}
	h := beatHandler{fn: fn, epoch: randomEpoch()}
	p.handlers[group] = h
	return h.epoch
}

// unserve unregisters group's handler if it is still the one of epoch.
func (p *Pulse) unserve(group uint32, epoch uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.handlers[group]; ok && h.epoch == epoch {
		delete(p.handlers, group)
	}
}

func (p *Pulse) handler(group uint32) (beatHandler, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.handlers[group]
	return h, ok
}

// randomEpoch draws a nonzero number naming one heartbeat registration.
func randomEpoch() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// peer returns the tick state of the node at addr, starting its loop.
func (p *Pulse) peer(addr raft.ServerAddress) (*pulsePeer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil, errPulseStopped
	}
	pp := p.peers[addr]
	if pp == nil {
		pp = &pulsePeer{addr: addr, wake: make(chan struct{}, 1), inflight: make(chan struct{}, ticksInFlight),
			groups: map[uint32]beatSeen{}, posted: map[uint32]*beat{}}
		p.peers[addr] = pp
		go p.run(pp)
	}
	return pp, nil
}

// pulsePeer is the ticks to one other node.
type pulsePeer struct {
	addr raft.ServerAddress
	wake chan struct{} // a heartbeat is waiting

	inflight chan struct{} // one token per tick waiting for its answer

	mu      sync.Mutex
	pending []*beat             // heartbeats whose senders wait for the tick's answer
	posted  map[uint32]*beat    // heartbeats answered already (post), the last one of each group
	armed   bool                // run was woken for what is pending or posted
	groups  map[uint32]beatSeen // each group's last answer from that node
	heard   time.Time           // when that node last answered a tick
}

// arm wakes pp's loop unless it was woken already for what is waiting;
// pp.mu is held.
func (pp *pulsePeer) arm() {
	if pp.armed {
		return
	}
	pp.armed = true
	select {
	case pp.wake <- struct{}{}:
	default:
	}
}

// take returns what the next tick carries: every heartbeat pending, and
// the last one posted of each group that none of those is for.
func (pp *pulsePeer) take() []*beat {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	batch := pp.pending
	pp.pending, pp.armed = nil, false
	for g, b := range pp.posted {
		dup := false
		for _, w := range batch {
			dup = dup || w.group == g
		}
		if !dup {
			batch = append(batch, b)
		}
	}
	clear(pp.posted)
	return batch
}

// beat is one raft heartbeat waiting for its tick. done is closed when
// the tick is answered; a posted heartbeat, which nobody waits for, has
// none.
type beat struct {
	group uint32
	req   *raft.AppendEntriesRequest
	resp  raft.AppendEntriesResponse
	epoch uint64
	err   error
	done  chan struct{}
}

// beatSeen is a group's last heartbeat answer from one node: when it came,
// the epoch of the replica that answered, and when that node last
// answered a tick (for any group). A heartbeat that fails removes its
// group's answer.
type beatSeen struct {
	at    time.Time
	sent  time.Time // of the tick that brought it
	epoch uint64
	resp  raft.AppendEntriesResponse
	heard time.Time
}

// seen returns group's last heartbeat answer from the node at addr.
func (p *Pulse) seen(addr raft.ServerAddress, group uint32) (beatSeen, bool) {
	p.mu.Lock()
	pp := p.peers[addr]
	p.mu.Unlock()
	if pp == nil {
		return beatSeen{}, false
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	s, ok := pp.groups[group]
	s.heard = pp.heard
	return s, ok
}

// heartbeat sends raft's heartbeat req of group to the node at addr with
// the next tick and fills resp with that node's answer. A node that does
// not know the call (an older version) gets it by fallback, the group's
// own raft transport.
func (p *Pulse) heartbeat(group uint32, addr raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, fallback func() error) error {
	pp, err := p.peer(addr)
	if err != nil {
		return err
	}
	b := &beat{group: group, req: req, done: make(chan struct{})}
	pp.mu.Lock()
	pp.pending = append(pp.pending, b)
	pp.arm()
	pp.mu.Unlock()
	select {
	case <-b.done:
	case <-p.done:
		return errPulseStopped
	}
	var remote *transport.RemoteError
	if errors.As(b.err, &remote) {
		return fallback()
	}
	if b.err != nil {
		return b.err
	}
	*resp = b.resp
	return nil
}

// post sends raft's heartbeat req of group to the node at addr with the
// next tick without waiting for its answer: the caller answered it
// already (QuietTransport's fresh answer). The tick's answer still
// becomes the group's last answer from that node (seen).
func (p *Pulse) post(group uint32, addr raft.ServerAddress, req *raft.AppendEntriesRequest) {
	pp, err := p.peer(addr)
	if err != nil {
		return
	}
	pp.mu.Lock()
	pp.posted[group] = &beat{group: group, req: req}
	pp.arm()
	pp.mu.Unlock()
}

// run sends pp's ticks: whenever heartbeats wait, at most one call per
// period, carrying all of them; a tick does not wait for the previous
// one's answer.
func (p *Pulse) run(pp *pulsePeer) {
	var last time.Time
	var pace *time.Timer
	for {
		select {
		case <-pp.wake:
		case <-p.done:
			return
		}
		if wait := last.Add(p.period).Sub(p.now()); wait > 0 {
			if pace == nil {
				pace = time.NewTimer(wait)
			} else {
				pace.Reset(wait)
			}
			select {
			case <-pace.C:
			case <-p.done:
				return
			}
		}
		batch := pp.take()
		if len(batch) == 0 {
			continue
		}
		select { // a slow tick delays no other: up to ticksInFlight overlap
		case pp.inflight <- struct{}{}:
		case <-p.done:
			return
		}
		last = p.now()
		sent := last
		go func() {
			defer func() { <-pp.inflight }()
			p.tick(pp, batch, sent)
		}()
	}
}

// ticksInFlight bounds the ticks to one node that wait for their answers.
const ticksInFlight = 4

// tick makes one call carrying batch, sent at sent, and answers each of
// its heartbeats.
func (p *Pulse) tick(pp *pulsePeer, batch []*beat, sent time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	reply, err := p.call(ctx, string(pp.addr), Method, encodeBeats(p.appendMark(nil), batch))
	cancel()
	if err == nil {
		d := wire.Decoder{B: reply}
		p.readMark(&d)
		err = decodeAnswers(&d, batch)
	}
	at := p.now()
	pp.mu.Lock()
	if err == nil && at.After(pp.heard) {
		pp.heard = at
	}
	for _, b := range batch {
		if err != nil {
			b.err = err
		}
		if old, ok := pp.groups[b.group]; ok && old.sent.After(sent) {
			continue // a later tick answered already
		}
		if b.err == nil && b.resp.Success {
			pp.groups[b.group] = beatSeen{at: at, sent: sent, epoch: b.epoch, resp: b.resp}
		} else {
			delete(pp.groups, b.group)
		}
	}
	pp.mu.Unlock()
	for _, b := range batch {
		if b.done != nil {
			close(b.done)
		}
	}
}

// Answer runs one peer's tick (the body of a Method call) through this
// node's groups' heartbeat handlers and returns their answers.
func (p *Pulse) Answer(body []byte) ([]byte, error) {
	d := wire.Decoder{B: body}
	p.readMark(&d)
	beats, err := decodeBeats(&d)
	if err != nil {
		return nil, err
	}
	out := p.appendMark(make([]byte, 0, 32+len(beats)*32))
	out = binary.AppendUvarint(out, uint64(len(beats)))
	for _, b := range beats {
		out = p.answerOne(out, b)
	}
	return out, nil
}

// answerOne runs heartbeat b through its group's handler and appends the
// answer: 0 (no replica here) or 1, epoch, term, last log, flags.
func (p *Pulse) answerOne(out []byte, b beatIn) []byte {
	h, ok := p.handler(b.group)
	if !ok {
		return append(out, 0)
	}
	ch := make(chan raft.RPCResponse, 1)
	h.fn(raft.RPC{Command: b.req, RespChan: ch})
	var r raft.RPCResponse
	select {
	case r = <-ch: // raft answers a heartbeat before its handler returns
	default: // or not at all: it is shutting down
		return append(out, 0)
	}
	resp, _ := r.Response.(*raft.AppendEntriesResponse)
	if r.Error != nil || resp == nil {
		return append(out, 0)
	}
	out = append(out, 1)
	out = binary.AppendUvarint(out, h.epoch)
	out = binary.AppendUvarint(out, resp.Term)
	out = binary.AppendUvarint(out, resp.LastLog)
	var flags byte
	if resp.Success {
		flags |= 1
	}
	if resp.NoRetryBackoff {
		flags |= 2
	}
	return append(out, flags)
}

// isHeartbeat reports whether req is a raft heartbeat, as raft's own
// transport tells one: no entries, no previous entry, no commit index.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	return req.Term != 0 && (len(req.Addr) > 0 || len(req.Leader) > 0) && req.PrevLogEntry == 0 &&
		req.PrevLogTerm == 0 && len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// errBadBeats is the error of a raft.hb body or answer that does not parse.
var errBadBeats = errors.New("cluster: malformed heartbeat tick")

// beatIn is one heartbeat of a tick received.
type beatIn struct {
	group uint32
	req   *raft.AppendEntriesRequest
}

// encodeBeats appends the heartbeats of a tick to out: a count, then each
// heartbeat's group, protocol version, term, leader id, leader address
// and the older leader field (uvarints, and uvarint-length bytes).
func encodeBeats(out []byte, batch []*beat) []byte {
	out = binary.AppendUvarint(out, uint64(len(batch)))
	for _, b := range batch {
		r := b.req
		out = binary.AppendUvarint(out, uint64(b.group))
		out = binary.AppendUvarint(out, uint64(r.ProtocolVersion))
		out = binary.AppendUvarint(out, r.Term)
		out = appendBytes(out, r.ID)
		out = appendBytes(out, r.Addr)
		out = appendBytes(out, r.Leader)
	}
	return out
}

func appendBytes(out, b []byte) []byte {
	return append(binary.AppendUvarint(out, uint64(len(b))), b...)
}

// maxBeats bounds the heartbeats of one tick: one per group.
const maxBeats = MaxGroup + 1

// decodeBeats parses a tick's heartbeats, the rest of its body.
func decodeBeats(d *wire.Decoder) ([]beatIn, error) {
	n := d.Uvarint()
	if n > maxBeats {
		return nil, fmt.Errorf("%w: %d heartbeats", errBadBeats, n)
	}
	out := make([]beatIn, 0, n)
	for range n {
		group, proto, term := d.Uvarint(), d.Uvarint(), d.Uvarint()
		id, addr, leader := clip(d.Bytes()), clip(d.Bytes()), clip(d.Bytes())
		if d.Bad || group > MaxGroup || proto > 1<<16 {
			return nil, errBadBeats
		}
		out = append(out, beatIn{group: uint32(group), req: &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(proto), ID: id, Addr: addr},
			Term:      term, Leader: leader}})
	}
	if d.Bad || len(d.B) > 0 {
		return nil, errBadBeats
	}
	return out, nil
}

// decodeAnswers parses a tick's reply into its heartbeats: each gets its
// response and epoch, or errNoReplica.
func decodeAnswers(d *wire.Decoder, batch []*beat) error {
	if n := d.Uvarint(); n != uint64(len(batch)) || d.Bad {
		return errBadBeats
	}
	for _, b := range batch {
		if d.Byte() != 1 {
			b.err = errNoReplica
			continue
		}
		b.epoch = d.Uvarint()
		b.resp.Term, b.resp.LastLog = d.Uvarint(), d.Uvarint()
		flags := d.Byte()
		b.resp.Success, b.resp.NoRetryBackoff = flags&1 != 0, flags&2 != 0
	}
	if d.Bad || len(d.B) > 0 {
		return errBadBeats
	}
	return nil
}

// clip returns b with its capacity cut to its length, so that appending
// to a field decoded from a tick never writes over the bytes after it.
func clip(b []byte) []byte { return b[:len(b):len(b)] }
