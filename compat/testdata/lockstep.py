"""Lock-step helpers for the Python drivers of package compat.

Two Redis-protocol servers, side a (the reference redis-server) and side b
(the server under test): every call is made on a, then at once on b, and the
answers and the stored values are compared. The servers keep their own
clocks, so before each step settle() waits out any key that is within GUARD
of expiring on either side (a call landing on an expiry instant may
legitimately differ), and Clock gives the libraries one timestamp per step,
the same on both sides, where they pass time from the client.
"""

import argparse
import collections
import random
import sys
import time as _time

import redis

GUARD_MS = 50  # keys this close to expiring are waited out before a step
RESET_TOL_S = 1  # resets (absolute or relative) may differ by a second
SETTLE_TIMEOUT_S = 10


READERS = {
    "string": lambda pipe, k: pipe.get(k),
    "list": lambda pipe, k: pipe.lrange(k, 0, -1),
    "hash": lambda pipe, k: pipe.hgetall(k),
    "zset": lambda pipe, k: pipe.zrange(k, 0, -1, withscores=True),
}
NORMALIZE = {
    "string": lambda v: [v],
    "list": list,
    "hash": lambda v: sorted(v.items()),
    "zset": list,
}


class Clock:
    """A stand-in for the time module whose time() is the current step's
    timestamp (the real time when no step runs); everything else is the
    real module's."""

    def __init__(self):
        self.now = None

    def time(self):
        return _time.time() if self.now is None else self.now

    def __getattr__(self, name):
        return getattr(_time, name)


class Mismatch(Exception):
    """The two sides answered or stored differently."""


def parse_args(extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--a", required=True, help="reference redis-server host:port")
    p.add_argument("--b", required=True, help="server under test host:port")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--skew", action="store_true",
                   help="give side b different limits: the run must then report a mismatch")
    if extra:
        extra(p)
    return p.parse_args()


def uri(addr):
    return "redis://" + addr


def client(addr):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), decode_responses=True)


class Pair:
    """Plain redis-py clients of both sides, for guards, dumps and flushes
    (the libraries have connections of their own)."""

    def __init__(self, a, b, seed):
        self.addrs = (a, b)
        self.r = (client(a), client(b))
        self.seed = seed
        self.history = []
        self.step = 0
        self.settle_waits = 0
        self.max_ttl_diff = 0
        self.max_reset_diff = 0
        self.checked = 0.0  # when settle last read the PTTLs
        self.called = None  # (start, end) of the current step's calls
        self.max_span = 0.0  # the longest calls of a step so far, s
        self.max_exposure = 0.0  # the longest time from settle's reading to a step's end, s
        self.expiry = 0.0  # when the first key settle saw expires
        self.tainted = False  # the step ended past self.expiry: not compared
        self.skipped = 0  # steps not compared
        self.counts = collections.Counter()  # what the compared steps answered

    def note(self, text):
        self.history.append("step %d: %s" % (self.step, text))
        del self.history[:-25]

    def fail(self, what, a, b):
        raise Mismatch("seed %d, step %d: %s differs\n  a (redis-server %s): %r\n  b (under test %s): %r\n"
                       "last steps:\n  %s" % (self.seed, self.step, what, self.addrs[0], a, self.addrs[1], b,
                                              "\n  ".join(self.history)))

    def both(self, call):
        """Returns [call(0), call(1)], made one right after the other, notes
        how long they took, and taints the step if they ended after a key
        settle saw expired (the sides may then legitimately differ)."""
        start = _time.time()
        got = [call(0), call(1)]
        end = _time.time()
        self.called = (start, end)
        self.max_span = max(self.max_span, end - start)
        self.max_exposure = max(self.max_exposure, end - self.checked)
        self.tainted = end + 0.002 >= self.expiry
        return got

    def resync(self, steps):
        """Ends a tainted step: its results are not compared, and both
        sides start again from no keys. Too many of them fail the run: the
        machine was too slow to compare anything."""
        self.skipped += 1
        self.note("tainted (it ended %.0f ms after the keys were read, past an expiry): not compared; FLUSHALL"
                  % ((self.called[1] - self.checked) * 1000))
        if self.skipped > steps // 4 + 2:
            raise RuntimeError("%d steps of %d ran past an expiry more than %d ms away when they began: "
                               "the machine is too slow to compare the servers" % (
                                   self.skipped, self.step + 1, GUARD_MS))
        for r in self.r:
            r.flushall()

    def flushall(self):
        for r in self.r:
            r.flushall()
            r.script_flush()

    def script_flush(self):
        for r in self.r:
            r.script_flush()

    def settle(self):
        """Waits until no key on either side is within GUARD_MS of expiring;
        a key that is gets waited out until it has expired on both sides."""
        deadline = _time.time() + SETTLE_TIMEOUT_S
        waited = False
        while True:
            near = []
            self.checked = _time.time()
            self.expiry = self.checked + 3600
            for r in self.r:
                keys = r.keys("*")
                if not keys:
                    continue
                pipe = r.pipeline(transaction=False)
                for k in keys:
                    pipe.pttl(k)
                for k, ms in zip(keys, pipe.execute()):
                    if 0 <= ms <= GUARD_MS:
                        near.append((k, ms))
                    elif ms >= 0:
                        self.expiry = min(self.expiry, self.checked + ms / 1000)
            if not near:
                if waited:
                    self.settle_waits += 1
                return
            if _time.time() > deadline:
                raise RuntimeError("keys never expired: %r" % near)
            waited = True
            _time.sleep(0.002)

    def dump(self, side, keys):
        """The values of keys on one side as {key: (type, items, pttl)}, read
        in one MULTI/EXEC so that an expiry cannot fall between the
        readings."""
        r = self.r[side]
        while True:
            pipe = r.pipeline(transaction=False)
            for k in keys:
                pipe.type(k)
            kinds = pipe.execute()
            pipe = r.pipeline(transaction=True)
            for k, kind in zip(keys, kinds):
                pipe.type(k)
                if kind in READERS:
                    READERS[kind](pipe, k)
                pipe.pttl(k)
            got = iter(pipe.execute())
            out, changed = {}, False
            for k, kind in zip(keys, kinds):
                changed |= next(got) != kind  # it changed (expired) in between
                items = NORMALIZE[kind](next(got)) if kind in READERS else []
                out[k] = (kind, items, next(got))
            if not changed:
                return out

    def compare_stored(self, key_a, key_b=None):
        """Compares a key's type and value exactly, and its PTTL between the
        sides (key_b names it on side b if the names differ). The PTTLs may
        differ by what the clocks explain: the longest time between the two
        sides' calls of any step (the expiry was set in one of them) plus
        the time between the two readings, plus 2 ms of rounding."""
        self.compare_keys([(key_a, key_b or key_a)])

    def compare_all(self):
        """Compares every key of either side as compare_stored does."""
        keys = sorted(set(self.r[0].keys("*")) | set(self.r[1].keys("*")))
        self.compare_keys([(k, k) for k in keys])

    def compare_keys(self, names):
        start = _time.time()
        da = self.dump(0, [a for a, _ in names])
        db = self.dump(1, [b for _, b in names])
        tol = (self.max_span + _time.time() - start) * 1000 + 2
        for ka, kb in names:
            a, b = da[ka], db[kb]
            if (a[2] == -2) != (b[2] == -2) and 0 <= max(a[2], b[2]) <= tol:
                # Read while it expired: gone on one side, about to go on
                # the other. Wait it out and read again.
                _time.sleep((max(a[2], b[2]) + 2) / 1000)
                a, b = self.dump(0, [ka])[ka], self.dump(1, [kb])[kb]
            if a[:2] != b[:2]:
                self.fail("stored value of %s" % ka, a, b)
            if (a[2] < 0 or b[2] < 0) and a[2] != b[2] or abs(a[2] - b[2]) > tol:
                self.fail("PTTL of %s (tolerance %.0f ms)" % (ka, tol), a[2], b[2])
            self.max_ttl_diff = max(self.max_ttl_diff, abs(a[2] - b[2]))

    def compare_reset(self, what, a, b):
        """Compares two reset times (seconds) within RESET_TOL_S."""
        d = abs(a - b)
        if d > RESET_TOL_S:
            self.fail(what, a, b)
        self.max_reset_diff = max(self.max_reset_diff, d)

    def summary(self):
        return ("steps=%d settle_waits=%d max_pttl_diff_ms=%d max_reset_diff_s=%s max_span_ms=%.1f "
                "max_exposure_ms=%.1f not_compared=%d answers=%s" % (
                    self.step + 1, self.settle_waits, self.max_ttl_diff, self.max_reset_diff,
                    self.max_span * 1000, self.max_exposure * 1000, self.skipped,
                    ",".join("%s:%d" % kv for kv in sorted(self.counts.items()))))


def main(run, extra=None):
    """Runs run(args) (extra adds arguments) and exits 1 on a Mismatch
    (printed), 0 after printing 'ok ...' with run's summary."""
    args = parse_args(extra)
    t0 = _time.time()
    try:
        summary = run(args, random.Random(args.seed))
    except Mismatch as e:
        print("MISMATCH", e)
        sys.exit(1)
    print("ok %s seconds=%.2f" % (summary, _time.time() - t0))
