"""GPT-2's CPU training step on packed documents against the plain causal step.

    build/venv/bin/python bench/packed_step.py [--mlc build/bin/mlc] [--runs 3]

Same model as bench/train_step.py (GPT-2 n_layer=4, n_embd=256, n_head=4,
vocab 8192, dropout 0, micro-batch 8, seq 256, f32), same batches, AdamW.
Three packages side by side, interleaved run by run:
  plain   positions 0..S-1, padded causal attention [B, H, S, D]
  packed  --reset-attention-mask --reset-position-ids, batches without an
          EOD (one document per sample): the same work as plain
  docs    the packed package on batches whose samples hold documents of
          16..112 tokens (about four per sample): block-diagonal attention
Each run reports the median step after two warm-up steps and MLC_PROFILE's
attention kernels (forward and backward) per step; the table keeps the
minimum over the runs, the least disturbed by the other work on the machine.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import gpt2_bench  # noqa: E402

ap = argparse.ArgumentParser()
gpt2_bench.add_model_arguments(ap, steps=6)
ap.add_argument("--runs", type=int, default=3)
args = ap.parse_args()

B, S, V = args.batch, args.seq, args.vocab
work = tempfile.mkdtemp(prefix="mlc-bench-packed-")
rng = np.random.default_rng(0)
EOD = 0
ids = rng.integers(1, V, size=(args.steps, B, S))
weights, _ = gpt2_bench.initial_weights(args, work)
config = gpt2_bench.model_config(args)


def documents(tokens):
    """cu_seqlens [steps, B*S+1] and position_ids [steps, B, S], split at EOD."""
    steps = tokens.shape[0]
    cu = np.full((steps, B * S + 1), B * S, dtype=np.int32)
    pos = np.zeros((steps, B, S), dtype=np.int64)
    for t in range(steps):
        offsets = [0]
        for r in range(B):
            start = 0
            for i in range(S):
                pos[t, r, i] = i - start
                if tokens[t, r, i] == EOD and i + 1 < S:
                    start = i + 1
                    offsets.append(r * S + start)
            offsets.append((r + 1) * S)
        cu[t, :len(offsets)] = offsets
    return cu, pos


def batches(name, tokens, packed):
    d = os.path.join(work, name)
    os.makedirs(d)
    np.save(os.path.join(d, "input_ids.npy"), tokens)
    np.save(os.path.join(d, "labels.npy"), tokens)
    if packed:
        cu, pos = documents(tokens)
        np.save(os.path.join(d, "cu_seqlens.npy"), cu)
        np.save(os.path.join(d, "position_ids.npy"), pos)
        return d, int(np.count_nonzero(np.diff(cu, axis=1)))
    return d, B * args.steps


with_docs = ids.copy()
for t in range(args.steps):
    for r in range(B):
        i = int(rng.integers(16, 113))
        while i < S:
            with_docs[t, r, i - 1] = EOD
            i += int(rng.integers(16, 113))
cases = {"plain": (batches("plain", ids, False), []),
         "packed": (batches("packed", ids, True), ["--reset-attention-mask", "--reset-position-ids"]),
         "docs": (batches("docs", with_docs, True), ["--reset-attention-mask", "--reset-position-ids"])}


def mlc_step(bdir, flags):
    """Median ms/step of `mlc train` and the attention kernels' ms/step."""
    log = os.path.join(work, "log.jsonl")
    env = dict(os.environ, MLC_PROFILE="1")
    run = subprocess.run([args.mlc, "train", "gpt2", "--config", config, "--micro-batch",
                          str(B), "--seq-len", str(S), "--init", weights, "--batches", bdir,
                          "--steps", str(args.steps), "--lr", "1e-4", "--lr-schedule",
                          "constant", "--log-json", log, "--log-every", "1000"] + flags,
                         env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("mlc failed:\n" + run.stderr)
    ms = statistics.median(json.loads(line)["ms"] for line in list(open(log))[2:])
    attention = sum(float(t) for t in re.findall(
        r"mlc profile:\s+k\d+ attention\s+([0-9.]+) ms/step", run.stderr))
    losses = [json.loads(line)["loss"] for line in open(log)]
    return ms, attention, losses


best = {name: (float("inf"), float("inf")) for name in cases}
losses = {}
for run in range(args.runs):
    for name, ((bdir, _), flags) in cases.items():
        ms, attn, losses[name] = mlc_step(bdir, flags)
        best[name] = (min(best[name][0], ms), min(best[name][1], attn))
        print(f"run {run + 1}: {name:6s} step {ms:7.1f} ms, attention {attn:6.1f} ms", flush=True)

print(f"gpt2 L{args.layers} E{args.embd} H{args.heads} S{S} B{B} V{V} f32, CPU, {os.cpu_count()} cores; min over "
      f"{args.runs} runs of the median step")
for name, ((_, docs), _) in cases.items():
    ms, attn = best[name]
    print(f"  {name:6s} {docs / args.steps:5.1f} documents per micro-batch: step {ms:7.1f} ms "
          f"({ms / best['plain'][0]:.3f} x plain), attention {attn:6.1f} ms "
          f"({attn / max(best['plain'][1], 1e-9):.3f} x plain)")
same = max(abs(a - b) / abs(b) for a, b in zip(losses["packed"], losses["plain"]))
print(f"  losses packed (no EOD) vs plain: max rel diff {same:.2e}")
