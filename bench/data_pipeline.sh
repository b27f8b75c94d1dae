#!/usr/bin/env bash
# The data pipeline beside training: preprocessing MB/s, the loader's tokens/s
# and the training step's tokens/s on the same data, in one run.
#
#   bench/data_pipeline.sh [build]
set -euo pipefail
build=${1:-build}
mlc="$build/bin/mlc"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$work/c.jsonl" <<'PY'
import json, sys
paras = [p for p in open("data/corpus/python-docs.txt", encoding="utf-8").read().split("\n\n") if p.strip()]
with open(sys.argv[1], "w") as f:
    for _ in range(4):  # about 10 MB
        for p in paras:
            f.write(json.dumps({"text": p}) + "\n")
PY
echo "== corpus: $(du -h "$work/c.jsonl" | cut -f1) of JSONL"
"$mlc" tokenizer train --input "$work/c.jsonl" --vocab-size 8192 --output-dir "$work/bpe" >/dev/null
for workers in 1 2; do
  "$mlc" preprocess --input "$work/c.jsonl" --output-prefix "$work/byte" --append-eod \
    --workers $workers 2>/dev/null | sed "s/^/ByteTokenizer, $workers workers: /"
  "$mlc" preprocess --input "$work/c.jsonl" --output-prefix "$work/bpe" --append-eod \
    --tokenizer-type GPT2BPETokenizer --vocab-file "$work/bpe/vocab.json" \
    --merge-file "$work/bpe/merges.txt" --workers $workers 2>/dev/null |
    sed "s/^/GPT2BPETokenizer, $workers workers: /"
done
loader=$("$mlc" data loader "$work/bpe_text_document" --seq-len 256 --count 20000)
echo "$loader"
"$mlc" train gpt2 --config tiny,vocab_size=8192,n_positions=256,n_layer=2 --micro-batch 8 \
  --seq-len 256 --data "$work/bpe_text_document" --steps 8 --log-json "$work/log.jsonl" 2>/dev/null
/usr/bin/python3 - "$work/log.jsonl" "$loader" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
train = statistics.median(r["tokens_per_s"] for r in rows[2:])
loader = float(re.search(r"([0-9.]+) tokens/s", sys.argv[2]).group(1))
print(f"training gpt2 tiny (2 layers, vocab 8192, seq 256, micro-batch 8): {train:.0f} tokens/s; "
      f"loader / training = {loader / train:.0f}x")
PY
