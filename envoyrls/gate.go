package envoyrls

import (
	"container/list"
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// errNoMessage ends a call whose request message did not come in time;
// errEvicted one that had not sent it when its place was needed.
var (
	errNoMessage = errors.New("the request message did not arrive in time after the call's headers")
	errEvicted   = errors.New("the request message had not arrived when the server needed the call's place")
)

// gate admits the server's calls on their headers, before grpc keeps
// anything for them (a goroutine, the stream's buffers): its tap runs on
// the connection's reading goroutine as the HEADERS frame is read. It
// refuses a call without one of the tokens (but health checks), ends a
// call whose first message does not follow its headers within msgTimeout,
// and bounds the calls in flight in two pools that never take each
// other's places: the calls with a token (or every call when no token is
// set) and the health checks without one. It is safe for concurrent use.
type gate struct {
	onCall     func() // ServerOptions.OnCall
	tokens     []string
	msgTimeout time.Duration
	refused    *prometheus.CounterVec // nil counts nothing
	requests   *prometheus.CounterVec // {grpc_method}: the calls served; nil counts nothing
	latency    *prometheus.HistogramVec

	mu      sync.Mutex
	pools   [2]pool     // [0] calls without a token, [1] with
	sweeper *time.Timer // ends the waiting calls that are late; one for all, armed while some wait
	armed   bool
}

// pool bounds its calls in flight, and among them those still waiting
// for their message. When either bound is reached, the call that has
// waited longest for its message gives its place to the new one (a client
// sends a call's message with its headers, so only calls that stall wait
// for long), and only when none waits is the new one refused.
type pool struct {
	max, maxWaiting int
	calls           int
	waiting         list.List // of *call, oldest first
}

// call is one admitted call.
type call struct {
	pool     *pool
	cancel   context.CancelCauseFunc
	since    time.Time     // admitted
	wait     *list.Element // in pool.waiting until its message arrives
	released bool          // its place is given back
}

// newGate returns a gate for tokens whose pool of calls with a token (or
// of every call, without tokens) holds maxCalls calls, maxWaiting of them
// waiting, and whose pool of health checks without a token holds maxAnon.
func newGate(tokens []string, maxCalls, maxWaiting, maxAnon int, msgTimeout time.Duration) *gate {
	g := &gate{tokens: tokens, msgTimeout: msgTimeout}
	g.pools[0].max, g.pools[0].maxWaiting = maxAnon, maxAnon
	g.pools[1].max, g.pools[1].maxWaiting = maxCalls, maxWaiting
	return g
}

// openMethod reports whether a call is served without a token when
// tokens are set: health's Check and List, answered at once as /healthz
// is. Health's Watch and reflection hold a stream for as long as the
// client wants, so they need the token.
func openMethod(name string) bool {
	return name == healthpb.Health_Check_FullMethodName || name == healthpb.Health_List_FullMethodName
}

// unauthenticated is the status of a call without a valid token.
var unauthenticated = status.Error(codes.Unauthenticated,
	"authentication required: send the metadata 'authorization: Bearer <--requirepass>' (Envoy: grpc_service.initial_metadata)")

// tap admits or refuses a call on its headers (grpc.InTapHandle). An
// admitted call holds its place until its stream ends (ctx, the stream's
// context, is cancelled then) or it is evicted while it waits for its
// message; the context it returns is cancelled when the message does not
// arrive within msgTimeout or the call is evicted (see arrived).
func (g *gate) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	authed := len(g.tokens) == 0 || Authorized(bearerOf(info.Header["authorization"]), g.tokens)
	if !authed && !openMethod(info.FullMethodName) {
		g.count("unauthenticated")
		return nil, unauthenticated
	}
	p := &g.pools[0]
	if authed {
		p = &g.pools[1]
	}
	cctx, cancel := context.WithCancelCause(ctx)
	c := &call{pool: p, cancel: cancel}
	if !g.admit(c) {
		cancel(nil)
		g.count("busy")
		return nil, status.Errorf(codes.ResourceExhausted, "too many calls in flight on this server (at most %d); try again", p.max)
	}
	context.AfterFunc(ctx, func() { g.end(c) })
	return context.WithValue(cctx, callKey{}, c), nil
}

// admit gives c a place in its pool, evicting the call that has waited
// longest for its message if a bound is reached, and reports whether it
// could.
func (g *gate) admit(c *call) bool {
	p := c.pool
	g.mu.Lock()
	var victim *call
	if p.calls >= p.max || p.waiting.Len() >= p.maxWaiting {
		e := p.waiting.Front()
		if e == nil {
			g.mu.Unlock()
			return false
		}
		victim = e.Value.(*call)
		releaseLocked(victim)
	}
	p.calls++
	c.since = time.Now() // under g.mu: each waiting list is in the order of since
	c.wait = p.waiting.PushBack(c)
	g.armLocked(g.msgTimeout)
	g.mu.Unlock()
	if victim != nil {
		g.count("evicted")
		victim.cancel(errEvicted)
	}
	return true
}

// releaseLocked gives c's place back and stops its waiting; g.mu is held.
func releaseLocked(c *call) {
	stopWaitingLocked(c)
	if !c.released {
		c.released = true
		c.pool.calls--
	}
}

// stopWaitingLocked takes c off its pool's waiting list; g.mu is held.
func stopWaitingLocked(c *call) {
	if c.wait != nil {
		c.pool.waiting.Remove(c.wait)
		c.wait = nil
	}
}

// end runs when c's stream ends: its place is given back.
func (g *gate) end(c *call) {
	g.mu.Lock()
	releaseLocked(c)
	g.mu.Unlock()
}

// arrived records that the call of ctx has its first message: it no
// longer waits, so it is neither timed out nor evicted.
func (g *gate) arrived(ctx context.Context) {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		g.mu.Lock()
		stopWaitingLocked(c)
		g.mu.Unlock()
	}
}

// armLocked makes the sweeper run in d unless it is armed; g.mu is held.
// One timer serves every waiting call, so that a call holds no timer (a
// pending timer would keep an ended call's memory until it fired).
func (g *gate) armLocked(d time.Duration) {
	if g.armed {
		return
	}
	g.armed = true
	if g.sweeper == nil {
		g.sweeper = time.AfterFunc(d, g.sweep)
		return
	}
	g.sweeper.Reset(d)
}

// sweep ends the calls that have waited msgTimeout for their message,
// oldest first, and arms itself for the next one to come due.
func (g *gate) sweep() {
	now := time.Now()
	var late []*call
	next := time.Duration(-1)
	g.mu.Lock()
	g.armed = false
	for i := range g.pools {
		q := &g.pools[i].waiting
		for e := q.Front(); e != nil; e = q.Front() {
			c := e.Value.(*call)
			if left := g.msgTimeout - now.Sub(c.since); left > 0 {
				if next < 0 || left < next {
					next = left
				}
				break
			}
			stopWaitingLocked(c)
			late = append(late, c)
		}
	}
	if next >= 0 {
		g.armLocked(next)
	}
	g.mu.Unlock()
	for _, c := range late {
		g.count("no_message")
		c.cancel(errNoMessage)
	}
}

func (g *gate) count(reason string) {
	if g.refused != nil {
		g.refused.WithLabelValues(reason).Inc()
	}
}

// callKey is the context key of a call's *call.
type callKey struct{}

// unary records the arrival of a unary call's message: its interceptor
// runs once the message is read.
func (g *gate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	g.arrived(ctx)
	if g.onCall != nil && info.FullMethod == pb.RateLimitService_ShouldRateLimit_FullMethodName {
		g.onCall()
	}
	if g.requests == nil || info.FullMethod != pb.RateLimitService_ShouldRateLimit_FullMethodName {
		return handler(ctx, req)
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	g.requests.WithLabelValues("ShouldRateLimit").Inc()
	g.latency.WithLabelValues("ShouldRateLimit").Observe(time.Since(start).Seconds())
	return resp, err
}

// stream records the arrival of a streaming call's first message.
func (g *gate) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &arrivalStream{ServerStream: ss, g: g})
}

// arrivalStream tells its gate when its first message is read.
type arrivalStream struct {
	grpc.ServerStream
	g    *gate
	seen bool
}

// RecvMsg receives a message and, the first time, records its arrival.
func (s *arrivalStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if !s.seen {
		s.seen = true
		s.g.arrived(s.Context())
	}
	return err
}

// bearerOf returns the token of an "authorization: Bearer" header.
func bearerOf(values []string) string {
	for _, v := range values {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return t
		}
	}
	return ""
}
