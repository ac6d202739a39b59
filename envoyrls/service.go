package envoyrls

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/envoyrls/config"
	"github.com/rlserver/rlserver/shards"
)

// Limiter charges the counters of one request, all or nothing (see
// shards.Store.CheckAll): a shards.Store, a durable cluster.Node and a
// cluster.Cluster, whose counters live in several groups, satisfy it.
type Limiter interface {
	CheckAll(ops []shards.Op, cost, now int64) (bool, error)
}

// Durable is implemented by a store whose changes reach its log after the
// call that made them (cluster.Node, cluster.Cluster): Settle(ctx, false)
// waits until a check's answer may go out, as the consistency mode asks.
type Durable interface {
	Settle(ctx context.Context, change bool) error
}

// Config configures a Service. Zero values take the defaults given.
type Config struct {
	Limiter Limiter // required
	Durable Durable // nil: answers go out at once
	// Clock returns the time in ns since the epoch; nil is time.Now.
	Clock func() int64
	// MaxDescriptors bounds the descriptors of one request (default 64),
	// MaxEntries the entries of one descriptor (default 32), and
	// MaxKeyBytes the counter key a descriptor makes: the domain, its keys
	// and values (default shards.DefaultMaxKeyBytes, the server's --max-key-bytes).
	MaxDescriptors int
	MaxEntries     int
	MaxKeyBytes    int
	// NearLimitRatio is the share of a limit above which hits count as
	// near the limit in metrics (default 0.8, envoyproxy/ratelimit's).
	NearLimitRatio float64
	// MaxMetricKeys bounds the descriptor keys metrics keep apart (default
	// 1000): with detailed_metric every value is a key, and beyond the
	// bound the hits are counted under "_other_".
	MaxMetricKeys int
	// Charging says which counters a request charges when some of its
	// descriptors are over their limit: ChargeEach (the default,
	// envoyproxy/ratelimit's), ChargeStopWhenOver (its
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT) or ChargeAllOrNothing.
	Charging Charging
	// Registerer receives the metrics; nil keeps none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger // nil discards
}

// Charging is what a request charges to the counters of its descriptors.
type Charging uint8

const (
	// ChargeEach charges every descriptor's counters with its hits, also
	// when the request is answered OVER_LIMIT, and a counter that a
	// request names twice with each occurrence in turn: a fixed window's
	// counter then goes on past its limit within the window, as
	// envoyproxy/ratelimit's INCRBY does. The default.
	ChargeEach Charging = iota
	// ChargeStopWhenOver is envoyproxy/ratelimit's
	// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: the counters are read
	// first; if a descriptor would go over its limit, only the descriptors
	// that would go over are charged, the others are not.
	ChargeStopWhenOver
	// ChargeAllOrNothing charges nothing when a descriptor not in shadow
	// mode is over its limit, and every counter otherwise, as one atomic
	// multi-key check (rlserver's RL.CHECKRULES semantics).
	ChargeAllOrNothing
)

// ParseCharging reads a charging mode's name: "each", "stop-when-over",
// "all-or-nothing".
func ParseCharging(s string) (Charging, bool) {
	for c := ChargeEach; c <= ChargeAllOrNothing; c++ {
		if c.String() == s {
			return c, true
		}
	}
	return 0, false
}

// String returns the mode's name as ParseCharging reads it.
func (c Charging) String() string {
	switch c {
	case ChargeEach:
		return "each"
	case ChargeStopWhenOver:
		return "stop-when-over"
	case ChargeAllOrNothing:
		return "all-or-nothing"
	}
	return "unknown"
}

// Service is the Envoy rate limit service (RLS v3 ShouldRateLimit) over a
// Limiter, answering from the configuration last given to SetConfig. It is
// safe for concurrent use.
type Service struct {
	pb.UnimplementedRateLimitServiceServer
	cfg     Config
	conf    atomic.Pointer[config.Config]
	metrics *metrics
}

// New returns a Service with an empty configuration (every domain is
// unknown) until SetConfig.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.MaxDescriptors <= 0 {
		cfg.MaxDescriptors = 64
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 32
	}
	if cfg.MaxKeyBytes <= 0 {
		cfg.MaxKeyBytes = shards.DefaultMaxKeyBytes
	}
	if cfg.NearLimitRatio <= 0 {
		cfg.NearLimitRatio = 0.8
	}
	if cfg.MaxMetricKeys <= 0 {
		cfg.MaxMetricKeys = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, metrics: newMetrics(cfg.Registerer, cfg.MaxMetricKeys)}
	s.conf.Store(config.Empty())
	return s
}

// SetConfig makes c the configuration of the requests that start from now.
func (s *Service) SetConfig(c *config.Config) { s.conf.Store(c) }

// Config returns the configuration in use.
func (s *Service) Config() *config.Config { return s.conf.Load() }

// ShouldRateLimit answers one request: a status per descriptor, in order,
// and OVER_LIMIT overall if any descriptor not in shadow mode is over its
// limit. What it charges is Config.Charging's. A descriptor with no
// entries (or that matches no limit) is OK, with no limit.
// Errors are gRPC statuses: UNKNOWN for an empty domain or descriptor
// list (as envoyproxy/ratelimit answers them), INVALID_ARGUMENT for
// another request it will never answer, UNAVAILABLE for a limiter that
// cannot answer now.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if err := s.validate(req); err != nil {
		return nil, err
	}
	conf := s.conf.Load()
	if !conf.Known(req.Domain) {
		s.metrics.domainNotFound(req.Domain)
		return allOK(len(req.Descriptors)), nil
	}
	now := s.cfg.Clock()
	p, err := s.plan(conf, req, now)
	if err != nil {
		return nil, err
	}
	if err := s.charge(ctx, p, now); err != nil {
		return nil, err
	}
	return s.answer(p, req, now), nil
}

// validate refuses requests the service never answers.
func (s *Service) validate(req *pb.RateLimitRequest) error {
	switch {
	// The reference answers these two with gRPC's Unknown (its handler
	// returns a plain error), and so does this service: a client that
	// tells codes apart sees the same one.
	case req.Domain == "":
		return status.Error(codes.Unknown, "rate limit domain must not be empty")
	case len(req.Descriptors) == 0:
		return status.Error(codes.Unknown, "rate limit descriptor list must not be empty")
	case len(req.Descriptors) > s.cfg.MaxDescriptors:
		return status.Errorf(codes.InvalidArgument, "too many descriptors: %d, at most %d", len(req.Descriptors), s.cfg.MaxDescriptors)
	}
	for i, d := range req.Descriptors {
		if len(d.GetEntries()) > s.cfg.MaxEntries {
			return status.Errorf(codes.InvalidArgument, "descriptor %d has %d entries, at most %d", i, len(d.Entries), s.cfg.MaxEntries)
		}
		n := len(req.Domain)
		for _, e := range d.Entries {
			n += len(e.GetKey()) + len(e.GetValue()) + 2
		}
		if n > s.cfg.MaxKeyBytes {
			return status.Errorf(codes.InvalidArgument, "descriptor %d is too long: its domain, keys and values take %d bytes, at most %d (--max-key-bytes)",
				i, n, s.cfg.MaxKeyBytes)
		}
		if d.GetIsNegativeHits() {
			return status.Errorf(codes.InvalidArgument, "descriptor %d: is_negative_hits is not supported", i)
		}
		if l := d.GetLimit(); l != nil && config.Unit(l.GetUnit()).Seconds() == 0 {
			return status.Errorf(codes.InvalidArgument, "descriptor %d: the limit override has no valid unit", i)
		}
	}
	return nil
}

// allOK is the answer for an unknown domain: OK, no limit, for each.
func allOK(n int) *pb.RateLimitResponse {
	r := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, n)}
	for i := range r.Statuses {
		r.Statuses[i] = &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
	}
	return r
}

// hitsAddend returns what descriptor d charges: its own hits_addend if set
// (0 only looks), else the request's, at least 1.
func hitsAddend(req *pb.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		return int64(min(h.GetValue(), engine.MaxLimit))
	}
	return int64(max(1, req.GetHitsAddend()))
}

// mapErr turns a limiter's error into a gRPC status.
func mapErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	if errors.Is(err, shards.ErrOOM) {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return status.Error(codes.Unavailable, err.Error())
}

// clampU32 bounds n to what a uint32 field holds.
func clampU32(n int64) uint32 {
	if n < 0 {
		return 0
	}
	return uint32(min(n, math.MaxUint32))
}

// policyName names a limit in the RateLimit headers: its name, else the
// descriptor's metric key and, for the second and later limits of one
// descriptor, its index.
func policyName(l *config.Limit, metricKey string) string {
	if l.Name != "" {
		return l.Name
	}
	if l.Index > 0 {
		return metricKey + "#" + strconv.Itoa(l.Index)
	}
	return metricKey
}
