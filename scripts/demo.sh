#!/usr/bin/env bash
# The main job of `make demo`: build GPT-2 tiny and show its graph.
set -euo pipefail
build=${1:-build}
echo "== mlc compile gpt2 --config tiny --emit=graph (first lines) =="
"$build/bin/mlc" compile gpt2 --config tiny --micro-batch 4 --seq-len 64 --emit=graph | head -n 60
