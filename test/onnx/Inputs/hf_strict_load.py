"""mlc train --save's weights of an ONNX model in transformers, strictly.

Trains modern/NAME.onnx (an optimize=False dynamo export, HF names) for
--steps AdamW steps with --save, then:

- builds the HF model of the fixture's config (GPT2LMHeadModel or
  BertForMaskedLM) and `load_state_dict(saved, strict=True)`: every name the
  model has, tied ones included (GPT-2's transformer.wte.weight is
  lm_head.weight, which the export keeps once), and no other;
- checks that each tied pair was saved with equal values, and that
  `from_pretrained` of a directory with the config and the file reports no
  missing, unexpected or mismatched keys;
- runs the HF model on the fixture's 2x16 inputs and compares its logits with
  `mlc run NAME.onnx --init saved` (max abs diff / max abs logit <= --tol).

Prints `HF STRICT MATCH` (exit 0) or `HF STRICT MISMATCH: why` (exit 1).

  python test/onnx/Inputs/hf_strict_load.py --mlc build/bin/mlc \\
      --fixture gpt2-dynamo-opset20-noopt --work DIR
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import load_file

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modern")

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--mlc", required=True)
ap.add_argument("--fixture", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--tol", type=float, default=1e-5)
args = ap.parse_args()


def fail(why):
    print(f"HF STRICT MISMATCH: {why}")
    sys.exit(1)


def mlc(cmd):
    p = subprocess.run([args.mlc, *cmd], capture_output=True, text=True)
    if p.returncode:
        fail(f"mlc {cmd[0]} failed:\n{p.stderr}")
    return p.stderr


meta = json.load(open(os.path.join(HERE, args.fixture + ".json")))
model_path = os.path.join(HERE, args.fixture + ".onnx")
os.makedirs(args.work, exist_ok=True)
inputs = {n: np.array(v, dtype=np.int64) for n, v in meta["input_values"]["export"].items()}
files = []
for n, v in inputs.items():
    p = os.path.join(args.work, n + ".npy")
    np.save(p, v)
    files += ["--input", f"{n}={p}"]

# A few steps on the fixture's own inputs (labels = input_ids: HF's MLM and
# causal-LM losses both take that).
bdir = os.path.join(args.work, "batches")
os.makedirs(bdir, exist_ok=True)
for n, v in [*inputs.items(), ("labels", inputs["input_ids"])]:
    np.save(os.path.join(bdir, n + ".npy"), np.stack([v] * args.steps))  # [steps, B, S]
saved = os.path.join(args.work, "trained.safetensors")
loss = "causal-lm" if meta["family"] == "gpt2" else "masked-lm"
mlc(["train", model_path, "--loss", loss, "--batches", bdir, "--steps", str(args.steps),
     "--lr", "1e-2", "--progress", "plain", "--save", saved])
out = os.path.join(args.work, "run")
mlc(["run", model_path, *files, "--init", saved, "--output-dir", out])
got = np.load(os.path.join(out, "logits.npy"))

cfg_path = os.path.join(HERE, meta["config"])
if meta["family"] == "gpt2":
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config.from_json_file(cfg_path))
else:
    model = transformers.BertForMaskedLM(transformers.BertConfig.from_json_file(cfg_path))
state = load_file(saved)
try:
    model.load_state_dict(state, strict=True)
except RuntimeError as e:
    fail(f"load_state_dict(strict=True): {e}")
for a, b in meta["weights"].get("tied", []):
    if not torch.equal(state[a], state[b]):
        fail(f"tied {a} and {b} were saved with different values")
# from_pretrained too: it wants the header's {"format": "pt"} and re-ties.
pdir = os.path.join(args.work, "pretrained")
os.makedirs(pdir, exist_ok=True)
shutil.copy(cfg_path, os.path.join(pdir, "config.json"))
shutil.copy(saved, os.path.join(pdir, "model.safetensors"))
_, info = type(model).from_pretrained(pdir, output_loading_info=True)
if any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")):
    fail(f"from_pretrained: {info}")
model.eval()
with torch.no_grad():
    want = model(**{n: torch.from_numpy(v) for n, v in inputs.items()}).logits.numpy()
r = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
tied = ", ".join("=".join(t) for t in meta["weights"].get("tied", []))
print(f"{args.fixture}: {len(state)} tensors load strictly and by from_pretrained (tied: {tied}); "
      f"logits max rel diff {r:.1e} (tol {args.tol:g})")
if r > args.tol:
    fail("logits differ")
print("HF STRICT MATCH")
