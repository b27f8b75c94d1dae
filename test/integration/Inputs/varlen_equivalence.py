"""Unpadded (packed, cu_seqlens) BERT computes what padded BERT computes.

The same weights and the same sequences, once as a padded [batch, seq] batch
with attention_mask, once packed into 16 tokens of a 24-token capacity:
losses and the logits of every real token must agree.
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
ap.add_argument("--seq", type=int, default=8)
ap.add_argument("--lengths", default="5,8,3", help="sequence lengths, at most --seq")
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)

lengths = [int(n) for n in args.lengths.split(",")]
B, S, V, E, L, H, I = len(lengths), args.seq, 64, 32, 2, 4, 48
P = max(16, S)  # position embeddings
config = (f"tiny,vocab_size={V},max_position_embeddings={P},hidden_size={E},"
          f"num_hidden_layers={L},num_attention_heads={H},intermediate_size={I}")
weights = os.path.join(args.work, "w.safetensors")
tm.write_safetensors(weights, tm.init_params(tm.bert_shapes(V, P, 2, E, L, I), 5, torch.float32))
rng = np.random.default_rng(0)
seqs = [rng.integers(0, V, size=n) for n in lengths]
types = [rng.integers(0, 2, size=n) for n in lengths]
labels = [np.where(rng.random(n) < 0.4, s, -100) for n, s in zip(lengths, seqs)]
labels[0][0] = seqs[0][0]


def save(name, arr):
    path = os.path.join(args.work, name + ".npy")
    np.save(path, arr)
    return ["--input", f"{name}={path}"]


def run(extra, inputs, out):
    subprocess.run([args.mlc, "run", "bert", "--config", config, "--micro-batch", str(B),
                    "--seq-len", str(S), "--init", weights, "--output-dir", out] + extra +
                   inputs, check=True)
    return np.load(os.path.join(out, "loss.npy")), np.load(os.path.join(out, "logits.npy"))


pad = lambda xs, fill: np.stack([np.pad(x, (0, S - len(x)), constant_values=fill) for x in xs])
padded_inputs = (save("p_ids", pad(seqs, 0).astype(np.int64)) +
                 save("p_types", pad(types, 0).astype(np.int64)) +
                 save("p_mask", pad([np.ones(n, np.int64) for n in lengths], 0)) +
                 save("p_labels", pad(labels, -100).astype(np.int64)))
padded_inputs = [a.replace("p_ids=", "input_ids=").replace("p_types=", "token_type_ids=")
                 .replace("p_mask=", "attention_mask=").replace("p_labels=", "labels=")
                 for a in padded_inputs]
cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
packed_inputs = (save("input_ids", np.concatenate(seqs).astype(np.int64)) +
                 save("token_type_ids", np.concatenate(types).astype(np.int64)) +
                 save("position_ids", np.concatenate([np.arange(n) for n in lengths])) +
                 save("labels", np.concatenate(labels).astype(np.int64)) +
                 save("cu_seqlens", cu))
loss_p, logits_p = run([], padded_inputs, os.path.join(args.work, "padded"))
loss_u, logits_u = run(["--varlen"], packed_inputs, os.path.join(args.work, "unpadded"))
real = np.concatenate([logits_p[b, :n] for b, n in enumerate(lengths)])
loss_rel = abs(float(loss_u) - float(loss_p)) / abs(float(loss_p))
logit_rel = float(np.max(np.abs(real - logits_u)) / np.max(np.abs(real)))
print(f"tokens: padded {B * S}, packed {int(cu[-1])} of capacity {B * S}")
print(f"loss padded {float(loss_p):.6f} unpadded {float(loss_u):.6f}: rel diff {loss_rel:.2e}")
print(f"logits of real tokens: max rel diff {logit_rel:.2e}")
ok = loss_rel < 1e-5 and logit_rel < 1e-5 and logits_u.shape == (int(cu[-1]), V)
print("VARLEN MATCHES PADDED" if ok else "VARLEN DIFFERS")
sys.exit(0 if ok else 1)
