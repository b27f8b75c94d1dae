"""An ONNX export through mlc against PyTorch (HuggingFace) and onnxruntime.

Rebuilds the HF model of a fixture from its config (NAME.json) and the
export's initializers (names resolved through the Identity nodes that the
eval-mode exporter leaves where it merged equal initializers), then checks:

- `mlc run MODEL.onnx` logits (and loss) against PyTorch's eval forward and
  onnxruntime's, at the exported shape and at a smaller batch and sequence
  (the symbolic dims);
- with --train: the per-step losses of 10 AdamW steps of `mlc train
  MODEL.onnx` (global clipping at 1.0) against torch.optim.AdamW on the HF
  model, whose parameters are separate (dropout off, as in the export).
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "integration", "Inputs"))
import torch_models as tm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--fixture", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--loss", default="")
ap.add_argument("--train", action="store_true")
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--device", default="cpu")
args = ap.parse_args()

torch.set_num_threads(1)
os.makedirs(args.work, exist_ok=True)
here = os.path.dirname(__file__)
model_path = os.path.join(here, args.fixture + ".onnx")
cfg = json.load(open(os.path.join(here, args.fixture + ".json")))
family = cfg["model_type"]
# The export's graph decides dropout; PyTorch runs without it.
for k in list(cfg):
    if "drop" in k and isinstance(cfg[k], float):
        cfg[k] = 0.0
if family == "gpt2":
    model = GPT2LMHeadModel(GPT2Config(**cfg))
else:
    model = BertForMaskedLM(BertConfig(**cfg))

# Weights from the export.
proto = onnx.load(model_path)
inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
alias = {n.output[0]: n.input[0] for n in proto.graph.node
         if n.op_type == "Identity" and n.input[0] in inits}
state = model.state_dict()
loaded = set()
for name in state:
    src = name if name in inits else alias.get(name)
    if src is not None and inits[src].shape == tuple(state[name].shape):
        state[name] = torch.from_numpy(inits[src].copy())
        loaded.add(name)
model.load_state_dict(state)
missing = [n for n, _ in model.named_parameters() if n not in loaded]
# An export with constant folding (the exporter's default) renames transposed
# weights (onnx::MatMul_N): onnxruntime is then the only reference.
torch_ref = not missing
if not torch_ref:
    print(f"{args.fixture}: {len(missing)} HF parameters renamed by the exporter; "
          "comparing with onnxruntime only")
    if args.train:
        sys.exit("--train needs HF parameter names in the export")
input_names = [i.name for i in proto.graph.input if i.name not in inits]
output_names = [o.name for o in proto.graph.output]
V = cfg["vocab_size"]


def batch(rng, B, S):
    ids = rng.integers(0, V, size=(B, S))
    b = {"input_ids": ids}
    if family == "gpt2":
        b["labels"] = ids.copy()
    else:
        mask = np.ones((B, S), dtype=np.int64)
        if B > 1:
            mask[1, S * 2 // 3:] = 0
        labels = np.where(rng.random((B, S)) < 0.3, ids, -100)
        labels[mask == 0] = -100
        labels[0, 0] = ids[0, 0]
        b.update(token_type_ids=rng.integers(0, 2, size=(B, S)), attention_mask=mask,
                 labels=labels)
    return {k: v.astype(np.int64) for k, v in b.items()}


def torch_forward(b):
    kw = {k: torch.from_numpy(v) for k, v in b.items()}
    out = model(**kw, return_dict=True)
    return out.loss, out.logits


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


extra = ["--loss", args.loss] if args.loss else []
fed = input_names + (["labels"] if args.loss else [])
failures = []
rng = np.random.default_rng(0)
model.eval()
session = ort.InferenceSession(model_path)
for B, S in ((2, 16), (1, 8)):
    b = batch(rng, B, S)
    files = []
    for name in fed:
        path = os.path.join(args.work, f"{name}-{B}x{S}.npy")
        np.save(path, b[name])
        files += ["--input", f"{name}={path}"]
    out = os.path.join(args.work, f"out-{B}x{S}")
    subprocess.run([args.mlc, "run", model_path, *extra, *files, "--output-dir", out, "--device",
                    args.device], check=True)
    got = np.load(os.path.join(out, "logits.npy"))
    ref_ort = dict(zip(output_names, session.run(None, {n: b[n] for n in input_names})))
    with torch.no_grad():
        loss, logits = torch_forward(b) if torch_ref else (None, torch.from_numpy(ref_ort["logits"]))
    r_torch, r_ort = rel(got, logits.numpy()), rel(got, ref_ort["logits"])
    print(f"{args.fixture} [{B}x{S}] logits: max rel diff " +
          (f"{r_torch:.1e} (PyTorch), " if torch_ref else "") + f"{r_ort:.1e} (onnxruntime)")
    if max(r_torch, r_ort) > 1e-4:
        failures.append(f"[{B}x{S}] logits differ: {r_torch:.2e} / {r_ort:.2e}")
    if "labels" in fed and torch_ref:
        r = rel(np.load(os.path.join(out, "loss.npy")), loss.numpy())
        print(f"{args.fixture} [{B}x{S}] loss: rel diff {r:.1e} (PyTorch)")
        if r > 1e-4:
            failures.append(f"[{B}x{S}] loss differs by {r:.2e}")

if args.train:
    LR, WD, BETAS, EPS, CLIP = 1e-3, 0.01, (0.9, 0.999), 1e-8, 1.0
    steps = [batch(rng, 2, 16) for _ in range(args.steps)]
    bdir = os.path.join(args.work, "batches")
    os.makedirs(bdir, exist_ok=True)
    for name in fed:
        np.save(os.path.join(bdir, name + ".npy"), np.stack([s[name] for s in steps]))
    model.train()
    params = dict(model.named_parameters())
    opt = tm.adamw(params, LR, WD, BETAS, EPS)
    ref = []
    for s in steps:
        opt.zero_grad()
        loss, _ = torch_forward(s)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), CLIP)
        opt.step()
        ref.append(loss.item())
    log = os.path.join(args.work, "train.jsonl")
    subprocess.run([args.mlc, "train", model_path, *extra, "--device", args.device, "--batches",
                    bdir, "--steps",
                    str(args.steps), "--lr", str(LR), "--lr-schedule", "constant",
                    "--weight-decay", str(WD), "--clip-grad", str(CLIP), "--log-json", log,
                    "--log-every", "100"], check=True)
    got = [json.loads(line)["loss"] for line in open(log)]
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
    print(f"{args.fixture} train: {len(got)} steps, loss {ref[0]:.5f} -> {ref[-1]:.5f}, "
          f"max rel diff {worst:.1e}")
    if len(got) != args.steps or worst > 1e-4:
        failures.append(f"training losses differ by {worst:.2e}: mlc {got} torch {ref}")

if failures:
    print("ONNX PARITY FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ONNX PARITY OK")
