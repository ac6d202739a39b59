package cluster

import (
	"sync"
	"time"
)

// Errors of the internal calls a node answers while it starts or stops.
// Their first word is TRYAGAIN: the caller retries, on this node or on
// another.
var (
	// ErrStarting: the node's groups are not all open yet.
	ErrStarting error = &transientError{"TRYAGAIN the node is starting"}
	// ErrStopping: the node is stopping; its groups are closing.
	ErrStopping error = &transientError{"TRYAGAIN the node is stopping"}
)

// lifecycle admits the internal calls of other nodes only while every
// group of the node is open: a call that arrives while OpenCluster is
// still making the groups, or once Close has begun to stop them, is
// refused, and Close waits for the calls under way before it stops raft.
// So no handler ever sees a group half made or half closed.
type lifecycle struct {
	mu    sync.RWMutex
	state lifeState
	calls sync.WaitGroup
}

type lifeState int

const (
	lifeStarting lifeState = iota
	lifeOpen
	lifeStopping
)

// enter admits one call; the caller must call leave when it ends.
func (l *lifecycle) enter() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch l.state {
	case lifeStarting:
		return ErrStarting
	case lifeStopping:
		return ErrStopping
	}
	l.calls.Add(1)
	return nil
}

// leave ends a call admitted by enter.
func (l *lifecycle) leave() { l.calls.Done() }

// open admits calls from now on.
func (l *lifecycle) open() {
	l.mu.Lock()
	if l.state == lifeStarting {
		l.state = lifeOpen
	}
	l.mu.Unlock()
}

// stop refuses calls from now on and waits up to d for those under way
// (each is bounded by its caller's deadline; d only guards against one
// that is not).
func (l *lifecycle) stop(d time.Duration) {
	l.mu.Lock()
	l.state = lifeStopping
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		l.calls.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
