package pulse

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// QuietTransport is a group's raft transport (NoPipeline over the node's
// listener) with its heartbeats carried by the node's pulse, and with the
// empty appends raft's replication sends every CommitTimeout answered here
// while nothing changed.
//
// A heartbeat is answered here as the follower's replica answered the
// group's last one, if that came with a tick sent within fresh: raft's
// heartbeat goroutine then does not wait for the next tick (up to a
// period), and the leader's lease counts the follower as contacted as
// long as the ticks come back (see Fresh).
//
// raft sends a follower an empty AppendEntries every CommitTimeout so that
// it learns the commit index when writes stop. Once one such append was
// acknowledged, the same one again (same term, previous entry and commit
// index) tells the follower nothing new; it is answered with the
// acknowledged response as long as the follower's node answered a tick
// within fresh and the replica's last heartbeat answer has the same term,
// the same last log index and the same epoch (so not a replica restarted since, which would
// have to learn the commit index again). Anything else goes to the
// follower: an append with entries, a new commit index, a newer term, a
// follower whose heartbeats failed or are older than fresh.
type QuietTransport struct {
	NoPipeline
	group uint32
	pulse *Pulse
	fresh time.Duration

	mu    sync.Mutex
	epoch uint64                           // of this transport's heartbeat handler
	acked map[raft.ServerAddress]ackedIdle // the last empty append each peer acknowledged
}

// quietStale bounds, in fresh periods, the age of a group's last
// heartbeat answer an idle append is answered on: the group's heartbeats
// go with every tick or the next, so an older answer means they stopped.
const quietStale = 3

// ackedIdle is an empty append a follower acknowledged: the request's key
// fields, the response, and the epoch of the follower's replica then.
type ackedIdle struct {
	term, prevIndex, prevTerm, commit uint64
	epoch                             uint64
	resp                              raft.AppendEntriesResponse
}

// NewQuietTransport wraps trans, group's transport, over pulse p; fresh
// is how recently a follower must have answered a tick for a heartbeat
// or an idle append to be answered in its stead (Fresh).
func NewQuietTransport(trans NoPipeline, group uint32, p *Pulse, fresh time.Duration) *QuietTransport {
	return &QuietTransport{NoPipeline: trans, group: group, pulse: p, fresh: fresh, acked: map[raft.ServerAddress]ackedIdle{}}
}

// AppendEntries sends a heartbeat with the pulse's next tick, answers an
// empty append that repeats the last acknowledged one while the follower
// is heard, and sends anything else itself.
func (t *QuietTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if isHeartbeat(req) {
		if r, ok := t.freshBeat(target, req); ok {
			t.pulse.post(t.group, target, req)
			*resp = r
			return nil
		}
		return t.pulse.heartbeat(t.group, target, req, resp, func() error {
			return t.NoPipeline.AppendEntries(id, target, req, resp)
		})
	}
	if len(req.Entries) > 0 {
		return t.NoPipeline.AppendEntries(id, target, req, resp)
	}
	seen, heard := t.pulse.seen(target, t.group)
	if a, ok := t.unchanged(target, req, seen, heard); ok {
		*resp = a.resp
		return nil
	}
	err := t.NoPipeline.AppendEntries(id, target, req, resp)
	t.note(target, req, resp, err, seen, heard)
	return err
}

// freshBeat returns the answer to heartbeat req that target's replica
// gave in a tick sent within fresh, if it accepted one of this term: a
// replica that answered so recently is taken to be there still. The
// heartbeat then goes with the next tick (post), whose answer replaces
// this one, and the caller does not wait for it; an answer that refuses
// it (a newer term) or a tick that fails removes it, and the next
// heartbeat waits for its tick again.
func (t *QuietTransport) freshBeat(target raft.ServerAddress, req *raft.AppendEntriesRequest) (raft.AppendEntriesResponse, bool) {
	seen, ok := t.pulse.seen(target, t.group)
	if !ok || !seen.resp.Success || seen.resp.Term != req.Term || t.pulse.now().Sub(seen.sent) > t.fresh {
		return raft.AppendEntriesResponse{}, false
	}
	return seen.resp, true
}

// unchanged returns the acknowledgement of the empty append target last
// acknowledged, if req repeats it and target's replica is heard with
// nothing changed since.
func (t *QuietTransport) unchanged(target raft.ServerAddress, req *raft.AppendEntriesRequest, seen beatSeen, heard bool) (ackedIdle, bool) {
	if now := t.pulse.now(); !heard || now.Sub(seen.heard) > t.fresh || now.Sub(seen.at) > quietStale*t.fresh {
		return ackedIdle{}, false
	}
	t.mu.Lock()
	a, ok := t.acked[target]
	t.mu.Unlock()
	if !ok || a.term != req.Term || a.prevIndex != req.PrevLogEntry || a.prevTerm != req.PrevLogTerm ||
		a.commit != req.LeaderCommitIndex || a.epoch != seen.epoch ||
		seen.resp.Term != req.Term || seen.resp.LastLog != a.resp.LastLog {
		return ackedIdle{}, false
	}
	return a, true
}

// note remembers an empty append target acknowledged, if its replica's
// epoch was known before it was sent and still is: a replica that
// restarted meanwhile may not have had it.
func (t *QuietTransport) note(target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, err error, before beatSeen, heard bool) {
	after, still := t.pulse.seen(target, t.group)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil || !resp.Success || resp.Term != req.Term || !heard || !still || after.epoch != before.epoch {
		delete(t.acked, target)
		return
	}
	t.acked[target] = ackedIdle{term: req.Term, prevIndex: req.PrevLogEntry, prevTerm: req.PrevLogTerm,
		commit: req.LeaderCommitIndex, epoch: before.epoch, resp: *resp}
}

// SetHeartbeatHandler gives raft's heartbeat handler to the pulse (for the
// ticks of nodes that coalesce) and to the raft transport (for the
// heartbeats of nodes that do not).
func (t *QuietTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.NoPipeline.SetHeartbeatHandler(cb)
	epoch := t.pulse.serve(t.group, cb)
	t.mu.Lock()
	t.epoch = epoch
	t.mu.Unlock()
}

// Close unregisters the group's heartbeat handler and closes the raft
// transport (raft's Shutdown calls it).
func (t *QuietTransport) Close() error {
	t.mu.Lock()
	epoch := t.epoch
	t.mu.Unlock()
	t.pulse.unserve(t.group, epoch)
	return t.NoPipeline.Close()
}

// Period is how often, at most, the pulse sends one peer the heartbeats
// waiting for it, for raft's heartbeat timeout heartbeat: raft's own
// heartbeat interval at its longest (raft waits between a tenth and a
// fifth of the heartbeat timeout between two heartbeats), so that a
// follower hears its leader as often as before, in one message for all
// the groups.
func Period(heartbeat time.Duration) time.Duration { return heartbeat / 5 }

// RelaxedPeriod is the period of a pulse whose followers wait longer
// while they hear their leader (cluster's fast mode): two thirds of the
// heartbeat timeout, 200 ms at the defaults, a third as many ticks.
func RelaxedPeriod(heartbeat time.Duration) time.Duration { return 2 * heartbeat / 3 }

// Fresh is how recently, for ticks every period, a follower must have
// answered a tick for a heartbeat or an idle append to be answered in its
// stead: a tick and a half, so that the next tick's answer comes before
// the last one's is stale. A leader cut off from its followers then steps
// down at most Fresh later than raft alone would make it: 90 ms with ticks
// every 60 ms, 300 ms with ticks every 200 ms.
func Fresh(period time.Duration) time.Duration { return 3 * period / 2 }

// NoPipeline is raft's NetworkTransport without append pipelines: a leader
// replicates with one AppendEntries round trip at a time (each carrying up
// to MaxAppendEntries entries). raft v1.7's pipeline can deadlock: once its
// decoder stops on a failed append (a follower that restarted and must be
// sent older entries, a newer term), nothing reads the finished appends,
// and a leader with a backlog to send fills the pipeline and blocks for
// good — that follower is never replicated to again and the raft never
// shuts down (seen under load: Close waited for it for minutes). Our
// leaders send few, large entries (one per flush, or one in flight in
// strong mode), which the pipeline does not speed up.
type NoPipeline struct{ *raft.NetworkTransport }

// AppendEntriesPipeline declines: raft then replicates without a pipeline.
func (NoPipeline) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}
