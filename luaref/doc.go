// Package luaref holds reference Lua rate limiters for Redis, one per
// RL.CHECK algorithm, written the way such scripts are deployed: fixed window
// (INCRBY and PEXPIRE on the first hit, epoch-aligned keys), sliding window
// log (a sorted set), sliding window counter (two window counters, weighted),
// token bucket and leaky bucket (a hash of the level and the time of the last
// update, in doubles) and GCRA (one key holding the theoretical arrival time,
// in the style of go-redis/redis_rate).
//
// They exist to prove that RL.CHECK is a drop-in replacement: the package's
// tests replay seeded random traces through the scripts on a real
// redis-server and through engine.Check at the same instants and compare
// every decision (see diff_test.go and docs/migrating.md). The benchmarks
// load them with SCRIPT LOAD and call them with EVALSHA.
//
// Every script takes the same arguments and replies in the same shape:
//
//	KEYS[1]  the limiter key (fixed and sliding derive KEYS[1]..':'..window
//	         index from it; give it a {hashtag} on Redis Cluster)
//	ARGV[1]  limit   requests per window, a positive integer
//	ARGV[2]  window  microseconds
//	ARGV[3]  now     the caller's clock, microseconds since the Unix epoch
//	ARGV[4]  cost    a non-negative integer
//	ARGV[5]  burst   token, leaky and gcra only: the capacity (0: limit)
//
//	reply    {allowed (1 or 0), remaining, retry_after_us (0 if allowed,
//	         -1 if never), reset_after_us}
//
// which is RL.CHECK's reply without the limit, in microseconds. Passing `now`
// keeps the scripts deterministic: the same calls give the same replies
// whatever Redis's own clock says. Redis's clock is used only for key expiry,
// which frees memory and never changes a decision.
package luaref
