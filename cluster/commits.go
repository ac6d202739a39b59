package cluster

import (
	"context"
	"errors"
)

// commits tells when the changes a node made are committed: the server's
// Committer and the HTTP API's Durable, for Node and Cluster alike, which
// embed it.
type commits struct{ app *applier }

// Strong reports whether every reply waits for its changes to commit.
func (c commits) Strong() bool { return c.app.strong }

// Pending returns the sequence number (epoch) that covers every change
// made so far, for Committed.
func (c commits) Pending() uint64 { return c.app.Pending() }

// Committed reports whether every change covered by seq is in the log (in
// a cluster, on a majority of its group's voters), or the error that keeps
// it out.
func (c commits) Committed(seq uint64) (bool, error) { return c.app.Committed(seq) }

// Kick asks for the changes made so far to be written to the log now.
func (c commits) Kick() { c.app.Kick() }

// Lagging reports whether the log is so far behind that fast-mode replies
// must wait, and the sequence number to wait for.
func (c commits) Lagging() (uint64, bool) { return c.app.Lagging() }

// OnCommit registers fn, called (from one goroutine, which it must not
// block) whenever more changes are committed, some are lost, or the log
// fails.
func (c commits) OnCommit(fn func()) { c.app.OnCommit(fn) }

// Sync waits until every change made before it is committed, for callers
// that may block (HTTP handlers): an error says why they are not.
func (c commits) Sync(ctx context.Context) error {
	return c.waitFor(ctx, c.app.Pending())
}

// Settle waits until an answer may go out, for callers that may block
// (HTTP handlers): after a change (change true) or any answer in strong
// mode, until every change made so far is committed; after a check in
// fast mode, only while the log lags (see Lagging). An error says why the
// changes are not committed.
func (c commits) Settle(ctx context.Context, change bool) error {
	seq := c.app.Pending()
	if !change && !c.Strong() {
		var lagging bool
		if seq, lagging = c.app.Lagging(); !lagging {
			return nil
		}
	}
	return c.waitFor(ctx, seq)
}

func (c commits) waitFor(ctx context.Context, seq uint64) error {
	err := c.app.wait(seq, ctx.Done())
	if errors.Is(err, errWaitAbandoned) {
		return ctx.Err()
	}
	return err
}
