package envoyrls

import (
	"crypto/subtle"
	"crypto/tls"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// ServerOptions configure the gRPC server. Zero values take the defaults
// given. Together they bound what one connection, and the server, may
// hold: a call is admitted on its headers or refused before grpc keeps
// anything for it, and an admitted call that stalls is ended.
type ServerOptions struct {
	TLS *tls.Config // nil serves plaintext (h2c), as Envoy's clusters expect by default
	// OnCall, if set, is called as each ShouldRateLimit call begins
	// (rlserver's rest.Governor.Touch, which gives a resting process its
	// cores back). It must be cheap and must not block.
	OnCall func()
	// Tokens, when not empty, are the bearer tokens a call must carry in
	// its "authorization: Bearer <token>" metadata (Envoy's grpc_service
	// initial_metadata sends it). They are checked on the call's headers,
	// before the call gets a goroutine or buffers; health's Check and List
	// stay open, as /healthz does (Watch and reflection, which hold a
	// stream open, need the token).
	Tokens []string
	// MaxRecvMsgSize bounds a request message (default 64 KiB: Envoy's
	// requests are a few hundred bytes); a larger one is refused with
	// RESOURCE_EXHAUSTED without being read into memory.
	MaxRecvMsgSize int
	// MaxHeaderBytes bounds a call's headers (default 16 KiB; Envoy sends
	// a few hundred bytes); a larger header list resets the stream.
	MaxHeaderBytes uint32
	// MaxConcurrentStreams bounds the calls in flight on one connection
	// (default 32: Envoy opens another connection when its calls need
	// more, and grpc clients queue their calls), so that one connection's
	// stalled calls are few; connections are bounded by the listener the
	// caller passes to Serve (rlserver's --grpc-maxclients).
	MaxConcurrentStreams uint32
	// MaxCalls bounds the calls in flight on the whole server (default
	// 1024: a call takes well under a millisecond, a few in a cluster with
	// --consistency strong), and a quarter of it the calls among them
	// still waiting for their message (a client sends it with the headers,
	// so only a call that stalls waits for long). When either is reached,
	// the call that has waited longest for its message is ended to make
	// room, and a new call is refused with RESOURCE_EXHAUSTED on its
	// headers only when none waits. Health checks without a token have a
	// pool of their own, a sixteenth of it: neither pool takes the other's
	// places.
	MaxCalls int
	// MessageTimeout ends a call whose first request message has not
	// arrived this long after its headers (default 5 s; Envoy sends both
	// at once), so that a stalled call holds nothing for long.
	MessageTimeout time.Duration
	// HandshakeTimeout bounds the TLS and HTTP/2 handshakes of a new
	// connection (default 5 s), so that a client that connects and says
	// nothing holds nothing for long.
	HandshakeTimeout time.Duration
	// Registerer receives rlserver_grpc_calls_refused_total{reason}; nil
	// keeps none.
	Registerer prometheus.Registerer
}

// Per-connection buffers: a call is a few hundred bytes each way, so the
// connection's read and write buffers and a stream's flow-control window
// (what a stalled call may make the server buffer) are kept small. 64 KiB
// is the least window grpc takes, and a static window turns off its
// bandwidth probing, which would otherwise grow it to 16 MiB.
const (
	connBufferBytes = 8 << 10
	streamWindow    = 64 << 10
)

// withDefaults fills o's zero values.
func (o ServerOptions) withDefaults() ServerOptions {
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = 64 << 10
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = 16 << 10
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = 32
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = 1024
	}
	if o.MessageTimeout <= 0 {
		o.MessageTimeout = 5 * time.Second
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	return o
}

// NewGRPCServer returns a gRPC server that serves svc, grpc.health.v1
// (SERVING for "" and the rate limit service's name) and reflection.
func NewGRPCServer(svc *Service, o ServerOptions) *grpc.Server {
	o = o.withDefaults()
	g := newGate(o.Tokens, o.MaxCalls, max(1, o.MaxCalls/4), max(1, o.MaxCalls/16), o.MessageTimeout)
	g.onCall = o.OnCall
	if o.Registerer != nil {
		g.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rlserver_grpc_calls_refused_total",
			Help: "gRPC calls refused on their headers (unauthenticated; busy: every place is taken by a call that has its message) or ended while they waited for their message (no_message: it did not come in time; evicted: a new call needed the place)."},
			[]string{"reason"})
		g.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ratelimit_service_total_requests",
			Help: "gRPC calls of the rate limit service by method, as envoyproxy/ratelimit counts them (its Prometheus name)."},
			[]string{"grpc_method"})
		g.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ratelimit_service_response_time_seconds",
			Help:    "Time to answer a gRPC call of the rate limit service, by method (envoyproxy/ratelimit's name and buckets).",
			Buckets: prometheus.DefBuckets}, []string{"grpc_method"})
		o.Registerer.MustRegister(g.refused, g.requests, g.latency)
	}
	opts := []grpc.ServerOption{
		grpc.InTapHandle(g.tap),
		grpc.UnaryInterceptor(g.unary),
		grpc.StreamInterceptor(g.stream),
		grpc.MaxRecvMsgSize(o.MaxRecvMsgSize),
		grpc.MaxHeaderListSize(o.MaxHeaderBytes),
		grpc.MaxConcurrentStreams(o.MaxConcurrentStreams),
		grpc.ConnectionTimeout(o.HandshakeTimeout),
		grpc.ReadBufferSize(connBufferBytes),
		grpc.WriteBufferSize(connBufferBytes),
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(streamWindow),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 10 * time.Minute, Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	gs := grpc.NewServer(opts...)
	pb.RegisterRateLimitServiceServer(gs, svc)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(pb.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	return gs
}

// Authorized reports whether token is one of tokens, in constant time for
// each.
func Authorized(token string, tokens []string) bool {
	ok := false
	for _, t := range tokens {
		if t != "" && subtle.ConstantTimeCompare([]byte(token), []byte(t)) == 1 {
			ok = true
		}
	}
	return ok
}
