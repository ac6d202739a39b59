"""Drives Python's limits (Debian python3-limits) against two servers in lock
step: every strategy it ships (fixed window, fixed window with elastic
expiry, moving window) through its RedisStorage, with hit, test,
get_window_stats, clear and the storage's reset, and SCRIPT FLUSH now and
then so that its registered scripts go through NOSCRIPT and are loaded again.
The scripts are the ones the installed library carries.

Usage: limits_lockstep.py --a HOST:PORT --b HOST:PORT --seed N [--steps N] [--skew]
       [--strategies fixed,elastic,moving]
Prints 'ok ...' or 'MISMATCH ...' (exit status 1).
"""

import time as _time

import limits
import limits.storage.redis
from limits import RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.storage import storage_from_string
from limits.strategies import (FixedWindowElasticExpiryRateLimiter,
                               FixedWindowRateLimiter, MovingWindowRateLimiter)

import lockstep

STRATEGIES = {
    "fixed": FixedWindowRateLimiter,
    "elastic": FixedWindowElasticExpiryRateLimiter,
    "moving": MovingWindowRateLimiter,
}
WHO = ["alice", "bob", "carol"]


def items(rng, skew):
    """Random limits, as pairs (side a's, side b's); with skew, side b's
    allow one more."""
    out = []
    for _ in range(4):
        amount, multiples = rng.randint(1, 8), rng.randint(1, 2)
        out.append((RateLimitItemPerSecond(amount, multiples),
                    RateLimitItemPerSecond(amount + (1 if skew else 0), multiples)))
    out.append((RateLimitItemPerMinute(20), RateLimitItemPerMinute(20 + (1 if skew else 0))))
    return out


def run(args, rng):
    clock = lockstep.Clock()
    limits.storage.redis.time = clock  # the step's timestamp on both sides
    pair = lockstep.Pair(args.a, args.b, args.seed)
    pair.flushall()
    storages = [storage_from_string(lockstep.uri(a)) for a in (args.a, args.b)]
    limiters = [{n: cls(s) for n, cls in STRATEGIES.items()} for s in storages]
    pool = items(rng, args.skew)
    for pair.step in range(args.steps):
        if rng.random() < 0.3:
            _time.sleep(rng.random() * 0.08)  # let windows pass
        if pair.step == 0 or rng.random() < 0.5:  # else the same key again: bursts
            strategy = rng.choice(args.strategies.split(","))
            item = rng.choice(pool)
            who = [strategy, rng.choice(WHO)]  # a strategy's keys are its own
        op = rng.choices(["hit", "test", "stats", "clear", "reset", "flush"],
                         [45, 18, 22, 6, 3, 6])[0]
        cost = rng.choice([1, 1, 1, 2, 3]) if op == "hit" else 1
        pair.note("%s %s %s %s cost=%d" % (strategy, op, item[0], who, cost))
        if op == "flush":
            pair.script_flush()
            continue
        pair.settle()
        clock.now = _time.time()
        got = pair.both(lambda i: call(limiters[i][strategy], storages[i], op, item[i], who, cost))
        clock.now = None
        if pair.tainted:
            pair.resync(args.steps)
            continue
        compare(pair, op, got)
        pair.counts["%s=%s" % (op, got[0] if op in ("hit", "test") else "")] += 1
        pair.compare_stored(item[0].key_for(*who), item[1].key_for(*who))
    return pair.summary()


def call(limiter, storage, op, item, who, cost):
    if op == "hit":
        return limiter.hit(item, *who, cost=cost)
    if op == "test":
        return limiter.test(item, *who)
    if op == "stats":
        return limiter.get_window_stats(item, *who)
    if op == "clear":
        return limiter.clear(item, *who)
    return storage.reset()


def compare(pair, op, got):
    a, b = got
    if op == "stats":
        pair.compare_reset("get_window_stats reset", a[0], b[0])
        if a[1] != b[1]:
            pair.fail("get_window_stats remaining", a, b)
    elif a != b:
        pair.fail(op, a, b)


if __name__ == "__main__":
    lockstep.main(run, lambda p: p.add_argument(
        "--strategies", default=",".join(sorted(STRATEGIES)),
        help="comma-separated strategies to drive (default: all)"))
