#!/usr/bin/env bash
# BERT tiny, masked-LM, unpadded batches from a WordPiece dataset.
set -euo pipefail
build=${1:-build}
steps=${STEPS:-200}
out=${OUT:-$(mktemp -d)}
mlc="$build/bin/mlc"
python3 - "$out" <<'PY'
import json, string, sys
out = sys.argv[1]
chars = string.ascii_lowercase + string.digits + string.punctuation
specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
open(f"{out}/vocab.txt", "w").write("\n".join(specials + list(chars) + ["##" + c for c in chars]) + "\n")
paras = [p for p in open("data/corpus/python-docs.txt", encoding="utf-8").read().split("\n\n") if p.strip()]
open(f"{out}/corpus.jsonl", "w").write("".join(json.dumps({"text": p}) + "\n" for p in paras[:3000]))
PY
"$mlc" preprocess --input "$out/corpus.jsonl" --output-prefix "$out/wp" \
  --tokenizer-type BertWordPieceLowerCase --vocab-file "$out/vocab.txt" --append-eod
"$mlc" train bert --varlen --config tiny,vocab_size=141 --micro-batch 8 --seq-len 64 \
  --data "$out/wp_text_document" --vocab-file "$out/vocab.txt" --split 95,5,0 \
  --steps "$steps" --lr 1e-3 --eval-interval 50 --eval-iters 4 --progress plain --log-every 50
