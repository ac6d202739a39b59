"""Drives a Flask app limited by Flask-Limiter (Debian python3-flask-limiter
on python3-flask) against two servers in lock step: the same app is built
twice, its storage_uri pointing at side a and at side b, for each strategy
Flask-Limiter offers, and every request goes to both through Flask's test
client; the status codes, the bodies and the X-RateLimit-* and Retry-After
headers are compared.

Usage: flask_lockstep.py --a HOST:PORT --b HOST:PORT --seed N [--steps N] [--skew]
Prints 'ok ...' or 'MISMATCH ...' (exit status 1).
"""

import logging
import time as _time

import flask
import flask_limiter.extension
import limits.storage.redis
from flask_limiter import Limiter

import lockstep

STRATEGIES = ["fixed-window", "fixed-window-elastic-expiry", "moving-window"]
USERS = ["alice", "bob", "carol", ""]
PATHS = ["/fixed", "/pair", "/cost", "/shared1", "/shared2", "/login", "/default", "/exempt"]


def make_app(addr, strategy, skew):
    """The app under test: its limits, with one more allowed everywhere if
    skew."""
    more = 1 if skew else 0
    app = flask.Flask("lockstep")
    limiter = Limiter(
        lambda: flask.request.headers.get("X-User") or flask.request.remote_addr,
        app=app,
        storage_uri=lockstep.uri(addr),
        strategy=strategy,
        headers_enabled=True,
        default_limits=["%d per 2 seconds" % (4 + more)],
        application_limits=["%d per minute" % (150 + more)],
        key_prefix=strategy,  # the strategies keep keys of different types
    )
    app.logger.setLevel(logging.CRITICAL)  # a 500 is compared, not logged
    shared = limiter.shared_limit("%d per second" % (3 + more), scope="pair-of-routes")

    @app.route("/fixed")
    @limiter.limit("%d/second" % (3 + more))
    def fixed():
        return "fixed"

    @app.route("/pair")
    @limiter.limit("%d per 2 seconds" % (2 + more))
    @limiter.limit("%d per minute" % (8 + more))
    def pair():
        return "pair"

    @app.route("/cost")
    @limiter.limit("%d/second" % (5 + more), cost=lambda: int(flask.request.args.get("cost", "1")))
    def cost():
        return "cost"

    @app.route("/shared1")
    @shared
    def shared1():
        return "one"

    @app.route("/shared2")
    @shared
    def shared2():
        return "two"

    @app.route("/login")
    @limiter.limit("%d/second" % (2 + more), deduct_when=lambda r: r.status_code == 401)
    def login():
        if flask.request.args.get("ok") == "1":
            return "welcome"
        return "no", 401

    @app.route("/default")
    def default():
        return "default"

    @app.route("/exempt")
    @limiter.exempt
    def exempt():
        return "exempt"

    return app


HEADERS = ["X-RateLimit-Limit", "X-RateLimit-Remaining"]
TIMES = ["X-RateLimit-Reset", "Retry-After"]


def run(args, rng):
    logging.getLogger("flask-limiter").setLevel(logging.ERROR)
    clock = lockstep.Clock()
    limits.storage.redis.time = clock  # the step's timestamp on both sides
    flask_limiter.extension.time = clock
    pair = lockstep.Pair(args.a, args.b, args.seed)
    pair.flushall()
    clients = {s: [make_app(args.a, s, False).test_client(), make_app(args.b, s, args.skew).test_client()]
               for s in STRATEGIES}
    for pair.step in range(args.steps):
        if rng.random() < 0.3:
            _time.sleep(rng.random() * 0.08)  # let windows pass
        if pair.step == 0 or rng.random() < 0.5:  # else the same again: bursts
            strategy, path, user = rng.choice(STRATEGIES), rng.choice(PATHS), rng.choice(USERS)
            if path == "/cost":
                path += "?cost=%d" % rng.randint(1, 4)
            elif path == "/login":
                path += "?ok=%d" % rng.randint(0, 1)
        pair.note("%s GET %s as %r" % (strategy, path, user))
        if rng.random() < 0.04:
            pair.script_flush()
        pair.settle()
        clock.now = _time.time()
        resp = pair.both(lambda i: clients[strategy][i].get(path, headers={"X-User": user}))
        clock.now = None
        if pair.tainted:
            pair.resync(args.steps)
            continue
        compare(pair, resp)
        pair.counts[str(resp[0].status_code)] += 1
        pair.compare_all()
    return pair.summary()


def compare(pair, resp):
    a, b = resp
    if a.status_code != b.status_code:
        pair.fail("status", a.status_code, b.status_code)
    if a.get_data() != b.get_data():
        pair.fail("body", a.get_data(), b.get_data())
    for h in HEADERS:
        if a.headers.get(h) != b.headers.get(h):
            pair.fail(h, a.headers.get(h), b.headers.get(h))
    for h in TIMES:
        ha, hb = a.headers.get(h), b.headers.get(h)
        if (ha is None) != (hb is None):
            pair.fail(h, ha, hb)
        if ha is not None:
            pair.compare_reset(h, int(ha), int(hb))


if __name__ == "__main__":
    lockstep.main(run)
