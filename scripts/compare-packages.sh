#!/usr/bin/env bash
# Writes the plan, C++ kernels and CUDA kernels of the builtin models under
# the flag sets whose lowering decisions differ (fused, unfused, f64, bf16,
# BERT unpadded, packed documents, recomputation, tensor parallelism), and of
# the ONNX test models, into
# OUTDIR, one file per configuration and output, for a byte-for-byte diff of
# two builds:
#
#   scripts/compare-packages.sh build-before/bin/mlc /tmp/before
#   scripts/compare-packages.sh build/bin/mlc /tmp/after
#   diff -r /tmp/before /tmp/after && echo byte-identical
#
# A plan that differs while its kernels do not: scripts/plan_steps.py
# compares the two step by step with every view resolved to its buffer.
set -euo pipefail
mlc=${1:?usage: compare-packages.sh MLC OUTDIR}
out=${2:?usage: compare-packages.sh MLC OUTDIR}
mkdir -p "$out"
configs=(
  "gpt2 --fuse --config=tiny"
  "gpt2 --no-fuse --config=tiny"
  "gpt2 --dtype=f64 --config=tiny"
  "gpt2 --dtype=bf16 --config=tiny"
  "gpt2 --dtype=bf16 --no-fuse --config=tiny"
  "gpt2 --reset-attention-mask --reset-position-ids --config=tiny"
  # head size 32: the tensor-core attention, whose bf16 result is written
  # in its reader's layout
  "gpt2 --dtype=bf16 --reset-attention-mask --reset-position-ids --config=tiny,n_embd=64,n_head=2"
  "gpt2 --recompute=full --config=tiny"
  "gpt2 --recompute=selective --config=tiny"
  "gpt2 --tensor-parallel=2 --config=tiny"
  "gpt2 --inference --config=tiny"
  "bert --fuse --config=tiny"
  "bert --no-fuse --config=tiny"
  "bert --dtype=f64 --config=tiny"
  "bert --dtype=bf16 --config=tiny"
  "bert --varlen --config=tiny"
  "bert --varlen --dtype=bf16 --config=tiny"
  "bert --recompute=full --config=tiny"
  "llama --fuse --config=tiny"
  "llama --no-fuse --config=tiny"
  "llama --dtype=f64 --config=tiny"
  "llama --dtype=bf16 --config=tiny"
  "llama --reset-attention-mask --reset-position-ids --config=tiny"
  "llama --tensor-parallel=2 --config=tiny"
)
# The ONNX fixtures (test/onnx/Inputs; modern/ holds the families whose
# attention and MLP layouts differ: GPT-NeoX, Phi3, Falcon, Gemma ...).
here=$(cd "$(dirname "$0")/.." && pwd)
for f in "$here"/test/onnx/Inputs/modern/*.onnx "$here"/test/onnx/Inputs/*-train.onnx; do
  [ -e "$f" ] && configs+=("$f --micro-batch=2 --seq-len=16")
done
status=0
for c in "${configs[@]}"; do
  name=$(echo "$c" | sed -e "s|$here/||" -e 's|[ =/]|_|g')
  for emit in plan kernels cuda; do
    # shellcheck disable=SC2086
    if ! "$mlc" compile $c --emit=$emit -o "$out/$name.$emit" \
         2> "$out/$name.$emit.err"; then
      echo "failed: mlc compile $c --emit=$emit" >&2
      status=1
    fi
  done
done
exit $status
