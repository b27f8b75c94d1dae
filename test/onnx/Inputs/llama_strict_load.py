"""Loads `mlc train --save`'s weights of a Llama-family ONNX export strictly
into transformers' model (the test venv's transformers 4.38.2, which builds
the same model from the fixture's transformers 5 config) and checks them.

  python test/onnx/Inputs/llama_strict_load.py --fixture llama-dynamo-opset20-noopt \\
      --saved trained.safetensors

Prints lines ending in MATCH or MISMATCH, then `STRICT LOAD MATCH` (exit 0)
or `STRICT LOAD MISMATCH` (exit 1):
- the config rebuilt in 4.38.2 with the fixture's -init weights gives the
  stored torch 2.15 logits (so the two versions build one model);
- load_state_dict(saved, strict=True) takes mlc's tensors (every parameter
  present under its HF name, nothing else: no buffer such as inv_freq);
- that model's logits match those of the stored torch-trained weights.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import load_file

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modern")

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--fixture", required=True)
ap.add_argument("--saved", required=True)
ap.add_argument("--tol", type=float, default=1e-5, help="logits, relative to max abs")
ap.add_argument("--trained-tol", type=float, default=1e-4,
                help="logits of mlc's vs torch's trained weights, relative to max abs")
args = ap.parse_args()

meta = json.load(open(os.path.join(HERE, args.fixture + ".json")))
cfg = json.load(open(os.path.join(HERE, meta["config"])))
ref = np.load(os.path.join(HERE, meta["reference"]))
ok_all = []


def report(line, ok):
    ok_all.append(ok)
    print(line + (" MATCH" if ok else " MISMATCH"))


def build():
    """The fixture's model in this transformers: rope_parameters (5.x) back
    to rope_theta (4.x)."""
    c = dict(cfg)
    c["rope_theta"] = c.pop("rope_parameters", {}).get("rope_theta", c.get("rope_theta"))
    cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
           "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM)}[c["model_type"]]
    for k in ("transformers_version", "model_type", "head_dim", "layer_types", "dtype"):
        c.pop(k, None)
    model = cls[1](cls[0](**c)).eval()
    head = model.config.hidden_size // model.config.num_attention_heads
    assert head == cfg.get("head_dim", head), "head_dim differs from hidden/heads"
    return model


def logits(model, state):
    model.load_state_dict(state, strict=True)
    with torch.no_grad():
        return model(torch.from_numpy(ref["export_input_ids"])).logits.numpy()


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


torch.manual_seed(0)
model = build()
init = logits(model, load_file(os.path.join(HERE, meta["weights"]["init"])))
d = rel(init, ref["export_logits"])
report(f"transformers {transformers.__version__} rebuilds {args.fixture}'s model: logits "
       f"max rel diff {d:.1e} (tol {args.tol:g})", d <= args.tol)
saved = load_file(args.saved)
try:
    mine = logits(model, saved)
except RuntimeError as e:
    report(f"load_state_dict(strict=True) of {args.saved}: {str(e).splitlines()[0]}", False)
else:
    report(f"load_state_dict(strict=True) of {len(saved)} tensors", True)
    theirs = logits(model, load_file(os.path.join(HERE, meta["weights"]["trained"])))
    d = rel(mine, theirs)
    report(f"logits of mlc's trained weights vs torch's: max rel diff {d:.1e} "
           f"(tol {args.trained_tol:g})", d <= args.trained_tol)
print("STRICT LOAD MATCH" if all(ok_all) else "STRICT LOAD MISMATCH")
sys.exit(0 if all(ok_all) else 1)
