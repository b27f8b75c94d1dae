"""One training step: mlc (CPU) against PyTorch, side by side.

    build/venv/bin/python bench/train_step.py [--model gpt2|llama] [--mlc build/bin/mlc]
        [--steps 8] [--torch PYTHON ...] [--no-compile]

Same model, same weights (one safetensors file both sides load), same
batches, AdamW with the same hyper-parameters (lr 1e-4 constant, weight decay
0.01 on matrices, betas 0.9/0.999, eps 1e-8, global norm clipped at 1.0);
median step time after two warm-up steps.

  --model gpt2   (the default) GPT-2, n_layer 4, n_embd 256, 4 heads, vocab
                 8192, dropout 0, against torch_models.py's GPT-2.
  --model llama  the builtin Llama (RMSNorm, rotary, SwiGLU, grouped-query
                 attention, untied head) of a comparable size: hidden 256,
                 4 layers, 4 query heads over 2 key/value heads, intermediate
                 688 (SwiGLU's 8/3 E rounded up to 16), vocab 8192, against
                 transformers' LlamaForCausalLM.

Both at micro-batch 8, seq 256, f32. The PyTorch side (bench/torch_step.py)
runs in each --torch interpreter (default: this one), JSON in and out, so one
run puts Debian's torch 1.13 and a current torch (eager and torch.compile,
whose compile time falls in the warm-up steps and is reported apart) beside
the same mlc numbers. Each PyTorch setting runs with one OpenMP thread (and
OpenBLAS's own threads where that is its BLAS) and with all of them.

Before any ratio is printed, every step's loss of mlc (fused and --no-fuse)
is compared with every PyTorch setting's: beyond 1e-4 relative the bench
prints both and exits 1, for a ratio against a different computation means
nothing. The ratio is taken against the fastest PyTorch setting. mlc's own
profile splits its step into GEMMs and generated kernels, and times the
attention kernels: their GFLOP/s on their own FLOPs (the causal half of QK^T
and PV forward; of the recomputed scores, dV, dP, dQ and dK backward, over
the query heads) against this machine's sgemm on a 1024^3 product (this
interpreter's PyTorch, all threads).
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
ap.add_argument("--model", choices=["gpt2", "llama"], default="gpt2")
gpt2_bench.add_model_arguments(ap, steps=8)
ap.add_argument("--kv-heads", type=int, default=2, help="llama: key/value heads")
ap.add_argument("--intermediate", type=int, default=0,
                help="llama: the MLP's width (default 8/3 embd rounded up to 16)")
ap.add_argument("--torch", action="append", metavar="PYTHON",
                help="interpreter for the PyTorch side (repeatable; default: this one)")
ap.add_argument("--no-compile", action="store_true",
                help="skip torch.compile in the --torch interpreters that have it")
args = ap.parse_args()
if args.steps < 3:
    ap.error("--steps must be at least 3 (two warm-up steps, then the median)")

B, S, V, E, L, H = args.batch, args.seq, args.vocab, args.embd, args.layers, args.heads
LR, WD, BETAS, EPS, CLIP = 1e-4, 0.01, (0.9, 0.999), 1e-8, 1.0
TOLERANCE = 1e-4  # relative, per step, mlc's loss against each PyTorch setting's
load_before = os.getloadavg()
work = tempfile.mkdtemp(prefix="mlc-bench-")
rng = np.random.default_rng(0)
ids = rng.integers(0, V, size=(args.steps, B, S))
os.makedirs(os.path.join(work, "b"))
np.save(os.path.join(work, "b", "input_ids.npy"), ids)
np.save(os.path.join(work, "b", "labels.npy"), ids)


def gpt2():
    """(title, mlc --config, dims for the PyTorch side, initial weights' file)."""
    return (f"gpt2 L{L} E{E} H{H} S{S} B{B} V{V} f32", gpt2_bench.model_config(args),
            dict(layers=L, heads=H), gpt2_bench.initial_weights(args, work)[0])


def llama():
    I = args.intermediate or 16 * -(-8 * E // (3 * 16))
    HKV, RMS_EPS, THETA = args.kv_heads, 1e-6, 10000.0
    dims = dict(vocab=V, embd=E, intermediate=I, layers=L, heads=H, kv_heads=HKV, seq=S,
                rms_norm_eps=RMS_EPS, rope_theta=THETA)
    config = (f"tiny,vocab_size={V},hidden_size={E},intermediate_size={I},num_hidden_layers={L},"
              f"num_attention_heads={H},num_key_value_heads={HKV},max_position_embeddings={S},"
              f"rms_norm_eps={RMS_EPS},rope_theta={THETA:g}")
    params = tm.init_params(tm.llama_shapes(V, E, I, L, H, HKV), seed=1, dtype=torch.float32)
    with torch.no_grad():  # RMSNorm weights about 1, as init_params does for LayerNorm's
        for name, t in params.items():
            if name.endswith("norm.weight"):
                t.add_(1.0)
    weights = os.path.join(work, "w.safetensors")
    tm.write_safetensors(weights, params)
    return f"llama L{L} E{E} H{H}/{HKV} I{I} S{S} B{B} V{V} f32", config, dims, weights


title, config, dims, weights = {"gpt2": gpt2, "llama": llama}[args.model]()


def mlc_step(fuse):
    """Median ms/step of `mlc train`, its GEMM / kernel split, attention, losses."""
    log = os.path.join(work, f"log-{fuse}.jsonl")
    env = dict(os.environ, MLC_PROFILE="all")
    run = subprocess.run([args.mlc, "train", args.model, "--config", config, "--micro-batch",
                          str(B), "--seq-len", str(S), "--init", weights, "--batches",
                          os.path.join(work, "b"), "--steps", str(args.steps), "--lr", str(LR),
                          "--lr-schedule", "constant", "--weight-decay", str(WD),
                          "--beta1", str(BETAS[0]), "--beta2", str(BETAS[1]), "--eps", str(EPS),
                          "--clip-grad", str(CLIP), "--log-json", log, "--log-every",
                          "1000", "--fuse" if fuse else "--no-fuse"],
                         env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"mlc train {args.model} {'--fuse' if fuse else '--no-fuse'} failed "
                 f"(exit {run.returncode}):\n" + run.stderr)
    steps = [json.loads(line) for line in open(log)]
    ms = statistics.median(s["ms"] for s in steps[2:])
    prof = re.search(r"GEMMs ([0-9.]+) ms/step, kernels ([0-9.]+) ms/step", run.stderr)
    attention = sum(float(t) for t in re.findall(r"mlc profile:\s+k\d+ attention\s+([0-9.]+) ms/step",
                                                  run.stderr))
    return (ms,) + ((float(prof.group(1)), float(prof.group(2))) if prof else (0.0, 0.0)) + \
        (attention, [s["loss"] for s in steps])


unfused_ms, _, unfused_kern_ms, _, unfused_losses = mlc_step(False)
mlc_ms, gemm_ms, kern_ms, attn_ms, mlc_losses = mlc_step(True)


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


def torch_side(python, tag):
    """bench/torch_step.py in `python`: its settings, each with ms/step and losses."""
    request, result = os.path.join(work, f"torch-{tag}.json"), os.path.join(work, f"out-{tag}.json")
    json.dump({"model": args.model, "dims": dims, "weights": weights,
               "batches": os.path.join(work, "b"), "steps": args.steps, "lr": LR,
               "weight_decay": WD, "betas": BETAS, "eps": EPS, "clip": CLIP,
               "threads": [1, os.cpu_count()], "compile": not args.no_compile},
              open(request, "w"))
    run = subprocess.run([python, os.path.join(here, "torch_step.py"), request, result])
    if run.returncode != 0:
        sys.exit(f"the PyTorch side in {python} failed (exit {run.returncode})")
    out = json.load(open(result))
    version = ".".join(out["torch"].split(".")[:2])
    name = "torch" if os.path.abspath(python) == os.path.abspath(sys.executable) else f"torch {version}"
    return [dict(r, name=f"{name} {r['mode']}", version=out["torch"]) for r in out["runs"]]


runs = [r for i, py in enumerate(args.torch or [sys.executable]) for r in torch_side(py, i)]
cores = os.cpu_count()
tokens = B * S
w = max([13] + [len(r["name"]) for r in runs])  # the name column
print(f"{title}, {cores} cores:")
print(f"  {'mlc':{w}} {mlc_ms:8.1f} ms/step  {tokens / mlc_ms * 1e3:8.0f} tok/s  "
      f"(GEMMs {gemm_ms:.1f} ms, generated kernels {kern_ms:.1f} ms, "
      f"outside GEMMs {100 * (1 - gemm_ms / mlc_ms):.0f}%)")
print(f"  {'mlc --no-fuse':{w}} {unfused_ms:8.1f} ms/step  (generated kernels {unfused_kern_ms:.1f} ms); "
      f"fused / unfused {mlc_ms / unfused_ms:.2f}")
for r in runs:
    compiled = f", compile step {r['first_ms'] / 1e3:.1f} s excluded" if r["mode"] == "compile" else ""
    print(f"  {r['name']:{w}} {r['ms']:8.1f} ms/step  {tokens / r['ms'] * 1e3:8.0f} tok/s  "
          f"({r['label']}{compiled})")

# Losses first: a ratio against a step that computes something else means nothing.
worst_abs = worst_rel = 0.0
for r in runs:
    for mine in (mlc_losses, unfused_losses):
        for a, b in zip(mine, r["losses"]):
            worst_abs, worst_rel = max(worst_abs, abs(a - b)), max(worst_rel, abs(a - b) / abs(b))
print(f"  losses: {args.steps} steps, mlc (fused and --no-fuse) against {len(runs)} PyTorch "
      f"settings, max |diff| {worst_abs:.2e}, max rel diff {worst_rel:.2e} (tolerance {TOLERANCE:g})")
load_after = os.getloadavg()
print(f"  load average {load_before[0]:.2f} before, {load_after[0]:.2f} after ({cores} cores)")
if worst_rel > TOLERANCE or any(len(r["losses"]) != len(mlc_losses) for r in runs):
    print("LOSSES DISAGREE: no ratios printed")
    print(f"  {'mlc':{w}} {mlc_losses}\n  {'mlc --no-fuse':{w}} {unfused_losses}")
    for r in runs:
        print(f"  {r['name']:{w}} {r['losses']} ({r['label']})")
    sys.exit(1)

best = min(runs, key=lambda r: r["ms"])
print(f"  ratio mlc / torch best ({best['name']}, {best['label']}): {mlc_ms / best['ms']:.2f}")
print(f"  mlc step / its GEMMs alone: {mlc_ms / gemm_ms if gemm_ms else float('nan'):.2f}")
if attn_ms:
    gf = attn_flops / (attn_ms / 1e3) / 1e9
    print(f"  attention fwd+bwd {attn_ms:.1f} ms/step, {gf:.1f} GFLOP/s on its own FLOPs; "
          f"sgemm {sgemm:.1f} GFLOP/s (1024^3); ratio {gf / sgemm:.2f}")
