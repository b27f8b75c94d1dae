#!/usr/bin/env bash
# The compiled AdamW against memory bandwidth: compiles a GPT-2 package of
# about 35M parameters (n_layer=4, n_embd=768, vocab 16384) and runs its
# @optimizer beside two STREAM-style triads (bench/adamw_bandwidth.cpp).
#   bench/adamw.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
PKG=$(mktemp -d)/gpt2-adamw
"$BUILD/bin/mlc" compile gpt2 --config small,n_layer=4,vocab_size=16384 --micro-batch 1 \
  --seq-len 64 -o "$PKG" > /dev/null
"$BUILD/bin/mlc-bench-adamw" "$PKG"
