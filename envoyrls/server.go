package envoyrls

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// ServerOptions configure the gRPC server. Zero values take the defaults
// given.
type ServerOptions struct {
	TLS *tls.Config // nil serves plaintext (h2c), as Envoy's clusters expect by default
	// Tokens, when not empty, are the bearer tokens a ShouldRateLimit call
	// must carry in its "authorization: Bearer <token>" metadata (Envoy's
	// grpc_service initial_metadata sends it); health and reflection stay
	// open, as /healthz does.
	Tokens []string
	// MaxRecvMsgSize bounds a request message (default 64 KiB: Envoy's
	// requests are a few hundred bytes); a larger one is refused with
	// RESOURCE_EXHAUSTED without being read into memory.
	MaxRecvMsgSize int
	// MaxConcurrentStreams bounds the calls in flight on one connection
	// (default 256); connections are bounded by the listener the caller
	// passes to Serve (rlserver's --maxclients).
	MaxConcurrentStreams uint32
	// HandshakeTimeout bounds the TLS and HTTP/2 handshakes of a new
	// connection (default 5 s), so that a client that connects and says
	// nothing holds nothing for long.
	HandshakeTimeout time.Duration
}

// NewGRPCServer returns a gRPC server that serves svc, grpc.health.v1
// (SERVING for "" and the rate limit service's name) and reflection.
func NewGRPCServer(svc *Service, o ServerOptions) *grpc.Server {
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = 64 << 10
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = 256
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(o.MaxRecvMsgSize),
		grpc.MaxConcurrentStreams(o.MaxConcurrentStreams),
		grpc.ConnectionTimeout(o.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 10 * time.Minute, Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	if len(o.Tokens) > 0 {
		opts = append(opts, grpc.UnaryInterceptor(authInterceptor(o.Tokens)))
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

// authInterceptor refuses ShouldRateLimit calls without one of tokens.
func authInterceptor(tokens []string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod != pb.RateLimitService_ShouldRateLimit_FullMethodName {
			return handler(ctx, req)
		}
		if !Authorized(bearer(ctx), tokens) {
			return nil, status.Error(codes.Unauthenticated,
				"authentication required: send the metadata 'authorization: Bearer <--requirepass>' (Envoy: grpc_service.initial_metadata)")
		}
		return handler(ctx, req)
	}
}

// bearer returns the token of the call's "authorization: Bearer" metadata.
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return t
		}
	}
	return ""
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
