"""Drives rlserver with redis-py (Debian's python3-redis), unchanged.

Run by TestRedisPy (redispy_test.go) as:

    python3 redispy.py TEST ADDR [ADDR...]

Each TEST is a function below. It raises AssertionError with what differs,
which makes the script exit non-zero; it prints "ok" when it passes. The
server runs on a fixed clock (t0, a whole minute), so replies are exact.
"""

import sys

import redis


def connect(addr, **kw):
    host, port = addr.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=10, **kw)


def expect(what, got, want):
    assert got == want, f"{what}: got {got!r}, want {want!r}"


def raises(what, exc, fn, *args, contains=""):
    try:
        fn(*args)
    except exc as e:
        assert contains in str(e), f"{what}: {type(e).__name__} {e!r} does not mention {contains!r}"
        return e
    except Exception as e:  # noqa: BLE001 - report what was raised instead
        raise AssertionError(f"{what}: raised {type(e).__name__} {e!r}, want {exc.__name__}")
    raise AssertionError(f"{what}: no {exc.__name__}")


def test_pipelines(addr):
    r = connect(addr)
    check = ("RL.CHECK", "py:tx", "fixed", 2, "1m")
    # The default pipeline is a transaction: MULTI ... EXEC.
    p = r.pipeline()
    for _ in range(3):
        p.execute_command(*check)
    expect("transactional pipeline", p.execute(),
           [[1, 2, 1, 0, 60000], [1, 2, 0, 0, 60000], [0, 2, 0, 60000, 60000]])
    p = r.pipeline(transaction=False)
    p.execute_command("RL.CHECK", "py:plain", "token", 3, "1m")
    p.execute_command("RL.PEEK", "py:plain", "token", 3, "1m")
    p.execute_command("RL.RESET", "py:plain")
    expect("plain pipeline", p.execute(), [[1, 3, 2, 0, 20000], [1, 3, 2, 0, 20000], 1])
    # A command that does not parse discards the whole transaction.
    p = r.pipeline()
    p.execute_command("RL.CHECK", "py:abort", "fixed", 2, "1m")
    p.execute_command("RL.CHECK", "py:abort", "bogus", 2, "1m")
    raises("aborted transaction", redis.ResponseError, p.execute, contains="unknown algorithm 'bogus'")
    expect("after the abort", r.execute_command("RL.PEEK", "py:abort", "fixed", 2, "1m"), [1, 2, 2, 0, 0])
    # A state error comes back in its place; the others run.
    p = r.pipeline()
    p.execute_command("RL.CHECK", "py:tx", "token", 2, "1m")
    p.execute_command("PING")
    res = p.execute(raise_on_error=False)
    assert isinstance(res[0], redis.ResponseError) and "WRONGTYPE" in str(res[0]), res
    expect("PING in a transaction", res[1], True)
    # WATCH is refused with a clear error.
    with r.pipeline() as p:
        raises("WATCH", redis.ResponseError, p.watch, "py:tx", contains="WATCH is not supported")


def test_client_info(addr):
    r = connect(addr, client_name="py-client")
    info = r.client_info()
    expect("name", info["name"], "py-client")
    expect("id", info["id"], r.client_id())
    for k in ("age", "idle", "db", "sub", "psub", "multi", "qbuf", "qbuf-free", "obl", "argv-mem",
              "oll", "omem", "tot-mem"):
        assert isinstance(info[k], int), f"{k}: {info[k]!r} is not an int"
    expect("multi", info["multi"], -1)
    expect("user", info["user"], "default")
    mine = [c for c in r.client_list() if c["name"] == "py-client"]
    expect("CLIENT LIST entries named py-client", len(mine), 1)
    expect("CLIENT LIST id", mine[0]["id"], str(info["id"]))


def auth_outcome(addr, **kw):
    """Returns what a client built with kw gets from PING: True or the error."""
    try:
        return connect(addr, **kw).ping()
    except redis.RedisError as e:
        return f"{type(e).__name__}: {e}"


def test_auth_nopass(addr, redis_addr):
    # Against a server without a password, every way redis-py authenticates
    # ends as it does against Redis 7.
    for kw in ({}, {"username": "default", "password": "x"}, {"password": "x"},
               {"username": "nobody", "password": "x"}):
        expect(f"Redis(**{kw})", auth_outcome(addr, **kw), auth_outcome(redis_addr, **kw))
    expect("username default", auth_outcome(addr, username="default", password="anything"), True)


def test_auth_pass(addr):
    expect("password", auth_outcome(addr, password="s3cret"), True)
    expect("default user", auth_outcome(addr, username="default", password="s3cret"), True)
    expect("no password", auth_outcome(addr), "AuthenticationError: Authentication required.")
    expect("wrong password", auth_outcome(addr, password="nope"),
           "ResponseError: WRONGPASS invalid username-password pair or user is disabled.")
    r = connect(addr, password="s3cret")
    raises("FLUSHALL as default", redis.exceptions.NoPermissionError, r.flushall)
    admin = connect(addr, username="admin", password="root")
    expect("FLUSHALL as admin", admin.flushall(), True)
    # An authenticated transaction.
    p = admin.pipeline()
    p.execute_command("RL.CHECK", "py:auth", "gcra", 10, "1s", "BURST", 2)
    expect("transaction", p.execute(), [[1, 2, 1, 0, 100]])


def test_commands(addr):
    r = connect(addr, decode_responses=True)
    for algo, want in (("fixed", [1, 5, 4, 0, 60000]), ("sliding", [1, 5, 4, 0, 60001]),
                       ("log", [1, 5, 4, 0, 60000]), ("token", [1, 5, 4, 0, 12000]),
                       ("leaky", [1, 5, 4, 0, 12000]), ("gcra", [1, 5, 4, 0, 12000])):
        expect(f"RL.CHECK {algo}", r.execute_command("RL.CHECK", "py:" + algo, algo, 5, "1m"), want)
        expect(f"RL.PEEK {algo}", r.execute_command("RL.PEEK", "py:" + algo, algo, 5, "1m"),
               [1, 5, 4, 0, want[4]])
    expect("COST and BURST", r.execute_command("RL.CHECK", "py:burst", "token", 5, "1m", "COST", 3, "BURST", 10),
           [1, 10, 7, 0, 36000])
    expect("RL.RESET", r.execute_command("RL.RESET", "py:fixed"), 1)
    expect("RL.RESET again", r.execute_command("RL.RESET", "py:fixed"), 0)
    expect("CL.THROTTLE", r.execute_command("CL.THROTTLE", "py:cell", 15, 30, 60, 1), [0, 16, 15, -1, 2])
    raises("WRONGTYPE", redis.ResponseError, r.execute_command, "RL.CHECK", "py:gcra", "fixed", 5, "1m",
           contains="WRONGTYPE")
    rule = '{"target":"/py/*","tier":"*","key_type":"user","algo":"fixed","limit":1,"window":"1m"}'
    expect("RL.RULE.SET", r.execute_command("RL.RULE.SET", "py-rule", rule), 1)
    got = r.execute_command("RL.RULE.GET", "py-rule")
    assert '"id":"py-rule"' in got and '"limit":1' in got, got
    assert any('"id":"py-rule"' in x for x in r.execute_command("RL.RULE.LIST")), "RL.RULE.LIST"
    expect("RL.CHECKRULES", r.execute_command("RL.CHECKRULES", "/py/a", "free", "user=u1"),
           [1, 1, 0, 0, 60000, "py-rule"])
    expect("RL.CHECKRULES denied", r.execute_command("RL.CHECKRULES", "/py/a", "free", "user=u1", "COST", 1),
           [0, 1, 0, 60000, 60000, "py-rule"])
    expect("RL.CHECKRULES no rule", r.execute_command("RL.CHECKRULES", "/elsewhere", "free", "user=u1"),
           [1, -1, -1, 0, 0, None])
    expect("RL.RULE.DEL", r.execute_command("RL.RULE.DEL", "py-rule"), 1)
    expect("RL.RULE.GET gone", r.execute_command("RL.RULE.GET", "py-rule"), None)
    expect("DBSIZE", r.dbsize() > 0, True)
    info = r.info("rlserver")
    assert info["checks_fixed_allowed"] >= 1, info
    expect("INFO cluster", r.info("cluster"), {"cluster_enabled": 0})


if __name__ == "__main__":
    name, args = sys.argv[1], sys.argv[2:]
    globals()["test_" + name](*args)
    print("ok")
