package load

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/slots"
)

// Batch is the requests of one round trip, encoded back to back, each
// with the slot it is routed by. Owned by one goroutine.
type Batch struct {
	// Buf holds the requests: append one, then call Add.
	Buf   []byte
	ends  []int
	slots []int
}

// Reset empties b, keeping its memory.
func (b *Batch) Reset() { b.Buf, b.ends, b.slots = b.Buf[:0], b.ends[:0], b.slots[:0] }

// Add ends the request appended to Buf since the last Add or Reset; slot
// is its key's slot, or -1 for a command without a key.
func (b *Batch) Add(slot int) {
	b.ends = append(b.ends, len(b.Buf))
	b.slots = append(b.slots, slot)
}

// AddCommand appends args encoded as RESP, routed by the slot of args[1]
// (if any).
func (b *Batch) AddCommand(args ...string) {
	b.Buf = appendCommand(b.Buf, args)
	slot := -1
	if len(args) > 1 {
		slot = slots.Of([]byte(args[1]))
	}
	b.Add(slot)
}

// Len returns the number of requests.
func (b *Batch) Len() int { return len(b.ends) }

func (b *Batch) request(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.Buf[start:b.ends[i]]
}

// Router is one client's connections to the nodes of a Cluster, one per
// node, each dialled when first needed. Do sends a batch split by node
// and follows the cluster's redirections. Owned by one goroutine.
type Router struct {
	c *Cluster
	// Pause is the wait before a request is sent again after TRYAGAIN,
	// CLUSTERDOWN or a node that could not be reached (10 ms).
	Pause time.Duration
	// Timeout bounds each exchange with a node (5 s); past it the
	// connection counts as failed.
	Timeout time.Duration
	// Clock stamps the replies passed to Do's callback, once per read
	// from a node (default: time.Now().UnixNano()).
	Clock func() int64
	// Any picks the node of commands without a key.
	Any int

	conns   map[string]*nodeConn
	parts   []*nodeConn
	pending []int   // batch indices still to send
	redirs  []uint8 // MOVED replies per batch index during one Do
	pause   bool
}

// nodeConn is a Router's connection to one node and the part of the
// batch being sent to it.
type nodeConn struct {
	addr   string
	nc     net.Conn // nil until dialled, and after a failure
	rw     io.ReadWriter
	rd     *replyReader
	wbuf   []byte
	reqs   []int // batch indices in wbuf, in order
	broken bool  // failed during this round: reqs already queued again
}

// NewRouter returns a Router over c's nodes.
func (c *Cluster) NewRouter() *Router {
	return &Router{c: c, Pause: 10 * time.Millisecond, Timeout: 5 * time.Second,
		Clock: func() int64 { return time.Now().UnixNano() }, conns: map[string]*nodeConn{}}
}

// Connect dials every node that serves slots now.
func (r *Router) Connect() error {
	for _, a := range r.c.Addrs() {
		if err := r.dial(r.conn(a)); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every connection.
func (r *Router) Close() {
	for _, p := range r.conns {
		if p.nc != nil {
			p.nc.Close()
			p.nc = nil
		}
	}
}

func (r *Router) conn(addr string) *nodeConn {
	p := r.conns[addr]
	if p == nil {
		p = &nodeConn{addr: addr}
		r.conns[addr] = p
	}
	return p
}

func (r *Router) dial(p *nodeConn) error {
	if p.nc != nil {
		return nil
	}
	nc, err := net.DialTimeout("tcp", p.addr, time.Second)
	if err != nil {
		return err
	}
	var rw io.ReadWriter = nc
	if raw := newRawConn(nc); raw != nil {
		rw = raw
	}
	p.rd = newReplyReader(rw)
	if r.c.password != "" {
		nc.SetDeadline(time.Now().Add(r.Timeout))
		if _, err := do(nc, p.rd, "AUTH", r.c.password); err != nil {
			nc.Close()
			return err
		}
	}
	p.nc, p.rw = nc, rw
	return nil
}

// Do sends every request of b to the node that serves its slot — each
// node's part in one write, every part written before any is read — and
// reads the nodes' replies in turn, calling onReply(i, reply, at) with
// the final reply of request i (valid only during the call) and the
// Clock when it was read. A MOVED reply updates the slot map and sends
// the request again at once (after a pause from its third MOVED); after
// TRYAGAIN, CLUSTERDOWN or a connection that failed, the slot map is
// reloaded (at most every Cluster.MinRefresh) and the request sent again
// after Pause. Every such event is counted in the Cluster's Stats. Do
// returns when every request has its reply, or, with the requests left,
// once giveUp (if not zero) has passed or ctx has ended.
func (r *Router) Do(ctx context.Context, b *Batch, giveUp time.Time, onReply func(i int, reply []byte, at int64)) (int, error) {
	r.pending = r.pending[:0]
	r.redirs = r.redirs[:0]
	for i := range b.Len() {
		r.pending = append(r.pending, i)
		r.redirs = append(r.redirs, 0)
	}
	for len(r.pending) > 0 {
		if err := ctx.Err(); err != nil {
			return len(r.pending), err
		}
		r.pause = false
		r.send(b)
		r.receive(onReply)
		if len(r.pending) == 0 {
			break
		}
		if !giveUp.IsZero() && time.Now().After(giveUp) {
			return len(r.pending), nil
		}
		if r.pause {
			r.c.Refresh()
			select {
			case <-ctx.Done():
			case <-time.After(r.Pause):
			}
		}
	}
	return 0, nil
}

// send splits the pending requests by node and writes each part.
func (r *Router) send(b *Batch) {
	m := r.c.m.Load()
	r.parts = r.parts[:0]
	for _, i := range r.pending {
		p := r.conn(m.addrFor(b.slots[i], r.Any))
		if len(p.reqs) == 0 {
			r.parts = append(r.parts, p)
		}
		p.reqs = append(p.reqs, i)
		p.wbuf = append(p.wbuf, b.request(i)...)
	}
	r.pending = r.pending[:0]
	for _, p := range r.parts {
		p.broken = false
		err := r.dial(p)
		if err == nil {
			if r.Timeout > 0 {
				p.nc.SetDeadline(time.Now().Add(r.Timeout))
			}
			_, err = p.rw.Write(p.wbuf)
		}
		p.wbuf = p.wbuf[:0]
		if err != nil {
			r.failed(p, 0, err)
		}
	}
}

// receive reads each part's replies in turn and queues the requests to
// send again.
func (r *Router) receive(onReply func(i int, reply []byte, at int64)) {
	for _, p := range r.parts {
		if p.broken {
			continue
		}
		at := r.Clock()
		for k := 0; k < len(p.reqs); {
			reply, ok, err := p.rd.next()
			if err == nil && !ok {
				if err = p.rd.fill(); err == nil {
					at = r.Clock()
					continue
				}
			}
			if err != nil {
				r.failed(p, k, err)
				break
			}
			i := p.reqs[k]
			k++
			if reply[0] != '-' || !r.reroute(i, reply) {
				onReply(i, reply, at)
			}
		}
		p.reqs = p.reqs[:0]
	}
}

// reroute queues request i again if reply is a routing error, and counts
// it; it reports whether it was one.
func (r *Router) reroute(i int, reply []byte) bool {
	msg := bytes.TrimRight(reply[1:], "\r\n")
	st := &r.c.Stats
	switch {
	case bytes.HasPrefix(msg, []byte("MOVED ")):
		f := bytes.Fields(msg)
		if len(f) != 3 {
			return false
		}
		slot, err := strconv.Atoi(string(f[1]))
		if err != nil {
			return false
		}
		st.count(&st.Redirects, "moved", string(msg))
		r.c.moved(slot, string(f[2]))
		r.c.Refresh()
		if r.redirs[i] < 255 {
			r.redirs[i]++
		}
		r.pause = r.pause || r.redirs[i] > 2
	case bytes.HasPrefix(msg, []byte("TRYAGAIN")):
		st.count(&st.TryAgain, "tryagain", string(msg))
		r.pause = true
	case bytes.HasPrefix(msg, []byte("CLUSTERDOWN")):
		st.count(&st.ClusterDown, "clusterdown", string(msg))
		r.pause = true
	default:
		return false
	}
	r.pending = append(r.pending, i)
	return true
}

// failed drops p's connection and queues its requests from the k-th on
// again.
func (r *Router) failed(p *nodeConn, k int, err error) {
	st := &r.c.Stats
	st.count(&st.ConnErrors, "conn", p.addr+": "+err.Error())
	if p.nc != nil {
		p.nc.Close()
		p.nc = nil
	}
	r.pending = append(r.pending, p.reqs[k:]...)
	p.reqs = p.reqs[:0]
	p.broken = true
	r.pause = true
}

// appendCommand appends args encoded as a RESP array of bulk strings.
func appendCommand(b []byte, args []string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}
