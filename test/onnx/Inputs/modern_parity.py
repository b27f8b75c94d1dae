"""mlc on the exports from today's stack (modern/, issue 23) against the
references stored beside them; nothing is recomputed in torch.

For each fixture (NAME of modern/NAME.onnx, or `all`):

- `mlc run NAME.onnx` logits at the exported shape (2x16) and a smaller one
  (1x8) against the stored torch logits (max abs diff / max abs logit <= --tol);
- with --train: the per-step losses of `mlc train NAME.onnx --loss causal-lm
  | masked-lm` for 10 AdamW steps on the stored batches, with the stored
  hyperparameters (decay on rank >= 2 parameters, global clipping, constant
  lr), against torch's (relative, <= --loss-tol), and so their gradient
  norms before clipping;
- with --train --weights: `mlc train --save`'s weights against torch's after
  the same 10 steps (FAMILY-dynamo-trained.safetensors), through the JSON's
  initializer -> HF name map (optimized exports rename some weights val_N,
  transposed); max abs diff <= --weight-tol x lr x steps (AdamW moves an
  element by at most about lr a step).

Prints one line per comparison ending in MATCH or MISMATCH, then
`MODERN PARITY MATCH` (exit 0) or `MODERN PARITY MISMATCH` (exit 1). A
fixture whose export failed (its JSON has "error") is reported as SKIP.

  python test/onnx/Inputs/modern_parity.py --mlc build/bin/mlc --fixture gpt2-dynamo-opset20 \\
      [--fixture ...|all] [--train [--weights]] [--work DIR] [--device cpu] [--onnx OTHER.onnx]

--onnx runs another export of the same weights against one fixture's
references (e.g. a re-export). Needs numpy only (onnxruntime, when present,
also checks the fixture itself with --ort).
"""

import argparse
import fnmatch
import glob
import json
import re
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modern")

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--mlc", required=True)
ap.add_argument("--fixture", action="append", required=True,
                help="NAME of modern/NAME.onnx (repeatable), a pattern (llama-*), or all")
ap.add_argument("--onnx", help="run this ONNX file against the (single) fixture's references")
ap.add_argument("--work", help="scratch directory (default: a temporary one)")
ap.add_argument("--device", default="cpu")
ap.add_argument("--train", action="store_true")
ap.add_argument("--weights", action="store_true", help="with --train: compare --save's weights")
ap.add_argument("--ort", action="store_true", help="also check the fixture in onnxruntime")
ap.add_argument("--tol", type=float, default=1e-5, help="logits, relative to max abs")
ap.add_argument("--loss-tol", type=float, default=1e-5, help="per-step loss, relative")
ap.add_argument("--weight-tol", type=float, default=2e-3,
                help="trained weights: max abs diff over lr x steps")
ap.add_argument("--extra", action="append", default=[],
                help="an extra argument for mlc run and mlc train (repeatable)")
args = ap.parse_args()

# `all`, or a shell pattern (`llama-*`), stands for every fixture it matches.
every = sorted(os.path.basename(p)[:-len(".json")]
               for p in glob.glob(os.path.join(HERE, "*.json")) if not p.endswith("-config.json"))
names = []
for pattern in args.fixture:
    names += [n for n in every if fnmatch.fnmatch(n, "*" if pattern == "all" else pattern)
              and n not in names]
if args.onnx and len(names) != 1:
    sys.exit("--onnx needs exactly one --fixture")
work = args.work or tempfile.mkdtemp(prefix="modern-parity-")
os.makedirs(work, exist_ok=True)
results = []  # (line, ok)


def report(line, ok):
    results.append(ok)
    print(f"{line} {'MATCH' if ok else 'MISMATCH'}", flush=True)


def rel_max(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


last_output = [""]  # what the last mlc command printed


def mlc(cmd, what):
    p = subprocess.run([args.mlc] + cmd + args.extra, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    last_output[0] = p.stdout
    if p.returncode != 0:
        tail = " | ".join(p.stdout.strip().splitlines()[-3:])[:300]
        return f"{what}: mlc exited {p.returncode}: {tail}"
    return None


def read_safetensors(path):
    dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
              "BOOL": np.bool_, "F16": np.float16}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        if v["dtype"] not in dtypes:
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=dtypes[v["dtype"]]).reshape(v["shape"])
    return out


def check(name):
    meta = json.load(open(os.path.join(HERE, name + ".json")))
    if "error" in meta:
        print(f"{name}: SKIP (the export failed: {meta['error'].splitlines()[0][:200]})")
        return
    model = args.onnx or os.path.join(HERE, name + ".onnx")
    ref = np.load(os.path.join(HERE, meta["reference"]))
    keys = meta["reference_keys"]
    inputs = list(meta["inputs"])
    wdir = os.path.join(work, name)
    shutil.rmtree(wdir, ignore_errors=True)
    os.makedirs(wdir)

    for tag in ("export", "small"):
        B, S = ref[keys["inputs"][tag][inputs[0]]].shape
        files = []
        for n in inputs:
            p = os.path.join(wdir, f"{n}-{tag}.npy")
            np.save(p, ref[keys["inputs"][tag][n]])
            files += ["--input", f"{n}={p}"]
        want = ref[keys["logits"][tag]]
        out = os.path.join(wdir, "out-" + tag)
        err = mlc(["run", model, *files, "--output-dir", out, "--device", args.device],
                  f"{name} [{B}x{S}] logits")
        if err:
            report(err, False)
            continue
        got = np.load(os.path.join(out, "logits.npy"))
        if got.shape != want.shape:
            report(f"{name} [{B}x{S}] logits: shape {list(got.shape)}, want {list(want.shape)}",
                   False)
            continue
        r = rel_max(got, want)
        report(f"{name} [{B}x{S}] logits: max rel diff {r:.1e} (tol {args.tol:g})", r <= args.tol)
        if args.ort:
            import onnxruntime as ort
            sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
            o = sess.run(["logits"], {n: ref[keys["inputs"][tag][n]] for n in inputs})[0]
            r = rel_max(o, want)
            report(f"{name} [{B}x{S}] onnxruntime logits: max rel diff {r:.1e}", r <= args.tol)

    if not args.train:
        return
    a = meta["adamw"]
    bdir = os.path.join(wdir, "batches")
    os.makedirs(bdir)
    for n, k in keys["train_batches"].items():
        np.save(os.path.join(bdir, n + ".npy"), ref[k])
    log = os.path.join(wdir, "train.jsonl")
    saved = os.path.join(wdir, "trained.safetensors")
    loss = "masked-lm" if meta["family"] == "bert" else "causal-lm"
    cmd = ["train", model, "--loss", loss, "--batches", bdir, "--steps", str(a["steps"]),
           "--lr", repr(a["lr"]), "--lr-schedule", a["lr_schedule"], "--warmup",
           str(a["warmup"]), "--weight-decay", repr(a["weight_decay"]), "--beta1",
           repr(a["betas"][0]), "--beta2", repr(a["betas"][1]), "--eps", repr(a["eps"]),
           "--clip-grad", repr(a["clip_grad_norm"]), "--log-json", log, "--log-every", "100",
           "--progress", "plain", "--device", args.device]
    if args.weights:
        cmd += ["--save", saved]
    err = mlc(cmd, f"{name} train")
    if err:
        report(err, False)
        return
    trained_count = re.search(r"training (\d+) parameters", last_output[0])
    rows = [json.loads(line) for line in open(log) if line.strip()]
    got = [r["loss"] for r in rows]
    want = ref["train_losses"]
    if len(got) != len(want):
        report(f"{name} train: {len(got)} steps logged, want {len(want)}", False)
        return
    worst = max(abs(g - w) / abs(w) for g, w in zip(got, want))
    ok = worst <= args.loss_tol
    report(f"{name} train: {len(got)} steps, loss {want[0]:.6f} -> {want[-1]:.6f}, max rel diff "
           f"{worst:.1e} (tol {args.loss_tol:g})", ok)
    if not ok:
        print(f"  mlc   {got}\n  torch {want.tolist()}")
    if all("grad_norm" in r for r in rows):
        norms = ref["train_grad_norms"]
        worst = max(abs(r["grad_norm"] - w) / w for r, w in zip(rows, norms))
        report(f"{name} train: gradient norms before clipping, max rel diff {worst:.1e} "
               f"(tol {args.loss_tol:g})", worst <= args.loss_tol)
    if not args.weights:
        return
    trained = read_safetensors(os.path.join(HERE, meta["weights"]["trained"]))
    mine = read_safetensors(saved)
    imap = meta["initializer_to_hf"]
    worst, where, missing = 0.0, None, []
    for n, v in mine.items():
        # A name torch's state_dict has is that tensor; others (val_N of a
        # file without the graph signature) go through the value map.
        m = imap.get(n) if n not in trained else None
        hf, transposed = (m["hf"][0], m["relation"] == "transposed") if m else (n, False)
        if hf not in trained:
            missing.append(n)
            continue
        w = trained[hf].T if transposed else trained[hf]
        if w.shape != v.shape:
            missing.append(n)
            continue
        # Relative to the most AdamW can move an element (lr per step): the
        # attention key biases' gradients are 0 in exact arithmetic (softmax
        # ignores a shift over the keys), so their ~1e-11 f32 gradients make
        # updates of rounding noise, tiny but unrelated between mlc and torch.
        r = float(np.max(np.abs(v.astype(np.float64) - w))) / (a["lr"] * a["steps"])
        if r > worst:
            worst, where = r, n
    # torch.export's BUFFERs (inv_freq) are the import's constants: never
    # trained, so never among the saved parameters.
    trainedBuffers = sorted(set(meta.get("buffers", [])) & set(mine))
    if meta.get("buffers"):
        report(f"{name} buffers {meta['buffers']}: not trained" +
               (f"; saved as parameters: {trainedBuffers}" if trainedBuffers else ""),
               not trainedBuffers)
    if "-dynamo" in name:
        # torch.export names every parameter: --save writes each under its
        # name, so the file loads strictly into the model (the same names and
        # shapes as its state_dict), and mlc trains as many parameters as torch
        # (a tied weight once: its names share one tensor in torch).
        shapes = {k: v.shape for k, v in trained.items()}
        extra = sorted(set(mine) - set(shapes))
        absent = sorted(set(shapes) - set(mine))
        bad = sorted(k for k in set(mine) & set(shapes) if mine[k].shape != shapes[k])
        report(f"{name} --save against torch's state_dict: {len(mine)} tensors"
               + (f", not in torch's: {extra}" if extra else "")
               + (f", missing: {absent}" if absent else "")
               + (f", other shapes: {bad}" if bad else ""), not (extra or absent or bad))
        tied = meta["weights"].get("tied", [])
        torch_count = sum(v.size for v in trained.values()) - sum(
            (len(group) - 1) * trained[group[0]].size for group in tied)
        got_count = int(trained_count.group(1)) if trained_count else None
        report(f"{name} trained parameters: mlc {got_count}, torch {torch_count}",
               got_count == torch_count)
    covered = {imap[n]["hf"][0] if n in imap and n not in trained else n for n in mine}
    params = {m["hf"][0] for m in imap.values()}
    if "-dynamo" in name:
        params = set(trained)
    unsaved = sorted(params - covered)
    ok = worst <= args.weight_tol and not missing and not unsaved
    report(f"{name} trained weights: {len(mine)} tensors, max abs diff / (lr x steps) {worst:.1e} "
           f"({where})" + (f", not in torch's: {missing}" if missing else "")
           + (f", not saved: {unsaved}" if unsaved else "")
           + f" (tol {args.weight_tol:g})", ok)

for n in names:
    check(n)
if all(results) and results:
    print("MODERN PARITY MATCH")
else:
    print("MODERN PARITY MISMATCH")
    sys.exit(1)
