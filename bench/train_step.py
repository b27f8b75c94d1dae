"""One GPT-2 training step: mlc (CPU) against PyTorch eager, side by side.

    /usr/bin/python3 bench/train_step.py [--mlc build/bin/mlc] [--steps 8]

Same model (GPT-2, n_layer=4, n_embd=256, n_head=4, vocab 8192, dropout 0),
micro-batch 8, seq 256, f32, same batches, AdamW; median step time after two
warm-up steps. PyTorch runs with its best setting on this machine (one OpenMP
thread, OpenBLAS with its own threads) and with all OpenMP threads; the ratio
is taken against the faster one. mlc's own profile splits its step into GEMMs
and generated kernels, and times the attention kernels: their GFLOP/s on
their own FLOPs (the causal half of QK^T and PV forward; of the recomputed
scores, dV, dP, dQ and dK backward) against this machine's sgemm on a
1024^3 product (PyTorch's, all threads).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import gpt2_bench  # noqa: E402
import torch_models as tm  # noqa: E402 (on the path gpt2_bench adds)

ap = argparse.ArgumentParser()
gpt2_bench.add_model_arguments(ap, steps=8)
args = ap.parse_args()

B, S, V, E, L, H = args.batch, args.seq, args.vocab, args.embd, args.layers, args.heads
work = tempfile.mkdtemp(prefix="mlc-bench-")
rng = np.random.default_rng(0)
ids = rng.integers(0, V, size=(args.steps, B, S))
os.makedirs(os.path.join(work, "b"))
np.save(os.path.join(work, "b", "input_ids.npy"), ids)
np.save(os.path.join(work, "b", "labels.npy"), ids)
weights, params = gpt2_bench.initial_weights(args, work)
config = gpt2_bench.model_config(args)


def mlc_step(fuse):
    """Median ms/step of `mlc train`, and its GEMM / kernel split."""
    log = os.path.join(work, f"log-{fuse}.jsonl")
    env = dict(os.environ, MLC_PROFILE="1")
    run = subprocess.run([args.mlc, "train", "gpt2", "--config", config, "--micro-batch",
                          str(B), "--seq-len", str(S), "--init", weights, "--batches",
                          os.path.join(work, "b"), "--steps", str(args.steps), "--lr", "1e-4",
                          "--lr-schedule", "constant", "--log-json", log, "--log-every",
                          "1000", "--fuse" if fuse else "--no-fuse"],
                         env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("mlc failed:\n" + run.stderr)
    ms = statistics.median(json.loads(line)["ms"] for line in list(open(log))[2:])
    prof = re.search(r"GEMMs ([0-9.]+) ms/step, kernels ([0-9.]+) ms/step", run.stderr)
    attention = sum(float(t) for t in re.findall(r"mlc profile:\s+k\d+ attention\s+([0-9.]+) ms/step",
                                                  run.stderr))
    return (ms,) + ((float(prof.group(1)), float(prof.group(2))) if prof else (0.0, 0.0)) + (attention,)


unfused_ms, _, unfused_kern_ms, _ = mlc_step(False)
mlc_ms, gemm_ms, kern_ms, attn_ms = mlc_step(True)


def sgemm_gflops(n=1024):
    torch.set_num_threads(os.cpu_count())
    a, b = torch.randn(n, n), torch.randn(n, n)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


sgemm = sgemm_gflops()
D = E // H
attn_flops = L * 7 * B * H * S * S * D  # 2 (fwd) + 5 (bwd) causal-half products of 2 B H S^2 D


def torch_step_ms(threads):
    torch.set_num_threads(threads)
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    opt = tm.adamw(p, 1e-4, 0.01, (0.9, 0.999), 1e-8)
    times = []
    for t in range(args.steps):
        start = time.perf_counter()
        opt.zero_grad()
        loss, _ = tm.gpt2_forward(p, torch.from_numpy(ids[t]), torch.from_numpy(ids[t]), L, H)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times[2:])


cores = os.cpu_count()
t1 = torch_step_ms(1)
tn = torch_step_ms(cores)
best, setting = min((t1, "1 omp thread + OpenBLAS threads"), (tn, f"{cores} omp threads"))
tokens = B * S
print(f"gpt2 L{L} E{E} H{H} S{S} B{B} V{V} f32, {cores} cores:")
print(f"  mlc           {mlc_ms:8.1f} ms/step  {tokens / mlc_ms * 1e3:8.0f} tok/s  "
      f"(GEMMs {gemm_ms:.1f} ms, generated kernels {kern_ms:.1f} ms, "
      f"outside GEMMs {100 * (1 - gemm_ms / mlc_ms):.0f}%)")
print(f"  mlc --no-fuse {unfused_ms:8.1f} ms/step  (generated kernels {unfused_kern_ms:.1f} ms); "
      f"fused / unfused {mlc_ms / unfused_ms:.2f}")
print(f"  torch eager   {t1:8.1f} ms/step (1 omp thread + OpenBLAS threads)")
print(f"  torch eager   {tn:8.1f} ms/step ({cores} omp threads)")
print(f"  ratio mlc / torch best ({setting}): {mlc_ms / best:.2f}")
print(f"  mlc step / its GEMMs alone: {mlc_ms / gemm_ms if gemm_ms else float('nan'):.2f}")
if attn_ms:
    gf = attn_flops / (attn_ms / 1e3) / 1e9
    print(f"  attention fwd+bwd {attn_ms:.1f} ms/step, {gf:.1f} GFLOP/s on its own FLOPs; "
          f"sgemm {sgemm:.1f} GFLOP/s (1024^3); ratio {gf / sgemm:.2f}")
