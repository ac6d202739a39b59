#!/usr/bin/env bash
# Restarts the three nodes of `make cluster` one at a time, as an upgrade
# does (make rolling-restart): each is stopped with SIGTERM — it hands its
# groups to the others while its clients are still connected, and they are
# sent (MOVED) to the new leaders — then started again with --data-dir
# alone (the directory remembers the node's addresses and cluster), and the
# next waits until the node answers and every group is back with its
# preferred leader (GET /cluster: "balanced":true). Clients see no error.
# Same variables as scripts/cluster.sh. Secrets are not remembered by a
# data directory: give them as RLSERVER_ADMIN_TOKEN / RLSERVER_REQUIREPASS in
# the environment of both scripts (the restarted nodes inherit them, and
# GET /cluster is asked with the token).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${RLSERVER:-bin/rlserver}
dir=${CLUSTER_DIR:-data/cluster}
http=${HTTP_BASE:-8000}
wait_until() { # seconds, what, command...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then
      echo "rolling-restart: timed out waiting until $what" >&2
      exit 1
    fi
    sleep 0.2
  done
}
token=${RLSERVER_ADMIN_TOKEN:-${RLSERVER_REQUIREPASS:-}}
balanced() { curl -sf ${token:+-H "Authorization: Bearer $token"} "127.0.0.1:$((http + $1))/cluster" | grep -q '"balanced":true'; }
for i in 1 2 3; do
  pid=$(cat "$dir/n$i.pid")
  echo "rolling-restart: stopping n$i (pid $pid)" >&2
  kill -TERM "$pid"
  wait_until 30 "n$i exits" bash -c "! kill -0 $pid"
  "$bin" --data-dir "$dir/n$i" >>"$dir/n$i.log" 2>&1 &
  echo $! >"$dir/n$i.pid"
  disown
  echo "rolling-restart: n$i started again (pid $!); waiting for its groups" >&2
  wait_until 60 "the cluster is balanced again after n$i's restart" balanced "$i"
done
echo "rolling-restart: done" >&2
