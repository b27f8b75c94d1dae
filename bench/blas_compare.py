"""Which BLAS should mlc's CPU backend use? OpenBLAS (pthreads and OpenMP
builds), BLIS (OpenMP) and oneDNN, side by side in one run.

    /usr/bin/python3 bench/blas_compare.py [--build build] [--steps 8]

Two measurements per library, each against OpenBLAS with pthreads (what
`libopenblas-dev` installs; mlc's GEMMs before oneDNN):
- the GEMMs alone (`mlc-bench-blas`): sgemm on the shapes of one GPT-2
  training step (bench/train_step.py's model: 4 layers, n_embd 256, vocab
  8192, micro-batch 8 x 256 tokens), forward and both backward GEMMs;
- the whole training step, `mlc train` with that BLAS swapped in at load
  time (LD_LIBRARY_PATH for OpenBLAS's OpenMP build, LD_PRELOAD for BLIS);
  oneDNN is mlc's own f32 GEMM when mlc is built with it (libdnnl-dev).
Libraries that are not installed are skipped (Debian: libopenblas0-openmp,
libblis4-openmp, libdnnl-dev).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(here, "..", "build"))
ap.add_argument("--steps", type=int, default=8)
args = ap.parse_args()

lib = "/usr/lib/x86_64-linux-gnu"
# mlc multiplies f32 with oneDNN when it is built with it; MLC_BLAS=openblas
# sends its GEMMs through CBLAS, whichever library the loader finds; the
# CBLAS libraries run with OpenMP waiting passively, as mlc sets it for them.
cblas = {"MLC_BLAS": "openblas", "OMP_WAIT_POLICY": "passive"}
LIBS = [
    # name, library, API, environment that makes `mlc train` use it
    ("OpenBLAS (pthreads)", f"{lib}/openblas-pthread/libopenblas.so.0", "cblas",
     dict(cblas, LD_LIBRARY_PATH=f"{lib}/openblas-pthread")),
    ("OpenBLAS (OpenMP)", f"{lib}/openblas-openmp/libopenblas.so.0", "cblas",
     dict(cblas, LD_LIBRARY_PATH=f"{lib}/openblas-openmp")),
    ("BLIS (OpenMP)", f"{lib}/blis-openmp/libblis.so.4", "cblas",
     dict(cblas, LD_PRELOAD=f"{lib}/blis-openmp/libblis.so.4")),
    ("oneDNN (mlc's default)", f"{lib}/libdnnl.so.2", "dnnl", {}),
]
bench = os.path.join(args.build, "bin", "mlc-bench-blas")
mlc = os.path.join(args.build, "bin", "mlc")
config = "tiny,n_layer=4,n_embd=256,n_head=4,vocab_size=8192,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0"
data = os.path.join(here, "..", "data", "corpus", "python-docs.txt")
work = tempfile.mkdtemp(prefix="mlc-blas-")


def gemm_ms(path, api):
    out = subprocess.run([bench, path, api], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"^step ([0-9.]+) ms", out, re.M).group(1))


def step_ms(env, name):
    log = os.path.join(work, re.sub(r"\W+", "_", name) + ".jsonl")
    subprocess.run([mlc, "train", "gpt2", "--config", config, "--micro-batch", "8",
                    "--seq-len", "256", "--data", data, "--steps", str(args.steps),
                    "--log-json", log, "--progress", "plain", "--log-every", "1000"],
                   check=True, env=dict(os.environ, **env), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    rows = [json.loads(line) for line in open(log)][2:]  # after two warm-up steps
    return statistics.median(r["ms"] for r in rows)


print(f"mlc BLAS comparison: GPT-2 4 x 256, vocab 8192, 8 x 256 tokens, {os.cpu_count()} cores")
print(f"  {'':22} {'GEMMs ms':>10} {'vs default':>11} {'step ms':>10} {'vs default':>11}")
base_g = base_s = None
for name, path, api, env in LIBS:
    if not os.path.exists(path):
        print(f"  {name:22} not installed")
        continue
    g = gemm_ms(path, api)
    s = step_ms(env, name) if env is not None else None
    base_g = base_g or g
    if s is not None:
        base_s = base_s or s
    step = f"{s:10.1f} {base_s / s:10.2f}x" if s is not None else f"{'-':>10} {'-':>11}"
    print(f"  {name:22} {g:10.1f} {base_g / g:10.2f}x {step}")
