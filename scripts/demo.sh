#!/usr/bin/env bash
# The main job of `make demo`: train GPT-2 tiny on the prose of the bundled
# corpus (Python's documentation) with a byte-level BPE vocabulary learned
# from it, show the loss fall below the tokens' unigram entropy, and sample
# from the trained model. About a minute on two idle cores.
set -euo pipefail
build=${1:-build}
corpus=data/corpus/python-docs.txt
steps=${MLC_DEMO_STEPS:-2400}
vocab=2048
work=$build/demo
export MLC_CACHE_DIR=${MLC_CACHE_DIR:-$build/mlc-cache}
mlc=$build/bin/mlc
mkdir -p "$work"

echo "== corpus: $corpus ($(du -h "$corpus" | cut -f1)), its paragraphs of prose (markup, code and headings left out):"
/usr/bin/python3 scripts/demo_prose.py "$corpus" "$work/prose.jsonl"
echo "== mlc tokenizer train: a $vocab-entry byte-level BPE learned from the prose; mlc preprocess"
"$mlc" tokenizer train --input "$work/prose.jsonl" --vocab-size $vocab --output-dir "$work/tokenizer"
bpe=(--vocab-file "$work/tokenizer/vocab.json" --merge-file "$work/tokenizer/merges.txt")
"$mlc" preprocess --input "$work/prose.jsonl" --output-prefix "$work/prose" \
  --tokenizer-type GPT2BPETokenizer "${bpe[@]}" --append-eod > /dev/null
entropy=$(/usr/bin/python3 - "$work/prose_text_document.bin" <<'PY'
import array, collections, math, sys
ids = array.array("H", open(sys.argv[1], "rb").read())  # the dataset's uint16 token ids
n = len(ids)
print(f"{-sum(c / n * math.log(c / n) for c in collections.Counter(ids).values()):.3f}")
PY
)
echo "== unigram entropy of the tokens: $entropy nats/token"
echo "== mlc train gpt2 --config tiny (2 layers, 128 wide, $vocab-token vocabulary), $steps steps"
log=$(mktemp)
"$mlc" train gpt2 --config tiny,vocab_size=$vocab --micro-batch 8 --seq-len 128 \
  --data "$work/prose_text_document" "${bpe[@]}" --steps "$steps" --lr 3e-3 --warmup 50 \
  --lr-schedule cosine --min-lr 3e-4 --weight-decay 0.1 --clip-grad 1.0 --log-every 100 \
  --log-json "$log" --save "$work/gpt2-tiny.safetensors"
/usr/bin/python3 - "$log" "$entropy" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if "loss" in line]
last = sum(r["loss"] for r in rows[-20:]) / min(20, len(rows))
entropy = float(sys.argv[2])
print(f"== first loss {rows[0]['loss']:.3f}, mean of the last 20 steps {last:.3f} nats/token; "
      f"unigram entropy {entropy:.3f}: {'below' if last < entropy else 'NOT below'}")
PY
rm -f "$log"
echo "== a sample of the trained model (mlc generate, temperature 0.6, top-k 40):"
"$mlc" generate gpt2 --config tiny,vocab_size=$vocab --seq-len 128 \
  --init "$work/gpt2-tiny.safetensors" --tokenizer-type GPT2BPETokenizer "${bpe[@]}" \
  --prompt "In this tutorial, you" --max-tokens 100 --temperature 0.6 --top-k 40 --seed 1
