package load

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/slots"
)

// Cluster is a client's view of a Redis Cluster (rlserver's included):
// the node serving each slot, read with CLUSTER SLOTS and corrected by
// MOVED replies, and the counts of what routing met (Stats). The Routers
// of one run share one Cluster. Safe for concurrent use.
type Cluster struct {
	Stats Stats
	// MinRefresh is the least time between two reloads of the slot map
	// (100 ms): the Routers of a run ask for one on every routing error,
	// and all but the first within MinRefresh are skipped.
	MinRefresh time.Duration

	password string
	m        atomic.Pointer[slotMap]
	mu       sync.Mutex // serialises reloads and MOVED updates
	seeds    []string
	lastLoad time.Time
	next     int // rotates the node asked for the map
}

// slotMap is one version of the map; never changed once stored.
type slotMap struct {
	addrs []string
	owner [slots.Count]uint8 // index+1 into addrs; 0: no node known
}

// addrFor returns the node serving slot, or the any-th node for a command
// without a key (slot -1) or a slot no node serves.
func (m *slotMap) addrFor(slot, any int) string {
	if slot >= 0 && m.owner[slot] > 0 {
		return m.addrs[m.owner[slot]-1]
	}
	return m.addrs[any%len(m.addrs)]
}

// Stats counts what the Routers of a Cluster met. Safe for concurrent use.
type Stats struct {
	Redirects   atomic.Uint64 // MOVED replies, each followed by a resend
	TryAgain    atomic.Uint64 // TRYAGAIN replies, each followed by a pause and a resend
	ClusterDown atomic.Uint64 // CLUSTERDOWN replies, the same
	ConnErrors  atomic.Uint64 // nodes that could not be dialled, written to or read from
	Refreshes   atomic.Uint64 // reloads of the slot map (CLUSTER SLOTS)

	mu    sync.Mutex
	first map[string]string // kind → the first message of that kind
}

// StatsSnapshot is a copy of Stats' counters.
type StatsSnapshot struct {
	Redirects   uint64            `json:"redirects"`
	TryAgain    uint64            `json:"tryagain"`
	ClusterDown uint64            `json:"clusterdown"`
	ConnErrors  uint64            `json:"conn_errors"`
	Refreshes   uint64            `json:"slot_refreshes"`
	First       map[string]string `json:"first,omitempty"` // by kind: moved, tryagain, clusterdown, conn
}

// Snapshot returns the counters now.
func (s *Stats) Snapshot() StatsSnapshot {
	s.mu.Lock()
	first := make(map[string]string, len(s.first))
	for k, v := range s.first {
		first[k] = v
	}
	s.mu.Unlock()
	return StatsSnapshot{Redirects: s.Redirects.Load(), TryAgain: s.TryAgain.Load(), ClusterDown: s.ClusterDown.Load(),
		ConnErrors: s.ConnErrors.Load(), Refreshes: s.Refreshes.Load(), First: first}
}

// Sub returns the counts of s since an earlier snapshot o.
func (s StatsSnapshot) Sub(o StatsSnapshot) StatsSnapshot {
	s.Redirects -= o.Redirects
	s.TryAgain -= o.TryAgain
	s.ClusterDown -= o.ClusterDown
	s.ConnErrors -= o.ConnErrors
	s.Refreshes -= o.Refreshes
	return s
}

func (s *Stats) count(c *atomic.Uint64, kind, msg string) {
	if c.Add(1) > 1 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == nil {
		s.first = map[string]string{}
	}
	if _, ok := s.first[kind]; !ok {
		s.first[kind] = msg
	}
}

// NewCluster reads CLUSTER SLOTS from the first of seeds that answers,
// trying again until ctx ends.
func NewCluster(ctx context.Context, seeds []string, password string) (*Cluster, error) {
	if len(seeds) == 0 {
		return nil, errors.New("load: a cluster needs a node address")
	}
	c := &Cluster{MinRefresh: 100 * time.Millisecond, password: password, seeds: append([]string(nil), seeds...)}
	for {
		err := c.load()
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("load: CLUSTER SLOTS: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addrs returns the nodes that serve slots, as last loaded.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.m.Load().addrs...) }

// AddrFor returns the node that serves slot, as last loaded.
func (c *Cluster) AddrFor(slot int) string { return c.m.Load().addrFor(slot, 0) }

// Refresh reloads the slot map unless it was (re)loaded less than
// MinRefresh ago; it reports whether it did. A Router calls it after a
// routing error.
func (c *Cluster) Refresh() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.lastLoad) < c.MinRefresh {
		return false
	}
	return c.load() == nil
}

// load asks the known nodes in turn for CLUSTER SLOTS and stores the
// first answer. Called with mu held, or before c is shared.
func (c *Cluster) load() error {
	c.lastLoad = time.Now()
	var cands []string
	seen := map[string]bool{}
	if m := c.m.Load(); m != nil {
		cands = append(cands, m.addrs...)
	}
	cands = append(cands, c.seeds...)
	var uniq []string
	for _, a := range cands {
		if !seen[a] {
			seen[a] = true
			uniq = append(uniq, a)
		}
	}
	err := errors.New("no node answered")
	for k := range uniq {
		addr := uniq[(c.next+k)%len(uniq)]
		var m *slotMap
		if m, err = fetchSlots(addr, c.password); err == nil {
			c.next += k + 1
			c.m.Store(m)
			c.Stats.Refreshes.Add(1)
			return nil
		}
	}
	return err
}

// moved records that slot is served by addr, as a MOVED reply said.
func (c *Cluster) moved(slot int, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if slot < 0 || slot >= slots.Count || old.addrFor(slot, 0) == addr && old.owner[slot] > 0 {
		return
	}
	m := &slotMap{addrs: old.addrs, owner: old.owner}
	i := 0
	for ; i < len(m.addrs) && m.addrs[i] != addr; i++ {
	}
	if i == len(m.addrs) {
		if i >= 255 {
			return
		}
		m.addrs = append(append([]string(nil), old.addrs...), addr)
	}
	m.owner[slot] = uint8(i + 1)
	c.m.Store(m)
}

// fetchSlots reads CLUSTER SLOTS from addr on a connection of its own.
func fetchSlots(addr, password string) (*slotMap, error) {
	nc, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Second))
	rd := newReplyReader(nc)
	if password != "" {
		if _, err := do(nc, rd, "AUTH", password); err != nil {
			return nil, err
		}
	}
	raw, err := do(nc, rd, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	return parseSlots([]byte(raw))
}

// parseSlots turns a CLUSTER SLOTS reply into a slotMap: each element is
// [first, last, [host, port, id...], replicas...]; the first node is
// the one that serves the range.
func parseSlots(raw []byte) (*slotMap, error) {
	v, _, err := parseValue(raw, 0)
	if err != nil {
		return nil, err
	}
	ranges, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("load: CLUSTER SLOTS replied %q", raw)
	}
	m := &slotMap{}
	index := map[string]int{}
	for _, r := range ranges {
		e, ok := r.([]any)
		if !ok || len(e) < 3 {
			return nil, fmt.Errorf("load: CLUSTER SLOTS: bad range %v", r)
		}
		first, ok1 := e[0].(int64)
		last, ok2 := e[1].(int64)
		node, ok3 := e[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(node) < 2 || first < 0 || last >= slots.Count || first > last {
			return nil, fmt.Errorf("load: CLUSTER SLOTS: bad range %v", r)
		}
		host, _ := node[0].(string)
		port, ok := node[1].(int64)
		if !ok || host == "" || host == "?" {
			return nil, fmt.Errorf("load: CLUSTER SLOTS: bad node %v", node)
		}
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		i, ok := index[addr]
		if !ok {
			if len(m.addrs) == 255 {
				return nil, errors.New("load: more than 255 nodes")
			}
			m.addrs = append(m.addrs, addr)
			i = len(m.addrs)
			index[addr] = i
		}
		for s := first; s <= last; s++ {
			m.owner[s] = uint8(i)
		}
	}
	if len(m.addrs) == 0 {
		return nil, errors.New("load: CLUSTER SLOTS: no slot is served")
	}
	return m, nil
}

// parseValue decodes the RESP value at b[i]: a string for simple and
// bulk strings and errors, an int64 for integers, nil for null, []any
// for arrays. It returns the offset after it.
func parseValue(b []byte, i int) (any, int, error) {
	end, err := skipReply(b, i)
	if err != nil {
		return nil, 0, err
	}
	if end < 0 {
		return nil, 0, errProtocol
	}
	line, next := lineAt(b, i+1)
	switch b[i] {
	case '+', '-':
		return string(line), end, nil
	case ':':
		n, ok := atoi(line)
		if !ok {
			return nil, 0, errProtocol
		}
		return int64(n), end, nil
	case '$':
		if n, _ := atoi(line); n < 0 {
			return nil, end, nil
		}
		return string(b[next : end-2]), end, nil
	case '*':
		n, _ := atoi(line)
		if n < 0 {
			return nil, end, nil
		}
		out := make([]any, 0, n)
		for range n {
			v, after, err := parseValue(b, next)
			if err != nil {
				return nil, 0, err
			}
			out = append(out, v)
			next = after
		}
		return out, end, nil
	}
	return nil, 0, fmt.Errorf("load: unexpected reply type %q", b[i])
}
