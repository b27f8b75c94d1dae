#!/bin/bash
#===- wait_policy.sh - OpenMP wait policies when threads share a core ------===#
#
#   bench/wait_policy.sh [BUILD] [STEPS]
#
# On a shared machine the scheduler may leave two of mlc's OpenMP threads on
# one core while other processes keep the other core busy. A thread that
# spins there (OMP_WAIT_POLICY=active) holds the core its partner needs, and
# each of a step's hundred-odd parallel regions waits out a time slice. This
# makes that placement on purpose: once a run has started (libgomp has counted
# the cores it may use) every thread of it is pinned to CPU 0 ("1 core"), and
# the same run unpinned ("free") is beside it. For each model it prints the
# median ms/step of the last half of the steps under mlc's default policy
# (passive), OMP_WAIT_POLICY=active, and one thread, and the ratio of each to
# the default. Not part of `make test`: it is a measurement, noisy on a
# shared machine; report `uptime` with it.
#
#===----------------------------------------------------------------------===#
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${2:-24}
mlc=$build/bin/mlc
data=$here/../data/corpus/python-docs.txt
work=$(mktemp -d /tmp/mlc-wait-policy-XXXXXX)
trap 'rm -rf "$work"' EXIT

# median ms/step: run PIN MODEL CONFIG MICRO_BATCH SEQ [VAR=VALUE...]
run() {
  local pin=$1 model=$2 config=$3 mb=$4 seq=$5
  shift 5
  local log=$work/log.jsonl
  rm -f "$log"
  env "$@" "$mlc" train "$model" --config "$config" --micro-batch "$mb" --seq-len "$seq" \
    --steps "$steps" --data "$data" --log-json "$log" --progress plain --log-every 100000 \
    >"$work/out" 2>&1 &
  local pid=$!
  if [ "$pin" = 1 ]; then
    for _ in $(seq 600); do [ -s "$log" ] && break; sleep 0.05; done
    for t in /proc/$pid/task/[0-9]*; do taskset -p -c 0 "${t##*/}" >/dev/null 2>&1 || true; done
  fi
  wait "$pid" || { cat "$work/out" >&2; return 1; }
  python3 -c "
import json, statistics, sys
ms = [json.loads(l)['ms'] for l in open(sys.argv[1])]
print('%.3f' % statistics.median(ms[len(ms) // 2:]))" "$log"
}

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); f32, fused, $steps steps"
for spec in "llama tiny 2 16" "llama tiny,head_dim=8 2 16" "gpt2 tiny 8 128"; do
  set -- $spec
  for pin in 0 1; do
    where=$([ $pin = 1 ] && echo "1 core" || echo "free")
    base=$(run $pin "$@")
    active=$(run $pin "$@" OMP_WAIT_POLICY=active)
    one=$(run $pin "$@" OMP_NUM_THREADS=1)
    python3 -c "
b, a, o = map(float, '$base $active $one'.split())
print('%-5s %-16s B%-2s S%-4s %-6s: passive (default) %8.3f ms, active %8.3f ms (x%.2f), 1 thread %8.3f ms (x%.2f)'
      % ('$1', '$2', '$3', '$4', '$where', b, a, a / b, o, o / b))"
  done
done
