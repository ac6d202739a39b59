// Package envoyrls is Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over
// rlserver's limiter: the protocol that Envoy, Istio, Envoy Gateway,
// Contour and Emissary use to ask a remote limiter, with
// envoyproxy/ratelimit's configuration (package envoyrls/config) and
// semantics.
//
// It is an adapter: a request's descriptors become the counters of one
// multi-key check on the node's Limiter (the same store, or cluster, that
// RL.CHECK and RL.CHECKRULES use), so it holds no limiter state. By
// default (ChargeEach) every descriptor is charged as envoyproxy/ratelimit
// charges it, also when the answer is OVER_LIMIT: a fixed window is a
// plain counter and the decision is taken from its value, as the
// reference decides on its INCRBY's; ChargeStopWhenOver is its
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, and ChargeAllOrNothing
// rlserver's own all-or-nothing check. Package envoyrls/reftest compares
// the answers with the reference's, run side by side. Service answers gRPC; NewGRPCServer serves it with
// grpc.health.v1 and reflection, admitting each call on its headers
// (gate.go: the token, the calls in flight, the time a call may wait for
// its message) before grpc keeps anything for it; JSONHandler is POST
// /json; Watcher reloads the configuration when its files change.
package envoyrls
