#!/usr/bin/env bash
# Prepares what scripts/device-check.sh runs on the GPU machine: packages
# compiled here (the GPU machine has no LLVM), their batches, and the
# results of the CPU backend on them, in devicecheck/ (carry it with the
# call; about 15 MB).
#
#   scripts/device-prepare.sh [BUILD_DIR]      (default: build)
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$src/build}" && pwd)"
mlc="$build/bin/mlc"
runtime="$build/bin/mlc-runtime"
python=/usr/bin/python3
dc="$src/devicecheck"
rm -rf "$dc" && mkdir -p "$dc"
cp "$src/test/integration/Inputs/compare_logs.py" "$src/test/tools/Inputs/compare_safetensors.py" "$dc/"

# Parity: tiny models, 10 steps with dropout on (its masks are the same bits
# on every device), f32 (and GPT-2 and unpadded BERT in bf16), on the CPU here.
batches() { # DIR STEPS ROWS SEQ VOCAB
  "$python" -c "import numpy as np; ids = np.random.default_rng(0).integers(0, $5, ($2, $3, $4)); np.save('$1/input_ids.npy', ids); np.save('$1/labels.npy', ids)"
}
mkdir -p "$dc/gpt2"
batches "$dc/gpt2" 10 4 64 256
"$mlc" compile gpt2 --config tiny,n_layer=2 --micro-batch 4 --seq-len 64 -o "$dc/gpt2/pkg" > /dev/null
mkdir -p "$dc/gpt2-bf16"
"$mlc" compile gpt2 --config tiny,n_layer=2 --micro-batch 4 --seq-len 64 --dtype bf16 -o "$dc/gpt2-bf16/pkg" > /dev/null
# Bucket-wise clipping: the plan scales each gradient bucket where its
# all-reduce starts (the NCCL path, at one rank with MLC_NCCL=1).
mkdir -p "$dc/gpt2-bucket"
"$mlc" compile gpt2 --config tiny,n_layer=2 --micro-batch 4 --seq-len 64 --clip bucket \
  --bucket-cap-mb 0.5 --first-bucket-mb 0.1 -o "$dc/gpt2-bucket/pkg" > /dev/null

"$python" -c "import string; c = string.ascii_lowercase + string.digits + string.punctuation; open('$dc/vocab.txt', 'w').write('\n'.join(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + list(c) + ['##' + x for x in c]) + '\n')"
"$python" -c "import json; paras = [p for p in open('$src/data/corpus/python-docs.txt', encoding='utf-8').read().split('\n\n')[:400] if p.strip()]; open('$dc/c.jsonl', 'w').write(''.join(json.dumps({'text': p}) + '\n' for p in paras))"
"$mlc" preprocess --input "$dc/c.jsonl" --output-prefix "$dc/wp" --tokenizer-type BertWordPieceLowerCase --vocab-file "$dc/vocab.txt" --append-eod > /dev/null
rm "$dc/c.jsonl"
mkdir -p "$dc/bert" "$dc/bert-varlen"
"$mlc" compile bert --config tiny,vocab_size=141 --micro-batch 8 --seq-len 64 -o "$dc/bert/pkg" > /dev/null
"$mlc" compile bert --varlen --config tiny,vocab_size=141 --micro-batch 8 --seq-len 64 -o "$dc/bert-varlen/pkg" > /dev/null
# bf16 packages run attention on tensor cores (packed sequences here).
mkdir -p "$dc/bert-varlen-bf16"
"$mlc" compile bert --varlen --config tiny,vocab_size=141 --micro-batch 8 --seq-len 64 --dtype bf16 \
  -o "$dc/bert-varlen-bf16/pkg" > /dev/null

# The CPU's losses and weights (the GPU machine reruns these lines with
# --device cuda; device-check.sh reads them from here).
cat > "$dc/cases.txt" <<CASES
gpt2 --batches gpt2
gpt2-bucket --batches gpt2 --clip bucket
gpt2-bf16 --batches gpt2
bert --data wp_text_document --vocab-file vocab.txt --split 100,0,0
bert-varlen --data wp_text_document --vocab-file vocab.txt --split 100,0,0
bert-varlen-bf16 --data wp_text_document --vocab-file vocab.txt --split 100,0,0
CASES
export MLC_CACHE_DIR="$build/mlc-cache"
while read -r name args; do
  (cd "$dc" && "$runtime" train "$name/pkg" $args --steps 10 --device cpu \
    --log-json "$name/cpu.jsonl" --save "$name/cpu.safetensors" > /dev/null 2>&1)
done < "$dc/cases.txt"

# Speed: GPT-2 124M at seq 1024, micro-batch 8 and 16, f32 and bf16, 20
# steps of random tokens.
for mb in 8 16; do
  mkdir -p "$dc/small-b$mb"
  batches "$dc/small-b$mb" 20 $mb 1024 50257
  "$mlc" compile gpt2 --config small --micro-batch $mb --seq-len 1024 -o "$dc/small-b$mb/pkg" > /dev/null
  "$mlc" compile gpt2 --config small --micro-batch $mb --seq-len 1024 --dtype bf16 \
    -o "$dc/small-b$mb/pkg-bf16" > /dev/null
done
# The NCCL path at one rank: 25 MB buckets, each summed by NCCL where it is
# ready (MLC_NCCL=1), against the same plan without a communicator.
"$mlc" compile gpt2 --config small --micro-batch 8 --seq-len 1024 --clip bucket \
  -o "$dc/small-b8/pkg-buckets" > /dev/null
du -sh "$dc"
