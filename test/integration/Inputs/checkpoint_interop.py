"""A checkpoint of the builtin GPT-2 in PyTorch: its model.safetensors loads
into the test's GPT-2 (HuggingFace parameter names, every one used) and gives
the logits `mlc run` computes from the same file.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_models as tm  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--data", required=True)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
torch.set_num_threads(1)

V, P, E, L, H, B, S = 256, 32, 32, 2, 2, 2, 16
config = f"tiny,vocab_size={V},n_positions={P},n_embd={E},n_layer={L},n_head={H}"
subprocess.run([args.mlc, "train", "gpt2", "--config", config, "--micro-batch", str(B),
                "--seq-len", str(S), "--data", args.data, "--steps", "3", "--lr", "1e-2",
                "--save-dir", os.path.join(args.work, "ckpt"), "--progress", "plain"],
               check=True, capture_output=True)
model = os.path.join(args.work, "ckpt", "step-00000003", "model.safetensors")

params = {name: torch.from_numpy(a) for name, a in tm.read_safetensors(model).items()}
expected = set(tm.gpt2_shapes(V, P, E, L))
missing, unexpected = expected - params.keys(), params.keys() - expected
if missing or unexpected:
    sys.exit(f"names differ: missing {sorted(missing)}, unexpected {sorted(unexpected)}")

ids = np.random.default_rng(0).integers(0, V, size=(B, S))
np.save(os.path.join(args.work, "ids.npy"), ids)
out = os.path.join(args.work, "out")
subprocess.run([args.mlc, "run", "gpt2", "--config", config, "--init", model,
                "--input", f"input_ids={args.work}/ids.npy", "--input",
                f"labels={args.work}/ids.npy", "--output-dir", out], check=True)
mlc_logits = np.load(os.path.join(out, "logits.npy"))
with torch.no_grad():
    _, logits = tm.gpt2_forward(params, torch.from_numpy(ids), torch.from_numpy(ids), L, H)
diff = float(np.abs(mlc_logits - logits.numpy()).max() / np.abs(logits.numpy()).max())
print(f"{len(params)} tensors by HF name; logits max rel diff {diff:.2e}")
print("CHECKPOINT LOADS IN TORCH" if diff < 1e-5 else "LOGITS DIFFER")
sys.exit(0 if diff < 1e-5 else 1)
