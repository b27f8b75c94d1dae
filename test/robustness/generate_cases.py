"""The robustness suite: malformed inputs for every reader and numeric flag.

    generate_cases.py --mlc MLC --runtime MLC_RUNTIME --work DIR

For each boundary (training flags, safetensors weights, .npy batches and run
inputs, packages with an edited plan or GEMM sizes, Megatron datasets, JSONL
corpora) it generates bad inputs — truncation, nesting, overflow, wrong dtype,
out-of-range values — runs the tool on each and requires:
  * a clean exit: a status in 1..127 (never a signal or a hang; 30 s limit),
  * a message on stderr that names what is wrong (the flag, or the file),
  * nothing left behind: no temporary files, no output from the failed run.
Prints one line per boundary with its count and exits 1 listing any failure.
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
from harness import arguments, counts, failures, report, run, sh, tiny_package

args = arguments()
W = args.work

pkg = tiny_package(args)
weights = os.path.join(W, "w.safetensors")
sh(args.mlc, "train", pkg, "--data", args.data, "--steps", "1", "--save", weights)
train = [args.runtime, "train", pkg, "--data", args.data, "--steps", "1"]

# 1. Every numeric training flag, with values no flag accepts.
flags = ["steps", "lr", "min-lr", "warmup", "weight-decay", "beta1", "beta2", "eps",
         "clip-grad", "seed", "eval-interval", "eval-iters", "log-every", "save-interval",
         "keep", "max-bad-steps", "global-batch", "base-batch", "sample-every"]
for flag in flags:
    for value in ["abc", "", "1e400", "-1e400", "nan", "-5", "3.5x", "99999999999999999999"]:
        if flag in ("lr", "min-lr", "weight-decay", "clip-grad", "eps", "beta1", "beta2") and \
                value == "99999999999999999999":
            continue  # a huge rate is a number; what it does is the update guard's business
        run("flags", train + [f"--{flag}", value], f"--{flag}")

# 2. safetensors weights for --init.
good = open(weights, "rb").read()
n = struct.unpack("<Q", good[:8])[0]
header = json.loads(good[8:8 + n])
cases = {"empty": b"", "short": good[:5], "header-past-end": struct.pack("<Q", 1 << 60) + good[8:],
         "nested": struct.pack("<Q", 200000) + b"[" * 100000 + b"]" * 100000}
for cut in (9, 8 + n // 2, 8 + n, len(good) // 2, len(good) - 1):
    cases[f"truncated-{cut}"] = good[:cut]


def with_header(edit):
    h = json.loads(json.dumps(header))
    edit(h)
    hb = json.dumps(h).encode()
    return struct.pack("<Q", len(hb)) + hb + good[8 + n:]


first = next(k for k in header if k != "__metadata__")
cases["wrong-dtype"] = with_header(lambda h: h[first].update(dtype="Q99"))
cases["negative-dim"] = with_header(lambda h: h[first].update(shape=[-1]))
cases["huge-dim"] = with_header(lambda h: h[first].update(shape=[1 << 40, 1 << 40]))
cases["overlap"] = with_header(lambda h: h[first].update(data_offsets=[0, h[first]["data_offsets"][1]]) or
                               [v.update(data_offsets=[0, v["data_offsets"][1] - v["data_offsets"][0]])
                                for k, v in h.items() if k != "__metadata__"])
cases["offsets-reversed"] = with_header(lambda h: h[first].update(
    data_offsets=h[first]["data_offsets"][::-1]))
cases["not-object"] = struct.pack("<Q", 2) + b"[]"
for name, data in cases.items():
    path = os.path.join(W, f"bad-{name}.safetensors")
    open(path, "wb").write(data)
    run("safetensors", train + ["--init", path], path)

# 3. .npy files as batches and run inputs.
ids = np.zeros((2, 8), dtype=np.int64)
np.save(os.path.join(W, "ids.npy"), ids)
goodnpy = open(os.path.join(W, "ids.npy"), "rb").read()
npys = {"empty": b"", "magic": b"NOTNUMPY" + goodnpy[8:], "truncated": goodnpy[:-9],
        "header-cut": goodnpy[:20],
        "shape-text": goodnpy.replace(b"(2, 8)", b"(2, x)"),
        "shape-huge": goodnpy.replace(b"(2, 8)", b"(999999999999, 999999999999)"),
        "fortran": goodnpy.replace(b"'fortran_order': False", b"'fortran_order': True ")}
for dtype in (np.float32, np.float64, np.bool_):
    p = os.path.join(W, f"ids-{np.dtype(dtype).name}.npy")
    np.save(p, np.ones((2, 8), dtype=dtype))
    npys[f"dtype-{np.dtype(dtype).name}"] = open(p, "rb").read()
np.save(os.path.join(W, "ids-shape.npy"), np.zeros((3, 8), dtype=np.int64))
npys["wrong-shape"] = open(os.path.join(W, "ids-shape.npy"), "rb").read()
np.save(os.path.join(W, "ids-range.npy"), np.full((2, 8), 1 << 20, dtype=np.int64))
npys["out-of-vocabulary"] = open(os.path.join(W, "ids-range.npy"), "rb").read()
for name, data in npys.items():
    path = os.path.join(W, f"bad-{name}.npy")
    open(path, "wb").write(data)
    out = os.path.join(W, f"out-{name}")
    run("npy", [args.runtime, "run", pkg, "--input", f"input_ids={path}", "--input",
                f"labels={W}/ids.npy", "--output-dir", out], path)
    if os.path.exists(out) and os.listdir(out):
        failures.append(f"npy {name}: outputs written by a failed run: {os.listdir(out)}")

# 4. Packages whose plan was edited and re-signed: every number of the first
# lines (offsets, sizes, ids) replaced by -1, a large and an overflowing value.
plan_lines = open(os.path.join(pkg, "plan.txt")).read().split("\n")
edits = []
for i, line in enumerate(plan_lines):
    words = line.split()
    if not words or words[0] in ("mlc-plan", "end"):
        continue
    for j, w in enumerate(words):
        if w.isdigit() or (w.startswith("%") and w[1:].isdigit()):
            for value in ("-1", "99999999999", "18446744073709551617"):
                edits.append((i, j, value if not w.startswith("%") else "%" + value.lstrip("-")))
    if len(edits) > 60:
        break

# The GEMM flags: a product's bias and GELU flags against its buffers
# (one missing, one too many, flags repeated or after the buffers, the bias
# or the pre-activation a buffer of another type or size).
gemm_at = next(i for i, l in enumerate(plan_lines) if l.startswith("gemm ") and " gelu " in l)
words = plan_lines[gemm_at].split()
first_buf = next(j for j, w in enumerate(words) if w.startswith("%"))
ids_buf = next(l.split()[1] for l in plan_lines if l.startswith("buf ") and " input " in l)
small_buf = next(l.split()[1] for l in plan_lines if l.startswith("buf ") and " param " in l and "bias" in l)
line_edits = [words[:-1], words + [words[-1]], words[:first_buf] + ["gelu"] + words[first_buf:],
              words[:first_buf - 2] + ["gelu", "bias"] + words[first_buf:],
              words + ["bias"], words[:first_buf + 3] + [ids_buf] + words[first_buf + 4:],
              words[:-1] + [small_buf], words[:-1] + [ids_buf]]
# accumulate (out += the product): never with a GELU, and before the other flags.
first_flag = next(j for j, w in enumerate(words) if w in ("bias", "gelu"))
line_edits += [words[:first_flag] + ["accumulate"] + words[first_flag:],
               words[:first_buf] + ["accumulate"] + words[first_buf:]]
edits_whole = [(gemm_at, " ".join(w)) for w in line_edits]


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def edited_line(i, j, value):
    words = plan_lines[i].split()
    words[j] = value
    return i, " ".join(words)


for k, (i, line) in enumerate([edited_line(*e) for e in edits[::3]] + edits_whole):
    out = os.path.join(W, f"edited-{k}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(pkg, out)
    lines = list(plan_lines)
    lines[i] = line
    text = "\n".join(lines)
    open(os.path.join(out, "plan.txt"), "w").write(text)
    m = json.load(open(os.path.join(out, "manifest.json")))
    m["files"]["plan.txt"] = fnv1a(text.encode())
    json.dump(m, open(os.path.join(out, "manifest.json"), "w"))
    before = subprocess.run([args.runtime, "train", out, "--data", args.data, "--steps", "1"],
                            capture_output=True, text=True, timeout=60)
    counts["plan"] = counts.get("plan", 0) + 1
    if not 0 <= before.returncode <= 127:
        failures.append(f"plan edit {lines[i]!r}: exit {before.returncode}: {before.stderr[-300:]}")
    elif before.returncode != 0 and "plan.txt" not in before.stderr and out not in before.stderr:
        failures.append(f"plan edit {lines[i]!r}: the message names neither the plan nor the "
                        f"package: {before.stderr[-300:]}")

# An output name that is a path, in a package edited and re-signed: `run`
# refuses it and writes nothing outside --output-dir.
for name in ("../escaped", "sub/logits", "..", ""):
    out = os.path.join(W, "named-" + str(len(name)))
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(pkg, out)
    text = open(os.path.join(out, "plan.txt")).read().replace("output logits ", f"output {name} ")
    open(os.path.join(out, "plan.txt"), "w").write(text)
    m = json.load(open(os.path.join(out, "manifest.json")))
    m["files"]["plan.txt"] = fnv1a(text.encode())
    json.dump(m, open(os.path.join(out, "manifest.json"), "w"))
    dest = os.path.join(W, "named-out", "dir")
    run("plan", [args.runtime, "run", out, "--input", f"input_ids={W}/ids.npy", "--input",
                 f"labels={W}/ids.npy", "--output-dir", dest], out)
    if glob.glob(os.path.join(W, "named-out", "*.npy")) or glob.glob(os.path.join(W, "escaped*")):
        failures.append(f"plan output named {name!r}: a file was written outside --output-dir")

# GEMM sizes edited past the buffers they read and write (M, N or K doubled),
# in every function's products: refused at load naming the plan, never run.
for i in [i for i, l in enumerate(plan_lines) if l.startswith("gemm ")][::3]:
    for j in (3, 4, 5):  # gemm TA TB M N K
        words = plan_lines[i].split()
        if words[j] == "T":
            continue
        words[j] = str(int(words[j]) * 2)
        out = os.path.join(W, f"gemm-{i}-{j}")
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(pkg, out)
        lines = list(plan_lines)
        lines[i] = " ".join(words)
        text = "\n".join(lines)
        open(os.path.join(out, "plan.txt"), "w").write(text)
        m = json.load(open(os.path.join(out, "manifest.json")))
        m["files"]["plan.txt"] = fnv1a(text.encode())
        json.dump(m, open(os.path.join(out, "manifest.json"), "w"))
        run("gemm", [args.runtime, "train", out, "--data", args.data, "--steps", "1"],
            "plan.txt:" + str(i + 1) + ": gemm")

# 5. Megatron datasets.
corpus = os.path.join(W, "c.jsonl")
open(corpus, "w").write("".join(json.dumps({"text": t}) + "\n" for t in ["hello world"] * 50))
sh(args.mlc, "preprocess", "--input", corpus, "--output-prefix", os.path.join(W, "d"), "--append-eod")
idx = open(os.path.join(W, "d_text_document.idx"), "rb").read()
binf = open(os.path.join(W, "d_text_document.bin"), "rb").read()
datasets = {"idx-empty": (b"", binf), "idx-magic": (b"X" + idx[1:], binf),
            "idx-version": (idx[:9] + struct.pack("<Q", 7) + idx[17:], binf),
            "idx-dtype": (idx[:17] + bytes([42]) + idx[18:], binf),
            "idx-float": (idx[:17] + bytes([6]) + idx[18:], binf),
            "idx-count": (idx[:18] + struct.pack("<Q", 1 << 50) + idx[26:], binf),
            "bin-truncated": (idx, binf[:len(binf) // 3]), "bin-empty": (idx, b"")}
for cut in (20, 34, len(idx) // 2, len(idx) - 3):
    datasets[f"idx-truncated-{cut}"] = (idx[:cut], binf)
for name, (i_bytes, b_bytes) in datasets.items():
    prefix = os.path.join(W, f"ds-{name}")
    open(prefix + ".idx", "wb").write(i_bytes)
    open(prefix + ".bin", "wb").write(b_bytes)
    run("dataset", train[:3] + ["--data", prefix, "--steps", "1"], prefix)
    run("dataset", [args.mlc, "data", "stats", prefix], prefix)

# 6. JSONL corpora: bad lines are reported by line and skipped, never fatal.
lines = ["[" * 5000 + "]" * 5000, '{"text": "\\ud800"}', '{"text": "\\uZZZZ"}', '{"text": 5}',
         '{"text": "x"', "\x00\x01\x02", '{"text": "' + "a" * 100000 + '"}', '{"title": "t"}',
         '{"text": "ok"}']
corpus = os.path.join(W, "bad.jsonl")
open(corpus, "w").write("\n".join(lines) + "\n")
r = subprocess.run([args.mlc, "preprocess", "--input", corpus, "--output-prefix",
                    os.path.join(W, "bad")], capture_output=True, text=True, timeout=60)
counts["jsonl"] = len(lines)
if r.returncode != 0:
    failures.append(f"jsonl: exit {r.returncode}: {r.stderr[-300:]}")
for k in (1, 3, 4, 5, 6, 8):
    if f"bad.jsonl:{k}:" not in r.stderr:
        failures.append(f"jsonl: line {k} not reported: {r.stderr[-400:]}")
r = subprocess.run([args.mlc, "preprocess", "--input", corpus, "--output-prefix",
                    os.path.join(W, "strict"), "--strict"], capture_output=True, text=True)
counts["jsonl"] += 1
if not 1 <= r.returncode <= 127 or "bad.jsonl:1:" not in r.stderr or \
        glob.glob(os.path.join(W, "strict*")):
    failures.append(f"jsonl --strict: exit {r.returncode}, left {glob.glob(os.path.join(W, 'strict*'))}")

report()
