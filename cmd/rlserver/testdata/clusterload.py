"""Steady RL.CHECK load through redis-py's RedisCluster, default options.

usage: clusterload.py host:port[,host:port...] prefix keys rate

Checks keys prefix:0 .. prefix:keys-1 in turn (fixed windows of 366 days,
as noRollover in main_test.go says why, and a limit no test reaches) at
about rate checks a second, until its standard input closes; then prints
one JSON line: the admissions acknowledged per key, the number of checks,
and every error the client raised (time, text, and where in redis-py it was
raised: an error inside the client, such as an IndexError, names its line).
redis-py logs the errors it handles by itself (MOVED, TRYAGAIN) with
tracebacks; they are sent to /dev/null: only what reaches the caller counts.
"""
import json
import logging
import sys
import threading
import time
import traceback

from redis.cluster import ClusterNode, RedisCluster


def where(e):
    """The innermost three frames of e's traceback, as ' at file:line in fn <- ...'."""
    frames = traceback.extract_tb(e.__traceback__)[-3:]
    return " at " + " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno} in {f.name}" for f in reversed(frames))


def main():
    addrs, prefix, keys, rate = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    logging.getLogger("redis").addHandler(logging.NullHandler())
    logging.getLogger("redis").propagate = False
    nodes = [ClusterNode(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in addrs]
    errors = []
    client = None
    while client is None:  # the cluster may still be forming: construction is retried, and counted
        try:
            client = RedisCluster(startup_nodes=nodes)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors.append([time.time(), "constructing RedisCluster: " + repr(e)])
            time.sleep(0.1)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    acked = [0] * keys
    checks = 0
    interval = 1.0 / rate
    due = time.monotonic()
    while not stop.is_set():
        k = checks % keys
        try:
            r = client.execute_command("RL.CHECK", f"{prefix}:{k}", "fixed", 1000000, "366d")
            if r[0] == 1:
                acked[k] += 1
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors.append([time.time(), repr(e) + where(e)])
        checks += 1
        due += interval
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        else:
            due = time.monotonic()
    print(json.dumps({"acked": {f"{prefix}:{k}": n for k, n in enumerate(acked)}, "checks": checks, "errors": errors}))


if __name__ == "__main__":
    main()
