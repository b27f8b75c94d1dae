#!/usr/bin/env bash
# Pre-train on one text, fine-tune from the checkpoint's weights on another.
set -euo pipefail
build=${1:-build}
steps=${STEPS:-200}
out=${OUT:-$(mktemp -d)}
mlc="$build/bin/mlc"
"$mlc" train gpt2 --config tiny --micro-batch 8 --seq-len 64 \
  --data data/corpus/python-docs.txt --steps "$steps" --lr 2e-3 --save-dir "$out/pre" \
  --progress plain --log-every 100
"$mlc" train gpt2 --config tiny --micro-batch 8 --seq-len 64 \
  --init "$out/pre/step-$(printf %08d "$steps")/model.safetensors" \
  --data data/corpus/LICENSE-python-docs.txt --steps "$steps" --lr 5e-4 --warmup 10 \
  --save "$out/finetuned.safetensors" --progress plain --log-every 100
