#!/usr/bin/env bash
# Side-by-side: the same ShouldRateLimit load (bench/cmd/rlsbench) against
# rlserver's --grpc and against envoyproxy/ratelimit backed by redis-server,
# same config (bench/rlsbench.yaml), one core per server (taskset), on this
# machine. Usage: bench/rlsbench.sh [duration=15s] [concurrency=32]
# RLS_VERSION picks envoyproxy/ratelimit's version (default latest).
set -euo pipefail
cd "$(dirname "$0")/.."
D=${1:-15s}; C=${2:-32}
W=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
NCPU=$(nproc); SRV_CPU=0; LOAD_CPU=$((NCPU > 1 ? 1 : 0))
go build -o "$W/rlserver" ./cmd/rlserver
go build -o "$W/rlsbench" ./bench/cmd/rlsbench
GOBIN="$W" GOFLAGS=-mod=mod go install "github.com/envoyproxy/ratelimit/src/service_cmd@${RLS_VERSION:-latest}"
mkdir -p "$W/runtime/ratelimit/config"; cp bench/rlsbench.yaml "$W/runtime/ratelimit/config/"

echo "== rlserver (--data-dir '' and default, one core)"
taskset -c $SRV_CPU "$W/rlserver" --listen 127.0.0.1:16390 --http 127.0.0.1:18090 --grpc 127.0.0.1:18091 \
  --data-dir "" --procs 1 --envoy-config bench/rlsbench.yaml --log-level error 2>/dev/null &
P=$!; sleep 1
taskset -c $LOAD_CPU "$W/rlsbench" -name rlserver-memory -addr 127.0.0.1:18091 -c "$C" -d "$D"
kill $P; wait $P 2>/dev/null || true
taskset -c $SRV_CPU "$W/rlserver" --listen 127.0.0.1:16390 --http 127.0.0.1:18090 --grpc 127.0.0.1:18091 \
  --data-dir "$W/data" --procs 1 --envoy-config bench/rlsbench.yaml --log-level warn &
P=$!; sleep 2
taskset -c $LOAD_CPU "$W/rlsbench" -name rlserver-durable -addr 127.0.0.1:18091 -c "$C" -d "$D"
kill $P; wait $P 2>/dev/null || true

echo "== envoyproxy/ratelimit + redis-server (one core for both)"
taskset -c $SRV_CPU redis-server --port 16391 --save '' --appendonly no >/dev/null &
sleep 0.5
(cd "$W" && taskset -c $SRV_CPU env USE_STATSD=false LOG_LEVEL=warn REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:16391 \
  RUNTIME_ROOT="$W/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
  GRPC_PORT=18191 PORT=18190 DEBUG_PORT=18192 GOMAXPROCS=1 "$W/service_cmd" >"$W/rls.log" 2>&1) &
sleep 2
taskset -c $LOAD_CPU "$W/rlsbench" -name envoyproxy-ratelimit -addr 127.0.0.1:18191 -c "$C" -d "$D"
