#!/usr/bin/env bash
# Writes the plan, C++ kernels and CUDA kernels of the builtin models under
# the flag sets whose lowering decisions differ (fused, unfused, f64, bf16,
# BERT unpadded, packed documents, recomputation, tensor parallelism) into
# OUTDIR, one file per configuration and output, for a byte-for-byte diff of
# two builds:
#
#   scripts/compare-packages.sh build-before/bin/mlc /tmp/before
#   scripts/compare-packages.sh build/bin/mlc /tmp/after
#   diff -r /tmp/before /tmp/after && echo byte-identical
set -euo pipefail
mlc=${1:?usage: compare-packages.sh MLC OUTDIR}
out=${2:?usage: compare-packages.sh MLC OUTDIR}
mkdir -p "$out"
configs=(
  "gpt2 --fuse"
  "gpt2 --no-fuse"
  "gpt2 --dtype=f64"
  "gpt2 --dtype=bf16"
  "gpt2 --dtype=bf16 --no-fuse"
  "gpt2 --reset-attention-mask --reset-position-ids"
  "gpt2 --recompute=full"
  "gpt2 --recompute=selective"
  "gpt2 --tensor-parallel=2"
  "gpt2 --inference"
  "bert --fuse"
  "bert --no-fuse"
  "bert --dtype=f64"
  "bert --dtype=bf16"
  "bert --varlen"
  "bert --varlen --dtype=bf16"
  "bert --recompute=full"
  "llama --fuse"
  "llama --no-fuse"
  "llama --dtype=f64"
  "llama --dtype=bf16"
  "llama --reset-attention-mask --reset-position-ids"
  "llama --tensor-parallel=2"
)
status=0
for c in "${configs[@]}"; do
  name=$(echo "$c" | tr ' =' '_-')
  for emit in plan kernels cuda; do
    # shellcheck disable=SC2086
    if ! "$mlc" compile $c --config=tiny --emit=$emit -o "$out/$name.$emit" \
         2> "$out/$name.$emit.err"; then
      echo "failed: mlc compile $c --emit=$emit" >&2
      status=1
    fi
  done
done
exit $status
