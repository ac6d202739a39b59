#!/usr/bin/env bash
# Three rlserver nodes of one cluster on this machine (make cluster):
# RESP on 127.0.0.1:7001-7003, HTTP on 8001-8003, Envoy's rate limit
# service (gRPC) on 9001-9003, Raft on 17001-17003,
# data in ./data/cluster/n1..n3, each node's log in data/cluster/nN.log
# (followed here). Extra flags go to every node
# (CLUSTERFLAGS='--consistency strong' make cluster). Ctrl-C stops them
# gracefully. `make rolling-restart` (scripts/rolling-restart.sh) restarts
# them one by one while this keeps running.
#
# CLUSTER_DIR, RESP_BASE, HTTP_BASE, GRPC_BASE and RAFT_BASE move the
# directory and the ports (node i listens on BASE+i): each node has a gRPC
# port of its own, where the default 8081 would be taken by the first.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${RLSERVER:-bin/rlserver}
dir=${CLUSTER_DIR:-data/cluster}
resp=${RESP_BASE:-7000} http=${HTTP_BASE:-8000} grpc=${GRPC_BASE:-9000} raft=${RAFT_BASE:-17000}
peers=n1=127.0.0.1:$((raft + 1)),n2=127.0.0.1:$((raft + 2)),n3=127.0.0.1:$((raft + 3))
mkdir -p "$dir"
alive() { # the nodes still running, by their pid files
  for i in 1 2 3; do
    pid=$(cat "$dir/n$i.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
  done
  return 0
}
stop() {
  trap - INT TERM EXIT
  pids=$(alive)
  [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
  while [ -n "$(alive)" ]; do sleep 0.2; done
  [ -n "${tailpid:-}" ] && kill "$tailpid" 2>/dev/null || true
}
trap stop INT TERM EXIT
for i in 1 2 3; do
  mkdir -p "$dir/n$i"
  : >>"$dir/n$i.log"
  "$bin" --node-id "n$i" --peers "$peers" --raft-addr "127.0.0.1:$((raft + i))" \
    --listen "127.0.0.1:$((resp + i))" --http "127.0.0.1:$((http + i))" --grpc "127.0.0.1:$((grpc + i))" --data-dir "$dir/n$i" \
    ${CLUSTERFLAGS:-} >>"$dir/n$i.log" 2>&1 &
  echo $! >"$dir/n$i.pid"
done
tail -n0 -F "$dir"/n1.log "$dir"/n2.log "$dir"/n3.log >&2 &
tailpid=$!
echo "cluster: redis-cli -c -p $((resp + 1)) CLUSTER SLOTS; curl -s 127.0.0.1:$((http + 1))/cluster; make rolling-restart; Ctrl-C stops the nodes" >&2
while [ -n "$(alive)" ]; do sleep 1; done
