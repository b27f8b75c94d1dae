"""Llama-3 8B and 70B on 8 to 1,024 H200s: tensor parallelism inside a node,
data parallelism across nodes, as mlc's own plans predict them.

    /usr/bin/python3 bench/tp_scaling.py [--mlc build/bin/mlc] [--only 8b|70b]

For each (model, T, GPUs) it runs one `mlc compile ... --report --roofline
h200 --report-json` (printed before it runs; nothing trains, no weight is
materialized) and collects, from the JSON, the h200 roofline of the
kernels, the tensor-parallel collectives' time (blocking), the data-
parallel collectives' exposed time, the step with both, tokens/s per GPU,
MFU, and the plan's memory per rank against 141 GB (--device-memory h200:
mlc refuses the plan that exceeds it, after printing its report). It
prints docs/scaling.md's table in Markdown. All ranks: sequence 8,192,
micro-batch 1, bf16 products, the distributed optimizer over the D = GPUs /
T data-parallel ranks; 8B recomputes nothing, 70B every layer (full).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CONFIGS = [
    # model, recompute, T, GPUs
    ("llama-3.1-8b", "none", 1, 8),
    ("llama-3.1-8b", "none", 1, 64),
    ("llama-3.1-8b", "none", 1, 1024),
    ("llama-3.1-8b", "none", 2, 8),
    ("llama-3.1-8b", "none", 2, 1024),
    ("llama-3.1-8b", "none", 4, 8),
    ("llama-3.1-8b", "none", 8, 8),
    ("llama-3.1-8b", "none", 8, 1024),
    ("llama-3-70b", "full", 1, 8),
    ("llama-3-70b", "full", 2, 64),
    ("llama-3-70b", "full", 4, 64),
    ("llama-3-70b", "full", 8, 8),
    ("llama-3-70b", "full", 8, 64),
    ("llama-3-70b", "full", 8, 1024),
]


def command(mlc, model, recompute, t, gpus, json_path):
    return [mlc, "compile", "llama", "--config", model, "--seq-len", "8192",
            "--micro-batch", "1", "--dtype", "bf16", "--tensor-parallel", str(t),
            "--ranks", str(gpus // t), "--use-distributed-optimizer",
            "--recompute", recompute, "--device-memory", "h200", "--report",
            "--roofline", "h200", "--cuda-arch=", "--report-json", json_path]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlc", default="build/bin/mlc")
    ap.add_argument("--only", choices=["8b", "70b"])
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, recompute, t, gpus in CONFIGS:
            if args.only and not model.endswith(args.only):
                continue
            path = os.path.join(tmp, "r.json")
            cmd = command(args.mlc, model, recompute, t, gpus, path)
            print("$ " + " ".join(cmd[:-2]), file=sys.stderr, flush=True)
            done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            r = json.load(open(path))
            roof, mem = r["roofline"], r["memory"]
            total = mem["cuda"]["total"]
            fits = done.returncode == 0
            if not fits and "more than --device-memory" not in done.stderr:
                sys.exit(f"mlc failed: {done.stderr}")
            rows.append((model, recompute, t, gpus // t, gpus, roof, total, fits))
    print("| model | T | D | GPUs | kernels ms | TP ms (blocking) | DP ms on the wire / exposed "
          "| step ms | tokens/s per GPU | MFU | memory per rank |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model, recompute, t, d, gpus, roof, total, fits in rows:
        step = roof["step_with_comm_s"]
        memory = f"{total / 2**30:.1f} GiB" + ("" if fits else " (exceeds 141 GB)")
        print(f"| {model} ({'recompute ' + recompute if recompute != 'none' else 'no recompute'}) "
              f"| {t} | {d} | {gpus:,} | {roof['step_s'] * 1e3:.1f} | {roof['tp_s'] * 1e3:.1f} "
              f"| {roof['dp_wire_s'] * 1e3:.1f} / {roof['dp_exposed_s'] * 1e3:.1f} "
              f"| {step * 1e3:.1f} | {roof['tokens_per_s_with_comm']:,.0f} "
              f"| {roof['mfu_with_comm']:.3f} | {memory} |")


if __name__ == "__main__":
    main()
