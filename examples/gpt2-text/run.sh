#!/usr/bin/env bash
# GPT-2 tiny on a text file: train, plot, sample.
set -euo pipefail
build=${1:-build}
steps=${STEPS:-300}
out=${OUT:-$(mktemp -d)}
mlc="$build/bin/mlc"
"$mlc" train gpt2 --config tiny --micro-batch 8 --seq-len 128 \
  --data data/corpus/python-docs.txt --steps "$steps" --lr 2e-3 --warmup 20 \
  --save-dir "$out/ckpt" --save-interval 100 --log-json "$out/log.jsonl" --progress plain \
  --log-every 50
"$mlc" plot "$out/log.jsonl" -o "$out/loss.png"
latest=$(ls -d "$out"/ckpt/step-* | tail -1)
"$mlc" generate gpt2 --config tiny --seq-len 128 --init "$latest/model.safetensors" \
  --prompt "The " --max-tokens 80 --temperature 0.8 --top-k 40
