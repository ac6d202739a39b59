#!/usr/bin/env bash
# The test suite, as `make test` and `make test-busy` run it: every pass runs,
# even after one fails, and the end lists every failure of every pass.
#
#   scripts/test.sh          the passes below
#   scripts/test.sh --busy   the same beside two CPU hogs at the lowest
#                            priority (nice 19), one per core of a 2-core
#                            machine, to show that no test needs an idle one
#   scripts/test.sh --long   the long scenarios only: every test named
#                            TestLong… (thirty cluster restarts where make
#                            test does two, eight container restarts, the
#                            floods in every mode), with RLSERVER_TEST_LONG=1
#
# Passes: go vet; the race tests of every package but cmd/rlserver; those
# of cmd/rlserver that need the machine to themselves (alone(t)), one at a
# time; then side by side, cmd/rlserver's others (parallel(t)), two at a
# time, and the server's tests of its connection path again with a
# goroutine per connection instead of the event loops.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

hogs=()
stop_hogs() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
  hogs=()
}
trap stop_hogs EXIT INT TERM
mode=${1:-}
if [ "$mode" = "--busy" ]; then
  for _ in 1 2; do
    nice -n 19 bash -c 'while :; do :; done' &
    hogs+=($!)
  done
  echo "== two CPU hogs at nice 19: ${hogs[*]}"
fi

out=$(mktemp -d)
failed=()
pass() { # pass NAME COMMAND...: runs COMMAND, its output to the terminal and to $out/NAME
  local name=$1 start=$SECONDS
  shift
  echo "== $name: $*"
  "$@" 2>&1 | tee "$out/$name"
  ended "$name" $? $((SECONDS - start))
}

ended() { # ended NAME STATUS SECONDS: says how pass NAME ended, and notes a failure
  if [ "$2" -eq 0 ]; then
    echo "== $1: ok in $3 s"
  else
    echo "== $1: FAILED in $3 s"
    failed+=("$1")
  fi
}

# together NAME FUNC [NAME FUNC]...: runs the FUNCs side by side, each
# one's output to $out/NAME, and prints each one's output and outcome when
# it has ended, in the order given.
together() {
  local names=() pids=() i
  while [ $# -ge 2 ]; do
    echo "== $1: $2, beside the others of this step"
    (
      s=$SECONDS
      "$2" >"$out/$1" 2>&1
      rc=$?
      echo $((SECONDS - s)) >"$out/$1.secs"
      exit $rc
    ) &
    pids+=($!)
    names+=("$1")
    shift 2
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    local status=$?
    cat "$out/${names[$i]}"
    ended "${names[$i]}" $status "$(cat "$out/${names[$i]}.secs")"
  done
}

# Each go test runs with -json through internal/testjson, which prints what
# go test would and notes every test's time: the suite's timing table
# (slowest first) is $out/times.txt, or TEST_TIMES if set.
times=${TEST_TIMES:-$out/times.txt}
: > "$times"
"$GO" build -o "$out/testjson" ./internal/testjson || exit 1
gotest() { # gotest ARGS...: go test -json ARGS, reported by testjson
  "$GO" test -json "$@" 2>&1 | "$out/testjson" -times "$times"
}
start=$SECONDS
if [ "$mode" = "--long" ]; then
  export RLSERVER_TEST_LONG=1
  # Only the packages that hold such tests, so as not to build every other.
  long_pkgs=$(grep -rl --include='*_test.go' '^func TestLong' . | xargs -n1 dirname | sort -u)
  # One package at a time: cmd/rlserver's long scenarios are alone ones
  # (restarts that clients must not see, a memory bound), and package
  # server's long round trips load both cores for a minute and more.
  pass long gotest -race -count=1 -timeout 60m -p 1 -run '^TestLong' $long_pkgs
else
  pass vet "$GO" vet ./...
  # Every package's race tests but cmd/rlserver's, three packages at a
  # time: some of them wait on real processes (redis-server, Caddy, nginx,
  # Chromium, the reference rate limit service) more than they compute:
  # two at a time, the test binaries used 383 s of CPU in 548 s of their
  # time on the 2-core machine, and the pass took 286-302 s (259 s so).
  pass race gotest -race -count=1 -timeout 30m -p 3 $("$GO" list ./... | grep -v '/cmd/rlserver$')
  # cmd/rlserver's tests that must have the machine to themselves (alone(t):
  # they measure time, CPU or memory, or that clients see no error while
  # nodes come and go), one at a time, with nothing else running.
  alone() { RLSERVER_TEST_SHARE=alone gotest -race -count=1 -timeout 40m ./cmd/rlserver; }
  pass race-cmd-alone alone
  # Then two passes side by side, both of behaviour only: cmd/rlserver's
  # other tests (parallel(t)), two at a time, and the server's tests of its
  # connection path (the files below: the front door, raw and hostile
  # protocol, the real clients) again with a goroutine per connection
  # instead of the event loops (its other tests, commands, cluster routing,
  # scripts, run the same code either way). cmd/rlserver's processes beside
  # the other packages' race tests starved package cluster's in-process
  # clusters into timeouts (a forwarded check's peer unreachable, a lead
  # lost): that pass runs on its own.
  conn_files="frontdoor raw rawio hostile badinput multibulk resp goredis rediscli redispy serve args"
  conn_tests=$(for f in $conn_files; do grep -ho '^func Test[A-Za-z0-9_]*' "server/${f}_test.go"; done | sed 's/^func //' | paste -sd'|')
  shared() { RLSERVER_TEST_SHARE=shared gotest -race -count=1 -timeout 40m ./cmd/rlserver; }
  goroutines() { RLSERVER_TEST_IOLOOPS=-1 gotest -race -count=1 -timeout 10m -run "^($conn_tests)\$" ./server; }
  together race-cmd-shared shared race-goroutines goroutines
fi
stop_hogs

echo
echo "== the suite took $((SECONDS - start)) s; the ten slowest tests (seconds, package, test; all in $times):"
sort -rn -o "$times" "$times"
head -10 "$times"
if [ ${#failed[@]} -eq 0 ]; then
  echo "== every pass ok"
  exit 0
fi
for name in "${failed[@]}"; do
  echo "== $name FAILED:"
  # The failures and the failing tests' own reports (t.Log lines), which
  # CI's excerpt of the output may have cut.
  grep -E -e '^\s*--- FAIL|^FAIL|^panic:|^# |race detected|^\s*\S+\.go:[0-9]+:' "$out/$name" | head -120
done
exit 1
