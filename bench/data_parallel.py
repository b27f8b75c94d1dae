"""Data-parallel training on the CPU: what overlapping the gradient all-reduce
with backward buys, measured side by side in one run.

    /usr/bin/python3 bench/data_parallel.py [--mlc build/bin/mlc] [--steps 12]

GPT-2 (n_layer 4, n_embd 256, vocab 8192: 5.6 M parameters, 22 MB of f32
gradients), 2 ranks under mpirun (micro-batch 4 each, seq 128), on --data.
For each bucketing it prints the step time and the exposed communication:
the time rank 0 is blocked in all-reduce waits (what backward did not hide),
as ms per step and as a share of the step, and the loss of the last step
(clipping at 0.5: global against --clip bucket); and one process with the
whole global batch for reference. Median over the steps after the first.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--mlc", default=os.path.join(here, "..", "build", "bin", "mlc"))
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--data", default=os.path.join(here, "..", "data", "corpus", "python-docs.txt"))
args = ap.parse_args()

config = "tiny,n_embd=256,n_layer=4,vocab_size=8192,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0"
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
work = tempfile.mkdtemp(prefix="mlc-dp-bench-")


def run(name, ranks, micro, extra):
    log = os.path.join(work, name + ".jsonl")
    cmd = [args.mlc, "train", "gpt2", "--config", config, "--micro-batch", str(micro),
           "--seq-len", "128", "--data", args.data, "--steps", str(args.steps),
           "--log-json", log, "--progress", "plain", "--log-every", "1000"] + extra
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + cmd
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    rows = [json.loads(line) for line in open(log)]
    ms = statistics.median(r["ms"] for r in rows[1:])
    wait = statistics.median(r.get("comm_wait_ms", 0.0) for r in rows[1:])
    return ms, wait, rows[-1]["loss"]


cases = [
    ("one process, micro-batch 8", 1, 8, []),
    ("2 ranks, one bucket after backward", 2, 4,
     ["--bucket-cap-mb", "100000", "--first-bucket-mb", "100000"]),
    ("2 ranks, 25 MB buckets (first 1 MB)", 2, 4,
     ["--bucket-cap-mb", "25", "--first-bucket-mb", "1"]),
    ("2 ranks, 1 MB buckets (first 0.25 MB)", 2, 4,
     ["--bucket-cap-mb", "1", "--first-bucket-mb", "0.25"]),
    ("2 ranks, 1 MB buckets, --clip bucket", 2, 4,
     ["--bucket-cap-mb", "1", "--first-bucket-mb", "0.25", "--clip", "bucket"]),
]
print(f"mlc data parallel: GPT-2 {config.split(',', 1)[1]}, global batch 8 x 128 tokens, "
      f"{args.steps} steps, {os.cpu_count()} cores")
print(f"  {'':40} {'ms/step':>9} {'exposed comm':>14} {'of the step':>12} {'last loss':>10}")
base = None
for name, ranks, micro, extra in cases:
    ms, wait, loss = run(name.replace(" ", "_").replace(",", ""), ranks, micro,
                         extra + ["--clip-grad", "0.5", "--lr", "1e-3"])
    base = base or ms
    share = f"{100 * wait / ms:.1f}%" if ranks > 1 else "-"
    print(f"  {name:40} {ms:9.1f} {wait:11.2f} ms {share:>12} {loss:10.4f}   "
          f"({base / ms:.2f}x one process)")
