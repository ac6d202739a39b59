#!/usr/bin/env bash
# Three rlserver nodes of one cluster on this machine (make cluster):
# RESP on 127.0.0.1:7001-7003, HTTP on 8001-8003, Raft on 17001-17003,
# data in ./data/cluster/n1..n3. Extra flags go to every node
# (CLUSTERFLAGS='--consistency strong' make cluster). Ctrl-C stops them
# gracefully.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${RLSERVER:-bin/rlserver}
peers=n1=127.0.0.1:17001,n2=127.0.0.1:17002,n3=127.0.0.1:17003
pids=()
stop() {
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT
for i in 1 2 3; do
  mkdir -p "data/cluster/n$i"
  "$bin" --node-id "n$i" --peers "$peers" --raft-addr "127.0.0.1:1700$i" \
    --listen "127.0.0.1:700$i" --http "127.0.0.1:800$i" --data-dir "data/cluster/n$i" \
    ${CLUSTERFLAGS:-} 2> >(sed -u "s/^/n$i: /" >&2) &
  pids+=($!)
done
echo "cluster: redis-cli -c -p 7001 CLUSTER SLOTS; curl -s 127.0.0.1:8001/cluster; Ctrl-C stops the nodes" >&2
wait "${pids[@]}"
