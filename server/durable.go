package server

import (
	"errors"
	"sync/atomic"
)

// Committer is implemented by a Limiter whose changes reach its log after
// the call that made them returns (cluster.Node). The server then holds the
// replies that must not go out before the changes they report or depend on
// are committed: in strong mode every reply that reads or changes limiter
// state, in any mode the replies of rule changes and FLUSHALL. A batch of
// pipelined requests waits as one, so its replies stay in request order,
// and many connections wait for the same commit.
type Committer interface {
	// Strong reports whether every reply that depends on state waits.
	Strong() bool
	// Pending returns a sequence number that covers every change made so
	// far.
	Pending() uint64
	// Committed reports whether every change covered by seq is committed,
	// or the error that keeps it from being so (the replies then become
	// that error).
	Committed(seq uint64) (bool, error)
	// Kick asks for the changes made so far to be committed soon.
	Kick()
	// OnCommit registers fn, called whenever more changes are committed or
	// the log fails. fn must not block.
	OnCommit(fn func())
	// Lagging reports, for fast mode, whether the log has fallen so far
	// behind that replies must wait after all (so that what a crash can
	// forget stays bounded), and the sequence number to wait for.
	Lagging() (seq uint64, lagging bool)
}

// waitClass says what a command's reply waits for.
type waitClass uint8

const (
	waitNone   waitClass = iota
	waitStrong           // in strong mode, the commit of every change before it
	waitAlways           // always: a change that a clean reply promises is kept
)

// commandWaits gives the commands whose replies wait.
var commandWaits = map[string]waitClass{
	"rl.check": waitStrong, "rl.peek": waitStrong, "rl.reset": waitStrong, "cl.throttle": waitStrong,
	"rl.checkrules": waitStrong, "rl.rule.get": waitStrong, "rl.rule.list": waitStrong,
	"rl.rule.set": waitAlways, "rl.rule.del": waitAlways, "flushall": waitAlways,
	"rl.block": waitAlways, "rl.unblock": waitAlways, "rl.blocks": waitStrong,
	// Scripts read and change the keyspace as the commands of values do
	// (which all wait for strong mode: see commandTable).
	"eval": waitStrong, "evalsha": waitStrong, "eval_ro": waitStrong, "evalsha_ro": waitStrong,
}

// RuleCommitter is implemented by a RuleStore whose rule and block changes
// are committed — in a replicated log of their own, such as a cluster's
// meta group — by the time the calls that make them return. Their replies
// then wait for nothing: the Limiter's Committer (the data groups' log)
// knows nothing of them, and an error it reports (a lead of a data group
// lost meanwhile) would be a lie about a change that is committed.
type RuleCommitter interface {
	CommitsRuleChanges() bool
}

// ruleAndBlockCommands are the commands that change or read only rules and blocks.
var ruleAndBlockCommands = []string{"rl.rule.set", "rl.rule.del", "rl.rule.get", "rl.rule.list", "rl.block", "rl.unblock", "rl.blocks"}

// initRuleWaits makes the rule and block commands wait for nothing when
// the rule store commits its own changes (RuleCommitter).
func (s *Server) initRuleWaits() {
	if rc, ok := s.cfg.Rules.(RuleCommitter); !ok || !rc.CommitsRuleChanges() {
		return
	}
	for _, name := range ruleAndBlockCommands {
		if cmd := s.cmds[name]; cmd != nil {
			cmd.wait = waitNone
		}
	}
}

// errHold is runBatch's answer on an event loop when the batch's replies
// must wait for a commit: the loop parks the connection (loop.hold).
var errHold = errors.New("replies wait for a commit")

// mustWait reports whether the replies of the batch just run must wait for
// a commit, and if so records what they wait for in c.waitSeq and asks for
// it to come soon.
func (s *Server) mustWait(c *conn) bool {
	w := c.wait
	c.wait = waitNone
	if s.committer == nil || w == waitNone {
		return false
	}
	kick, why := true, heldStrong
	switch {
	case w == waitStrong && !s.committer.Strong():
		seq, lagging := s.committer.Lagging()
		if !lagging {
			return false
		}
		c.waitSeq, kick, why = seq, false, heldLagging
	case w == waitAlways:
		c.waitSeq, why = s.committer.Pending(), heldChange
	default:
		c.waitSeq = s.committer.Pending()
	}
	if ok, err := s.committer.Committed(c.waitSeq); ok || err != nil {
		c.replaceReplies(err)
		return false
	}
	if kick {
		s.committer.Kick()
	}
	s.metrics.held[why].Inc()
	return true
}

// Why a batch's replies wait (metrics.held).
const (
	heldStrong = iota
	heldLagging
	heldChange
)

// waitCommit blocks until the changes c's replies wait for are committed,
// or replaces the replies with the error that keeps them from being so.
// For connections with a goroutine of their own.
func (s *Server) waitCommit(c *conn) {
	for {
		ch := *s.commitGen.Load() // before the check: a later commit closes it
		ok, err := s.committer.Committed(c.waitSeq)
		if ok || err != nil {
			c.replaceReplies(err)
			return
		}
		<-ch
	}
}

// replaceReplies replaces the replies of the batch run last with err, one
// error per reply, if err is not nil: a reply that reports a decision the
// log does not hold must not go out.
func (c *conn) replaceReplies(err error) {
	if err == nil {
		return
	}
	c.out = c.out[:c.batchStart]
	msg := replyError(err)
	for i := 0; i < c.nreplies; i++ {
		c.writeError(msg)
	}
}

// onCommit is the Committer's listener: it wakes the connections that
// wait, those with a goroutine through commitGen, those on event loops
// through their loop's wake-up descriptor.
func (s *Server) onCommit() {
	ch := make(chan struct{})
	close(*s.commitGen.Swap(&ch))
	if loops := s.loopList.Load(); loops != nil {
		for _, l := range *loops {
			if l.nwaiting.Load() > 0 {
				l.signal()
			}
		}
	}
}

// initCommitter finds the Limiter's Committer and listens to it.
func (s *Server) initCommitter() {
	ch := make(chan struct{})
	s.commitGen.Store(&ch)
	var ok bool
	if s.committer, ok = s.cfg.Limiter.(Committer); ok {
		s.committer.OnCommit(s.onCommit)
	}
}

// commitState is the part of Server that waiting connections use.
type commitState struct {
	committer Committer                     // the Limiter's, or nil
	commitGen atomic.Pointer[chan struct{}] // closed and replaced by each commit
	loopList  atomic.Pointer[[]*loop]       // the event loops, once started
}
