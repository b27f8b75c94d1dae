#!/usr/bin/env bash
# The main job of `make demo`: train GPT-2 tiny on the bundled corpus (Python's
# documentation, byte-level vocabulary) and show the loss fall below the
# corpus' unigram entropy.
set -euo pipefail
build=${1:-build}
corpus=data/corpus/python-docs.txt
steps=${MLC_DEMO_STEPS:-600}
export MLC_CACHE_DIR=${MLC_CACHE_DIR:-$build/mlc-cache}

entropy=$(/usr/bin/python3 - "$corpus" <<'PY'
import collections, math, sys
data = open(sys.argv[1], "rb").read()
n = len(data)
print(f"{-sum(c / n * math.log(c / n) for c in collections.Counter(data).values()):.3f}")
PY
)
echo "== corpus: $corpus ($(du -h "$corpus" | cut -f1)), unigram entropy $entropy nats/byte"
echo "== mlc train gpt2 --config tiny (2 layers, 128 wide, byte vocabulary), $steps steps"
log=$(mktemp)
"$build/bin/mlc" train gpt2 --config tiny --micro-batch 8 --seq-len 128 \
  --data "$corpus" --steps "$steps" --lr 2e-3 --warmup 30 --lr-schedule cosine \
  --min-lr 2e-4 --weight-decay 0.1 --clip-grad 1.0 --log-every 25 --log-json "$log" \
  --save "$build/demo.safetensors"
/usr/bin/python3 - "$log" "$entropy" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
last = sum(r["loss"] for r in rows[-20:]) / min(20, len(rows))
entropy = float(sys.argv[2])
print(f"== first loss {rows[0]['loss']:.3f}, mean of the last 20 steps {last:.3f} nats/byte; "
      f"unigram entropy {entropy:.3f}: {'below' if last < entropy else 'NOT below'}")
PY
rm -f "$log"
echo "== a sample of the trained model (mlc generate, temperature 0.8, top-k 40):"
"$build/bin/mlc" generate gpt2 --config tiny --seq-len 128 --init "$build/demo.safetensors" \
  --prompt "The " --max-tokens 200 --temperature 0.8 --top-k 40 --seed 1
