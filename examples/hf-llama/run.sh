#!/usr/bin/env bash
# A tiny Llama-shaped model trained on the prose of the bundled corpus with a
# tokenizer.json (byte-level BPE, as Llama-3's), saved as a Hugging Face model
# directory, then loaded and sampled by transformers, and by mlc generate from
# the same directory (its tokenizer and generation_config.json).
set -euo pipefail
build=${1:-build}
steps=${STEPS:-400}
out=${OUT:-$(mktemp -d)}
mlc="$build/bin/mlc"
here=examples/hf-llama
# transformers: the test venv's Python if there is one.
py=$build/venv/bin/python
[ -x "$py" ] || py=python3
mkdir -p "$out"

python3 scripts/demo_prose.py data/corpus/python-docs.txt "$out/prose.jsonl"
"$mlc" preprocess --input "$out/prose.jsonl" --output-prefix "$out/prose" \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$here/tokenizer" --append-eod
# 2 layers, 128 wide, grouped-query attention (4 heads, 2 of keys and values);
# config.json, the weights and the tokenizer files go into model/.
config=tiny,vocab_size=512,hidden_size=128,intermediate_size=344,num_hidden_layers=2
config=$config,num_attention_heads=4,num_key_value_heads=2,max_position_embeddings=128
"$mlc" train llama --config "$config" --micro-batch 8 --seq-len 128 \
  --data "$out/prose_text_document" --steps "$steps" --lr 3e-3 --warmup 20 \
  --min-lr 3e-4 --weight-decay 0.1 --save "$out/model/" --tokenizer-model "$here/tokenizer" \
  --progress plain --log-every 50
ls "$out/model"
"$py" "$here/sample.py" "$out/model" "In this tutorial, you"
echo "== mlc generate from the directory (its tokenizer, generation_config.json's sampling):"
"$mlc" generate llama --config "$out/model" --init "$out/model" --prompt "In this tutorial, you" \
  --seed 1
