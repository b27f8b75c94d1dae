"""mlc against PyTorch on the same weights and batches.

Checks that `mlc run` logits and loss match PyTorch's forward, and that the
per-step losses of `mlc train` (AdamW, constant learning rate, with and without
gradient clipping) match torch.optim.AdamW over the same steps.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--model", choices=["gpt2", "bert"], required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--dtype", default="f32")
ap.add_argument("--steps", type=int, default=10)
args = ap.parse_args()

torch.set_num_threads(1)
os.makedirs(args.work, exist_ok=True)
tdtype = torch.float32 if args.dtype == "f32" else torch.float64
B, S, V, E, L, H = 2, 16, 64, 32, 2, 4
LR, WD, BETAS, EPS = 1e-3, 0.01, (0.9, 0.999), 1e-8
rng = np.random.default_rng(0)

if args.model == "gpt2":
    config = f"tiny,vocab_size={V},n_positions=32,n_embd={E},n_layer={L},n_head={H}," \
             "resid_pdrop=0,embd_pdrop=0,attn_pdrop=0"
    shapes = tm.gpt2_shapes(V, 32, E, L)
    ids = rng.integers(0, V, size=(args.steps, B, S))
    batches = {"input_ids": ids, "labels": ids.copy()}
else:
    I = 48
    config = f"tiny,vocab_size={V},max_position_embeddings=32,hidden_size={E}," \
             f"num_hidden_layers={L},num_attention_heads={H},intermediate_size={I}," \
             "hidden_dropout_prob=0,attention_probs_dropout_prob=0"
    shapes = tm.bert_shapes(V, 32, 2, E, L, I)
    ids = rng.integers(0, V, size=(args.steps, B, S))
    types = rng.integers(0, 2, size=(args.steps, B, S))
    mask = np.ones((args.steps, B, S), dtype=np.int64)
    mask[:, 1, 11:] = 0  # the second row is padded after 11 tokens
    labels = np.where(rng.random((args.steps, B, S)) < 0.3, ids, -100)
    labels[:, 1, 11:] = -100
    labels[:, 0, 0] = ids[:, 0, 0]  # at least one label per step
    batches = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
               "labels": labels}

params = tm.init_params(shapes, seed=7, dtype=tdtype)
weights = os.path.join(args.work, "weights.safetensors")
tm.write_safetensors(weights, params)
bdir = os.path.join(args.work, "batches")
os.makedirs(bdir, exist_ok=True)
for name, arr in batches.items():
    np.save(os.path.join(bdir, name + ".npy"), arr.astype(np.int64))


def torch_forward(p, t):
    tb = {k: torch.from_numpy(v[t]) for k, v in batches.items()}
    if args.model == "gpt2":
        return tm.gpt2_forward(p, tb["input_ids"], tb["labels"], L, H)
    return tm.bert_forward(p, tb["input_ids"], tb["token_type_ids"], tb["attention_mask"],
                           tb["labels"], L, H)


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


failures = []
common = [args.mlc, "--config", config, "--micro-batch", str(B), "--seq-len", str(S),
          "--dtype", args.dtype, "--init", weights]

# Forward: logits and loss of step 0's batch.
inputs = []
for name, arr in batches.items():
    path = os.path.join(args.work, name + "0.npy")
    np.save(path, arr[0].astype(np.int64))
    inputs += ["--input", f"{name}={path}"]
out = os.path.join(args.work, "out")
subprocess.run([args.mlc, "run", args.model] + common[1:] + inputs + ["--output-dir", out],
               check=True)
with torch.no_grad():
    loss, logits = torch_forward(params, 0)
r = rel(np.load(os.path.join(out, "logits.npy")), logits.numpy())
print(f"{args.model} {args.dtype} forward: logits max rel diff {r:.2e}")
if r > 1e-4:
    failures.append(f"logits differ by {r:.2e}")
r = rel(np.load(os.path.join(out, "loss.npy")), loss.numpy())
print(f"{args.model} {args.dtype} forward: loss rel diff {r:.2e}")
if r > 1e-4:
    failures.append(f"loss differs by {r:.2e}")

# Training: per-step losses with and without clipping.
for clip in (0.0, 1.0):
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    opt = tm.adamw(p, LR, WD, BETAS, EPS)
    ref = []
    for t in range(args.steps):
        opt.zero_grad()
        loss, _ = torch_forward(p, t)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(list(p.values()), clip)
        opt.step()
        ref.append(loss.item())
    log = os.path.join(args.work, f"train-clip{clip}.jsonl")
    subprocess.run([args.mlc, "train", args.model] + common[1:] +
                   ["--batches", bdir, "--steps", str(args.steps), "--lr", str(LR),
                    "--lr-schedule", "constant", "--weight-decay", str(WD),
                    "--clip-grad", str(clip), "--log-json", log, "--log-every", "100"],
                   check=True)
    got = [json.loads(line)["loss"] for line in open(log)]
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
    print(f"{args.model} {args.dtype} train clip={clip}: {len(got)} steps, "
          f"loss {ref[0]:.5f} -> {ref[-1]:.5f}, max rel diff {worst:.2e}")
    if len(got) != args.steps or worst > 1e-4:
        failures.append(f"clip={clip}: losses differ by {worst:.2e}: mlc {got} torch {ref}")

if failures:
    print("PARITY FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PARITY OK")
