#!/usr/bin/python3
"""Probe mlc with bad input and classify how each case ends.

    scripts/probe_bad_input.py [--bin build/bin] [--work DIR] [--only KIND,...]
                               [--timeout S] [--jobs N] [--json FILE] [--fresh]
                               [--retry X]

Each case runs one command (mlc, mlc-runtime) on a bad input: --config files
(FIFOs, /dev/zero, huge, deeply nested, wrong types, inf/nan/negative/zero for
every numeric key of the builtin models), every numeric flag of compile, train,
run, generate, preprocess and tokenizer train, conflicting flags, compile flags
given with a package, Megatron datasets, edited packages, checkpoints, ONNX
files, tokenizer.json files, Hugging Face model directories and --save DIR/
with --max-shard-size. Every outcome is one of:

  refused    nonzero exit, no crash, a message that names the input (the
             flag, the key, the file or the node the case is about)
  vague      refused, but the message does not name what the case is about
  crash      a signal, a sanitizer report, "LLVM ERROR", an abort or an
             uncaught exception
  hang       still running at the timeout (a second, 6x longer try agrees)
  accepted   exit 0 where the value is wrong (a silent wrong outcome)
  ok         exit 0 (or any clean exit) where the value is legitimate

It prints the counts per outcome and per kind, lists every case that is not
refused or ok, and exits 1 if any crash, hang or silent acceptance remains.
--fresh runs only the second probe's cases (issue 30's acceptance: new
variants of every kind, e.g. plan.txt edits past the GEMM sizes, other
corruptions of .idx files, tokenizer.json files, OMP_* and MLC_* variables);
its defects are held by test/tools/probe-second.test. A probe is not a test: `make test` runs the robustness suite
(test/robustness/) and the lit tests of each defect the probe found.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
ap.add_argument("--work", default="/tmp/mlc-probe")
ap.add_argument("--only", default="")
ap.add_argument("--timeout", type=float, default=60)
ap.add_argument("--jobs", type=int, default=1)
ap.add_argument("--json", default="")
ap.add_argument("--fresh", action="store_true",
                help="run only the second probe's cases (the section 'fresh variants')")
ap.add_argument("--retry", type=float, default=6,
                help="a case still running at --timeout is tried again for this many times it")
args = ap.parse_args()
MLC = os.path.join(args.bin, "mlc")
RUNTIME = os.path.join(args.bin, "mlc-runtime")
W = os.path.abspath(args.work)
DATA = os.path.join(ROOT, "data", "corpus", "LICENSE-python-docs.txt")
ONLY = set(filter(None, args.only.split(",")))
ENV = dict(os.environ, OMP_NUM_THREADS="1", MLC_NO_PROGRESS="1")
SERIAL = iter(range(1 << 30))
cases = []  # (kind, name, argv, expect, must_name)
FRESH = [False]  # whether the cases being added are the second probe's
REFS = []  # the reference command lines of 'same:N' cases


def case(kind, name, argv, expect="refuse", must_name=None):
    """expect: 'refuse' (a wrong value: must fail cleanly naming must_name) or
    'any' (legitimate or borderline: any clean exit is fine) or 'same:N' (must
    succeed and print what REFS[N] prints: a value read as another one would
    differ)."""
    if ONLY and kind not in ONLY:
        return
    if args.fresh and not FRESH[0]:
        return
    cases.append((kind, name, [str(a) for a in argv], expect, must_name))


def sh(*argv):
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True,
                          env=ENV)


def p(*parts):
    return os.path.join(W, *parts)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def st_read(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def st_write(path, header, body):
    hb = json.dumps(header).encode()
    write(path, struct.pack("<Q", len(hb)) + hb + body)


# ---------------------------------------------------------------- fixtures
shutil.rmtree(W, ignore_errors=True)
os.makedirs(W)
TINY = "tiny,n_layer=1"
PKG = p("pkg")
sh(MLC, "compile", "gpt2", "--config", TINY, "--micro-batch", "2", "--seq-len", "8", "-o", PKG)
sh(MLC, "train", PKG, "--data", DATA, "--steps", "1", "--save", p("w.safetensors"))
sh(MLC, "train", PKG, "--data", DATA, "--steps", "2",
   "--save-dir", p("ck"), "--save", p("hf") + "/", "--max-shard-size", "100KB")
CK = p("ck", "step-00000002")
TRAIN = [MLC, "train", PKG, "--data", DATA, "--steps", "1", "--progress", "plain"]
COMPILE = [MLC, "compile", "gpt2", "--config", TINY, "--micro-batch", "2", "--seq-len", "8",
           "--emit=plan", "-o", os.devnull]

# ------------------------------------------------------------ config files
BAD_NUMBERS = ["0", "-1", "Infinity", "-Infinity", "NaN", "1e400", "1e30", "1.5", "true",
               '"7"', "null", "[]", "{}"]
GPT2 = {"vocab_size": "int", "n_positions": "int", "n_embd": "int", "n_layer": "layers",
        "n_head": "int", "n_inner": "int0", "resid_pdrop": "prob", "embd_pdrop": "prob",
        "attn_pdrop": "prob", "layer_norm_epsilon": "eps", "initializer_range": "std",
        "n_ctx": "free", "summary_first_dropout": "free"}
BERT = {"vocab_size": "int", "hidden_size": "int", "num_hidden_layers": "layers",
        "num_attention_heads": "int", "intermediate_size": "int",
        "max_position_embeddings": "int", "type_vocab_size": "int",
        "hidden_dropout_prob": "prob", "attention_probs_dropout_prob": "prob",
        "layer_norm_eps": "eps", "initializer_range": "std", "classifier_dropout": "free",
        "pad_token_id": "free"}
LLAMA = {"vocab_size": "int", "hidden_size": "int", "intermediate_size": "int",
         "num_hidden_layers": "layers", "num_attention_heads": "int",
         "num_key_value_heads": "int", "head_dim": "head_dim", "max_position_embeddings": "int",
         "rms_norm_eps": "eps", "rope_theta": "pos", "initializer_range": "std",
         "attention_dropout": "prob0", "pretraining_tp": "free"}
BASES = {
    "gpt2": ({"model_type": "gpt2", "vocab_size": 64, "n_positions": 32, "n_embd": 32,
              "n_layer": 1, "n_head": 4}, GPT2),
    "bert": ({"model_type": "bert", "vocab_size": 64, "hidden_size": 32,
              "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 48,
              "max_position_embeddings": 32}, BERT),
    "llama": ({"model_type": "llama", "vocab_size": 64, "hidden_size": 32,
               "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4,
               "num_key_value_heads": 2, "max_position_embeddings": 32}, LLAMA),
    "mistral": ({"model_type": "mistral", "vocab_size": 64, "hidden_size": 32,
                 "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "max_position_embeddings": 32,
                 "sliding_window": 16},
                dict(LLAMA, sliding_window="window")),
    "qwen3": ({"model_type": "qwen3", "vocab_size": 64, "hidden_size": 32,
               "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 32},
              dict(LLAMA, max_window_layers="free")),
}


def legit(kind, value, key=""):
    """Whether a JSON value is one HF's config class would build a model from."""
    v = json.loads(value) if value not in ("Infinity", "-Infinity", "NaN") else float(value)
    if kind == "free":
        return True
    if kind == "window":  # null: no window; >= seq-len: plain causal
        return v is None or (type(v) is int and v >= 8)
    if v is None:  # HF gives null a meaning for these keys only
        return kind in ("int0",) or key in ("num_key_value_heads", "head_dim")
    if type(v) is bool or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        return False
    if kind == "head_dim":  # 0 is transformers 5's "hidden_size / heads", as null
        return type(v) is int and 0 <= v <= 1 << 20
    if kind in ("int", "int0"):
        return type(v) is int and 1 <= v <= 1 << 20
    if kind == "layers":
        return type(v) is int and 0 <= v <= 64
    if kind == "prob":
        return 0 <= v <= 1
    if kind == "prob0":
        return v == 0
    if kind == "eps":  # finite and positive: HF builds the model from any such value
        return 0 < v
    if kind == "std":
        return 0 <= v
    if kind == "pos":
        return 0 < v
    return True


for fam, (base, keys) in BASES.items():
    model = "llama" if fam in ("mistral", "qwen3") else fam
    for key, kind in keys.items():
        for value in BAD_NUMBERS:
            text = json.dumps(base)[:-1] + f', "{key}": {value}}}'
            path = write(p("cfg", f"{fam}-{key}-{next(SERIAL)}.json"), text)
            expect = "any" if legit(kind, value, key) else "refuse"
            case("config-value", f"{fam} {key}={value}",
                 [MLC, "compile", model, "--config", path, "--seq-len", "8", "--micro-batch",
                  "1", "--emit=graph", "-o", os.devnull], expect, key)
        # The same key on the command line, after a preset.
        for value in ["inf", "nan", "-1", "0", "1e400", "abc", "1.5", ""]:
            preset = {"gpt2": "tiny", "bert": "tiny", "llama": "tiny"}.get(fam)
            if not preset:
                continue
            jv = {"inf": "Infinity", "nan": "NaN", "abc": '"abc"', "": '""'}.get(value, value)
            expect = "any" if legit(kind, jv, key) or (key == "n_inner" and value == "0") else "refuse"
            case("config-flag", f"{fam} {key}={value}",
                 [MLC, "compile", model, "--config", f"{preset},{key}={value}", "--seq-len",
                  "8", "--micro-batch", "1", "--emit=graph", "-o", os.devnull], expect, key)

# The file itself.
fifo = p("cfg", "fifo.json")
os.mkfifo(fifo)
os.symlink("/dev/zero", p("cfg", "zero.json"))
os.symlink(p("cfg", "missing-target.json"), p("cfg", "dangling.json"))
write(p("cfg", "huge.json"), '{"model_type": "gpt2", "pad": "' + "x" * (6 << 20) + '"}')
write(p("cfg", "deep.json"), "[" * 60000 + "]" * 60000)
write(p("cfg", "deep-obj.json"), '{"a":' * 60000 + "1" + "}" * 60000)
write(p("cfg", "deep65.json"), '{"model_type": "gpt2", "x": ' + "[" * 70 + "]" * 70 + "}")
write(p("cfg", "empty.json"), "")
write(p("cfg", "array.json"), "[1, 2]")
write(p("cfg", "string.json"), '"gpt2"')
write(p("cfg", "truncated.json"), '{"model_type": "gpt2", "n_layer": ')
write(p("cfg", "binary.json"), bytes(range(256)) * 4)
write(p("cfg", "utf16.json"), '{"model_type": "gpt2"}'.encode("utf-16"))
write(p("cfg", "dup.json"), '{"model_type": "gpt2", "n_layer": 1, "n_layer": 2}')
write(p("cfg", "unknown-key.json"), '{"model_type": "gpt2", "n_layers": 3}')
write(p("cfg", "wrong-type.json"), '{"model_type": "bert", "n_layer": 1}')
write(p("cfg", "no-type.json"), '{"n_layer": 1}')
write(p("cfg", "type-int.json"), '{"model_type": 5}')
write(p("cfg", "trailing.json"), '{"model_type": "gpt2"} {"x": 1}')
write(p("cfg", "nul.json"), b'{"model_type": "gpt2\x00x"}')
os.makedirs(p("cfg", "emptydir"))
os.makedirs(p("cfg", "dir-config-is-dir", "config.json"))
write(p("cfg", "unreadable.json"), "{}")
os.chmod(p("cfg", "unreadable.json"), 0)
for name in ["fifo.json", "zero.json", "dangling.json", "huge.json", "deep.json",
             "deep-obj.json", "deep65.json", "empty.json", "array.json", "string.json",
             "truncated.json", "binary.json", "utf16.json", "dup.json", "unknown-key.json",
             "wrong-type.json", "no-type.json", "type-int.json", "trailing.json", "nul.json",
             "emptydir", "dir-config-is-dir", "/dev/null", "/proc/self/mem", "/dev/stdin"]:
        path = name if name.startswith("/") else p("cfg", name)
        expect = "refuse"
        if name in ("dup.json", "no-type.json"):
            expect = "any"  # Python's json keeps the last value; HF's classes need no model_type
        case("config-file", name, COMPILE[:3] + ["--config", path] + COMPILE[5:], expect,
             os.path.basename(name) if name != "dup.json" else "n_layer")

# ---------------------------------------------------------------- flags
NOT_NUMBERS = ["inf", "-inf", "nan", "1e400", "-1e400", "99999999999999999999", "abc", "",
               "3.5x", "0x10"]
# flag: (values that are legitimate, values to skip as long runs)
TRAIN_FLAGS = {
    "steps": ({"1.0"}, {"2147483648", "1e12"}),
    "lr": ({"0", "1.5", "1e-300", "2147483648", "1e12"}, set()),
    "min-lr": ({"0", "1e-300"}, set()),
    "warmup": ({"0", "2147483648", "1e12"}, set()),
    "weight-decay": ({"0", "1.5", "1e-300", "2147483648", "1e12"}, set()),
    "beta1": ({"0", "1e-300"}, set()),
    "beta2": ({"0", "1e-300"}, set()),
    "eps": ({"0", "1.5", "2147483648", "1e12"}, set()),
    "clip-grad": ({"0", "1.5", "1e-300", "2147483648", "1e12"}, set()),
    "seed": ({"0", "2147483648", "-1"}, set()),
    "eval-interval": ({"0", "2147483648", "1e12"}, set()),
    "eval-iters": ({"0", "2147483648", "1e12"}, set()),
    "log-every": ({"2147483648", "1e12"}, set()),
    "save-interval": ({"0", "2147483648", "1e12"}, set()),
    "keep": ({"0", "2147483648", "1e12"}, set()),
    "max-bad-steps": ({"0", "2147483648", "1e12"}, set()),
    "global-batch": ({"0"}, {"2147483648", "1e12"}),
    "base-batch": ({"0", "2147483648", "1e12"}, set()),
    "sample-every": ({"0", "2147483648", "1e12"}, set()),
    "eod-token": ({"0", "-1"}, set()),
    "comm-timeout": ({"1.5", "2147483648", "1e12", "1e-300"}, set()),
    "peak-tflops": ({"1.5", "2147483648", "1e12", "1e-300"}, set()),
}
VALUES = ["0", "-1", "-5", "1.5", "1e-300", "2147483648", "1e12"]
for flag, (ok, skip) in TRAIN_FLAGS.items():
    for value in VALUES + NOT_NUMBERS:
        if value in skip:
            continue
        extra = []
        if flag == "base-batch":
            extra = ["--lr-scaling", "linear"]
        if flag in ("eval-iters",):
            extra = ["--eval-interval", "1"]
        floats = flag in ("lr", "weight-decay", "eps", "clip-grad", "comm-timeout", "peak-tflops")
        legit = value in ok or (value == "0x10" and ("2147483648" in ok or "1.5" in ok)) or \
            (value == "99999999999999999999" and floats and "1e12" in ok)
        case("train-flag", f"--{flag} {value!r}", TRAIN + [f"--{flag}", value] + extra,
             "any" if legit else "refuse", f"--{flag}")
for value in ["0", "1", "0,0,0", "-1,2,3", "nan,1,1", "inf,1,1", "abc", "1,2,3,4", "", "1e400,1"]:
    case("train-flag", f"--split {value!r}", TRAIN + ["--split", value],
         "any" if value == "1" else "refuse", "--split")
for value in ["x", "cpu,cpu", "cuda:99", "CPU"]:
    case("train-flag", f"--device {value!r}", TRAIN + ["--device", value], "refuse", "--device")

# Compile flags, on a model and with a package (where each must agree with it).
# A bucket of any finite positive size is one (a tiny one per tensor, a huge
# one for the whole gradient); --recompute-num-layers past the model's layers
# recomputes them all, as Megatron-LM's block method does.
BUCKET = {"1.5", "25", "1", "3", "2147483648", "1e12", "1e-300", "99999999999999999999", "0x10"}
COMPILE_FLAGS = {"micro-batch": {"1", "2", "3", "0x10"}, "seq-len": {"3", "8", "16", "0x10"},
                 "ranks": {"1", "2", "3", "0x10"}, "recompute-num-layers": {"-1"},
                 "bucket-cap-mb": BUCKET, "first-bucket-mb": BUCKET}
for flag, ok in COMPILE_FLAGS.items():
    for value in ["0", "-1", "-5", "1.5", "3", "2147483648", "1e12", "1e-300"] + NOT_NUMBERS:
        argv = [a for a in COMPILE]
        if flag in ("micro-batch", "seq-len"):
            i = argv.index(f"--{flag}")
            argv[i + 1] = value
        else:
            argv += [f"--{flag}", value]
        expect = "any" if value in ok or (flag == "recompute-num-layers" and value == "0") \
            else "refuse"
        if flag == "recompute-num-layers":
            argv += ["--recompute", "full"]
            expect = "any" if value in ("-1", "1", "3", "2147483648", "0x10") else "refuse"
        case("compile-flag", f"--{flag} {value!r}", argv, expect, f"--{flag}")
for value in ["0", "1", "80GB", "1e400", "nan", "-1GB", "abc", "1KB", "99999999999999999999GB",
              "1.5", "inf", "", "80XB", "h100", "a100,1"]:
    case("compile-flag", f"--device-memory {value!r}", COMPILE + ["--device-memory", value],
         "any" if value in ("80GB", "h100", "99999999999999999999GB", "") else "refuse",
         "--device-memory")
for value in ["h100", "h100,peak-f32=0", "h100,bw=nan", "h100,bw=inf", "h100,bf16=-1",
              "h100,f32=1e400", "nope", "", "h100,bw=", "h100,unknown=3", "bw=1,bf16=1,f32=1",
              "h100,bw=1e-300"]:
    case("compile-flag", f"--roofline {value!r}", COMPILE + ["--roofline", value],
         "any" if value in ("h100", "bw=1,bf16=1,f32=1", "h100,bw=1e-300", "") else "refuse",
         "--roofline")
for value in ["none", "", "sm_0", "sm_999999999999", "sm_abc", "sm_80,,sm_90", "compute_80"]:
    case("compile-flag", f"--report --cuda-arch {value!r}",
         COMPILE[:-3] + ["--report", "--cuda-arch", value], "any" if value in ("none", "", "sm_80,,sm_90")
         else "refuse", value or "--cuda-arch")
for value in ["full", "selective", "none", "", "FULL", "partial"]:
    case("compile-flag", f"--recompute {value!r}", COMPILE + ["--recompute", value],
         "any" if value in ("full", "selective", "none") else "refuse", "--recompute")
for value in ["2", "-1", "0", "abc"]:
    case("compile-flag", f"--recompute-num-layers {value} without full",
         COMPILE + ["--recompute-num-layers", value], "any" if value == "-1" else "refuse",
         "--recompute-num-layers")
case("compile-flag", "--recompute selective --recompute-num-layers 1",
     COMPILE + ["--recompute", "selective", "--recompute-num-layers", "1"], "refuse",
     "--recompute-num-layers")
for value in ["seq=0", "seq=-1", "seq=abc", "=3", "seq", "batch=99999999999999999999"]:
    case("compile-flag", f"--dim {value!r} on a builtin", COMPILE + ["--dim", value], "refuse",
         "--dim")

PKG_FLAGS = [("--micro-batch", "4"), ("--micro-batch", "2"), ("--seq-len", "16"),
             ("--seq-len", "8"), ("--config", "tiny"), ("--config", TINY), ("--dtype", "f64"),
             ("--dtype", "f32"), ("--reset-attention-mask", None), ("--no-fuse", None),
             ("--fuse", None), ("--ranks", "2"), ("--ranks", "1"), ("--recompute", "full"),
             ("--recompute", "none"), ("--recompute-num-layers", "1"),
             ("--recompute-num-layers", "-1"), ("--bucket-cap-mb", "5"),
             ("--bucket-cap-mb", "25"), ("--first-bucket-mb", "3"), ("--varlen", None),
             ("--reset-position-ids", None), ("--clip", "bucket"), ("--dim", "batch=2"),
             ("--loss", "masked-lm"), ("--labels", "y")]
for flag, value in PKG_FLAGS:
    same = (flag, value) in [("--micro-batch", "2"), ("--seq-len", "8"), ("--config", TINY),
                             ("--dtype", "f32"), ("--fuse", None), ("--ranks", "1"),
                             ("--recompute", "none"), ("--recompute-num-layers", "-1"),
                             ("--bucket-cap-mb", "25")]
    extra = [flag] + ([value] if value is not None else [])
    named = "--fuse" if flag == "--no-fuse" else flag  # --no-fuse is --fuse=false
    case("package-flag", " ".join(extra), TRAIN + extra, "any" if same else "refuse", named)
    if flag in ("--micro-batch", "--seq-len", "--config", "--dtype", "--no-fuse"):
        case("package-flag", "run " + " ".join(extra),
             [MLC, "run", PKG, "--init", p("w.safetensors"), "--input",
              f"input_ids={p('ids.npy')}", "--input", f"labels={p('ids.npy')}",
              "--output-dir", p("runout")] + extra, "any" if same else "refuse", named)
np.save(p("ids.npy"), np.zeros((2, 8), dtype=np.int64))

CONFLICTS = [
    ("--min-lr above --lr", TRAIN + ["--lr", "1e-3", "--min-lr", "1e-2"], "--min-lr"),
    ("--global-batch not a multiple", TRAIN + ["--global-batch", "3"], "--global-batch"),
    ("--keep without --save-dir", TRAIN + ["--keep", "2"], "--keep"),
    ("--save-interval without --save-dir", TRAIN + ["--save-interval", "1"], "--save-interval"),
    ("--resume latest without --save-dir", TRAIN + ["--resume", "latest"], "--resume"),
    ("--lr-scaling without --base-batch", TRAIN + ["--lr-scaling", "linear"], "--base-batch"),
    ("--base-batch without --lr-scaling", TRAIN + ["--base-batch", "4"], "--base-batch"),
    ("--eval-interval with split 1,0,0", TRAIN + ["--eval-interval", "1", "--split", "1,0,0"],
     "--eval-interval"),
    ("--eod-mask-loss on bytes eod 300", TRAIN + ["--eod-mask-loss", "--eod-token", "300"],
     "--eod-token"),
    ("--clip bucket on a global package", TRAIN + ["--clip", "bucket"], "--clip"),
    ("--vocab-file without --merge-file", TRAIN + ["--vocab-file", p("vocab.json")],
     "--merge-file"),
    ("--balance on gpt2", TRAIN + ["--balance", "zigzag"], "--balance"),
    ("--resume-with-changes without --resume", TRAIN + ["--resume-with-changes", "lr"],
     "--resume"),
    ("--data and --batches", TRAIN + ["--batches", p("nobatches")], "--batches"),
    ("--max-shard-size without --save DIR", TRAIN + ["--max-shard-size", "1MB"],
     "--max-shard-size"),
    ("--max-shard-size with --save FILE", TRAIN + ["--max-shard-size", "1MB", "--save",
                                                  p("x.safetensors")], "--max-shard-size"),
    ("--tokenizer-model without --save DIR", TRAIN + ["--tokenizer-model", p("hf")],
     "--tokenizer-model"),
    ("--memory-report to a directory", TRAIN + ["--memory-report", W], W),
    ("--memory-report into a missing dir", TRAIN + ["--memory-report", p("no", "dir", "m.json")],
     "m.json"),
    ("--memory-report empty", TRAIN + ["--memory-report", ""], "any"),  # as not given
    ("--log-json to a directory", TRAIN + ["--log-json", W], W),
    ("--reset-attention-mask on bert",
     [MLC, "compile", "bert", "--config", "tiny", "--reset-attention-mask", "--emit=graph",
      "-o", os.devnull], "--reset-attention-mask"),
    ("--varlen on gpt2", COMPILE + ["--varlen"], "--varlen"),
    ("--inference with --recompute", COMPILE + ["--inference", "--recompute", "full"],
     "--recompute"),
    ("--seq-len above n_positions", [MLC, "compile", "gpt2", "--config", "tiny,n_positions=16",
                                     "--seq-len", "32", "--emit=graph", "-o", os.devnull],
     "--seq-len"),
    ("--dtype bf16 on a f32 package", TRAIN + ["--dtype", "bf16"], "--dtype"),
    ("--dtype f16", COMPILE + ["--dtype", "f16"], "--dtype"),
    ("--device-memory too small", COMPILE + ["--device-memory", "1KB"], "--device-memory"),
    ("--emit with -o to a directory", COMPILE[:-1] + [W], W),
    ("OMP_NUM_THREADS=0", ["env", "OMP_NUM_THREADS=0"] + TRAIN, "any"),
    ("OMP_NUM_THREADS=abc", ["env", "OMP_NUM_THREADS=abc"] + TRAIN, "any"),
    ("OMP_NUM_THREADS=100000", ["env", "OMP_NUM_THREADS=100000"] + TRAIN, "any"),
]
for name, argv, must in CONFLICTS:
    expect = "any" if must == "any" else "refuse"
    case("conflict", name, argv, expect, None if must == "any" else must)

# generate, run, preprocess, tokenizer train.
GEN = [MLC, "generate", "gpt2", "--config", TINY, "--init", p("w.safetensors"), "--prompt", "The ",
       "--max-tokens", "4", "--seq-len", "8"]
# A huge temperature samples near-uniformly and a top-k past the vocabulary
# keeps it all: both are what they say. 0x10 is 16.
for flag, ok in {"max-tokens": {"0", "1", "2147483648", "1e12"},
                 "temperature": {"0", "1.5", "1e-300", "2147483648", "1e12", "99999999999999999999", "0x10"},
                 "top-k": {"0", "1", "1.5x", "2147483648"}, "seed": {"0", "-1", "2147483648"},
                 "seq-len": {"1", "0x10"}, "micro-batch": {"1", "0x10"}}.items():
    for value in ["0", "-1", "1.5", "1e-300", "2147483648", "1e12"] + NOT_NUMBERS:
        argv = list(GEN)
        if f"--{flag}" in argv:
            argv[argv.index(f"--{flag}") + 1] = value
        else:
            argv += [f"--{flag}", value]
        case("generate-flag", f"--{flag} {value!r}", argv, "any" if value in ok else "refuse",
             f"--{flag}")
case("generate-flag", "--prompt ''", GEN[:8] + ["", "--max-tokens", "4"], "any")
case("generate-flag", "--prompt longer than seq-len",
     GEN[:8] + ["x" * 40, "--max-tokens", "4", "--seq-len", "8"], "any")
case("generate-flag", "--prompt invalid utf-8", GEN[:8] + ["\udcff"] if False else GEN, "any")
RUN = [MLC, "run", "gpt2", "--config", TINY, "--init", p("w.safetensors"), "--output-dir",
       p("runout")]
for name, arr in [("ids-oov", np.full((2, 8), 256, np.int64)), ("ids-neg", np.full((2, 8), -1, np.int64)),
                  ("ids-f32", np.zeros((2, 8), np.float32)), ("ids-3d", np.zeros((2, 8, 1), np.int64)),
                  ("ids-short", np.zeros((2, 7), np.int64)), ("ids-empty", np.zeros((0, 8), np.int64)),
                  ("ids-i32", np.zeros((2, 8), np.int32)), ("ids-huge", np.full((2, 8), 1 << 40, np.int64))]:
    f = p(name + ".npy")
    np.save(f, arr)
    case("run-input", name, RUN + ["--input", f"input_ids={f}", "--input", f"labels={p('ids.npy')}",
                                   "--micro-batch", "2", "--seq-len", "8"],
         "any" if name == "ids-i32" else "refuse", f if name != "ids-oov" and name != "ids-neg"
         and name != "ids-huge" else "input_ids")
    case("run-input", "labels " + name, RUN + ["--input", f"input_ids={p('ids.npy')}", "--input",
                                               f"labels={f}", "--micro-batch", "2", "--seq-len", "8"],
         "any" if name in ("ids-i32",) else "refuse", f if name not in ("ids-oov", "ids-neg",
                                                                        "ids-huge") else "labels")
for flag in ("micro-batch", "seq-len"):
    for value in ["0", "-1", "1e12", "abc", "nan", "99999999999999999999"]:
        case("run-flag", f"--{flag} {value}", RUN + ["--input", f"input_ids={p('ids.npy')}",
                                                     "--input", f"labels={p('ids.npy')}",
                                                     f"--{flag}", value], "refuse", f"--{flag}")
write(p("corpus.jsonl"), "".join(json.dumps({"text": f"document {i} of the corpus, some words."}) + "\n"
                                 for i in range(50)))
for value in ["0", "-1", "1.5", "100000000", "abc", "", "nan", "99999999999999999999"]:
    case("preprocess-flag", f"--workers {value!r}",
         [MLC, "preprocess", "--input", p("corpus.jsonl"), "--output-prefix", p("pp", "x"),
          "--tokenizer-type", "ByteTokenizer", "--workers", value],
         "any" if value in ("100000000",) else "refuse", "--workers")
for value in ["0", "-1", "1.5", "255", "256", "257", "100000000", "abc", "", "nan", "inf",
              "99999999999999999999", "2147483648"]:
    case("tokenizer-flag", f"--vocab-size {value!r}",
         [MLC, "tokenizer", "train", "--input", p("corpus.jsonl"), "--output-dir", p("tok"),
          "--vocab-size", value], "any" if value in ("256", "257", "100000000", "2147483648")
         else "refuse", "--vocab-size")

# -------------------------------------------------------------- datasets
os.makedirs(p("ds"), exist_ok=True)
sh(MLC, "preprocess", "--input", p("corpus.jsonl"), "--output-prefix", p("ds", "good"),
   "--tokenizer-type", "ByteTokenizer", "--append-eod")
GOOD = p("ds", "good_text_document")
idx = open(GOOD + ".idx", "rb").read()
binb = open(GOOD + ".bin", "rb").read()
n_seq = struct.unpack("<Q", idx[18:26])[0]
n_doc = struct.unpack("<Q", idx[26:34])[0]
sizes_at, ptr_at = 34, 34 + 4 * n_seq
doc_at = ptr_at + 8 * n_seq


def ds(name, idx_bytes, bin_bytes, expect="refuse", must=None):
    prefix = p("ds", name)
    write(prefix + ".idx", idx_bytes)
    write(prefix + ".bin", bin_bytes)
    case("dataset", name, TRAIN[:3] + ["--data", prefix] + TRAIN[5:], expect, must or prefix)


def patch(b, at, fmt, value):
    return b[:at] + struct.pack(fmt, value) + b[at + struct.calcsize(fmt):]


dtype_code = idx[17]
ds("empty-idx", b"", binb)
ds("empty-bin", idx, b"")
ds("magic", b"X" + idx[1:], binb)
ds("version", patch(idx, 9, "<Q", 2), binb)
for code in sorted({0, 2, 4, 6, 7, 8, 9, 255} - {dtype_code}):
    ds(f"dtype-{code}", idx[:17] + bytes([code]) + idx[18:], binb)
ds("nseq-huge", patch(idx, 18, "<Q", 1 << 62), binb)
ds("ndoc-huge", patch(idx, 26, "<Q", 1 << 62), binb)
ds("nseq-zero", patch(patch(idx, 18, "<Q", 0), 26, "<Q", 1)[:34] + struct.pack("<q", 0), binb)
ds("size-negative", patch(idx, sizes_at, "<i", -5), binb)
ds("size-huge", patch(idx, sizes_at, "<i", 2**31 - 1), binb)
ds("ptr-past-end", patch(idx, ptr_at + 8, "<q", len(binb) + 100), binb)
ds("ptr-negative", patch(idx, ptr_at + 8, "<q", -8), binb)
ds("ptr-unaligned", patch(idx, ptr_at + 8, "<q", 3), binb)
ds("docidx-decreasing", patch(idx, doc_at + 16, "<q", 0), binb)
ds("docidx-past", patch(idx, doc_at + 8 * (n_doc - 1), "<q", n_seq + 5), binb)
for cut in (9, 17, 25, 33, sizes_at + 2, ptr_at + 3, doc_at + 1, len(idx) - 1):
    ds(f"idx-truncated-{cut}", idx[:cut], binb)
for cut in (1, len(binb) // 2, len(binb) - 1):
    ds(f"bin-truncated-{cut}", idx, binb[:cut])
ds("bin-longer", idx, binb + b"\0" * 64, "any")
ds("idx-trailing", idx + b"junk", binb, "any")  # Megatron's reader ignores them too
# Ids outside the model's vocabulary (uint16 data, a 256-row embedding).
big = np.frombuffer(binb, dtype=np.uint16 if dtype_code == 8 else np.uint8).astype(np.uint16)
big = big.copy()
big[:] = 60000  # every token: whichever sample the step draws holds one
idx16 = idx[:17] + bytes([8]) + idx[18:]
ptr16 = bytearray(idx16)
for i in range(n_seq):
    q = struct.unpack("<q", idx[ptr_at + 8 * i:ptr_at + 8 * i + 8])[0]
    isz = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 4, 7: 8, 8: 2}[dtype_code]
    ptr16[ptr_at + 8 * i:ptr_at + 8 * i + 8] = struct.pack("<q", q // isz * 2)
ds("ids-out-of-vocab", bytes(ptr16), big.tobytes(), "refuse", "vocab")
ds("fifo", idx, binb)
os.unlink(p("ds", "fifo.bin"))
os.mkfifo(p("ds", "fifo.bin"))
os.unlink(p("ds", "fifo.idx"))
os.symlink("/dev/zero", p("ds", "fifo.idx"))
for blend, ok in [("1 " + GOOD, True), ("0 " + GOOD, False), ("-1 " + GOOD, False),
                  ("nan " + GOOD, False), ("inf " + GOOD, False), ("1 " + GOOD + " 1", False),
                  (GOOD + " " + GOOD, False), ("1e400 " + GOOD, False),
                  ("1 " + GOOD + " 0 " + GOOD, "any")]:
    case("dataset", f"blend {blend.replace(W, '')!r}", TRAIN[:3] + ["--data", blend] + TRAIN[5:],
         "any" if ok else "refuse", "--data")
for name, data in [("empty.txt", b""), ("one.txt", b"x"), ("nine.txt", b"123456789")]:
    f = write(p("ds", name), data)
    case("dataset", f"plain {name}", TRAIN[:3] + ["--data", f] + TRAIN[5:],
         "any" if name == "nine.txt" else "refuse", f)

# -------------------------------------------------------------- packages
plan = open(os.path.join(PKG, "plan.txt")).read()
manifest = json.load(open(os.path.join(PKG, "manifest.json")))


def pkg_variant(name, files=None, edit_manifest=None, resign=True):
    out = p("pkgs", f"{name}.{next(SERIAL)}")
    shutil.copytree(PKG, out)
    m = json.loads(json.dumps(manifest))
    for fname, text in (files or {}).items():
        write(os.path.join(out, fname), text)
        if resign:
            m["files"][fname] = fnv1a(text.encode() if isinstance(text, str) else text)
    if edit_manifest:
        edit_manifest(m)
    if (files or edit_manifest) and "manifest.json" not in (files or {}):
        write(os.path.join(out, "manifest.json"), json.dumps(m, indent=2))
    return out


def pkg_case(name, expect="refuse", must=None, **kw):
    out = pkg_variant(name, **kw)
    case("package", name, [MLC, "train", out, "--data", DATA, "--steps", "1"], expect,
         must or out)


lines = plan.split("\n")
gemm_lines = [i for i, l in enumerate(lines) if l.startswith("gemm ")]
for k, i in enumerate(gemm_lines[:6]):
    words = lines[i].split()
    nums = [j for j, w in enumerate(words) if w.lstrip("-").isdigit()]
    for j in nums:
        for value in ("0", "1", str(int(words[j]) * 2 + 1), "-3"):
            ws = list(words)
            ws[j] = value
            ls = list(lines)
            ls[i] = " ".join(ws)
            # A smaller product stays inside its buffers: the plan is the
            # user's program once re-signed; only reads or writes past a
            # buffer (a larger size, a negative one) must be refused.
            smaller = value in ("0", "1") or int(value) <= int(words[j])
            pkg_case(f"gemm{k}-w{j}-{value}", "any" if smaller and value != "-3" else "refuse",
                     None, files={"plan.txt": "\n".join(ls)})
for i, l in enumerate(lines):
    w = l.split()
    if not w or w[0] not in ("buf", "launch", "param", "input", "output", "scalars"):
        continue
    if sum(1 for c in cases if c[1].startswith("line-" + w[0])) >= 6:
        continue
    for j, word in enumerate(w[1:], 1):
        if word.isdigit() and j < 6:
            ls = list(lines)
            ws = list(w)
            ws[j] = str(int(word) * 3 + 7)
            ls[i] = " ".join(ws)
            pkg_case(f"line-{w[0]}-{i}-{j}", "refuse", None, files={"plan.txt": "\n".join(ls)})
pkg_case("plan-unsigned-edit", files={"plan.txt": plan.replace("gemm", "gemm ", 1)}, resign=False)
pkg_case("plan-empty", files={"plan.txt": ""})
pkg_case("plan-binary", files={"plan.txt": bytes(range(256))})
pkg_case("plan-duplicated", files={"plan.txt": plan + plan})
pkg_case("plan-no-end", files={"plan.txt": plan.replace("\nend", "\n")})
pkg_case("kernels-edited", files={"kernels.cpp": open(os.path.join(PKG, "kernels.cpp")).read()
                                  + "\n#error edited\n"})
pkg_case("kernels-empty", files={"kernels.cpp": ""})
pkg_case("kernels-removed-fn", files={"kernels.cpp": open(os.path.join(PKG, "kernels.cpp")).read()
                                      .replace('extern "C"', "static", 1)})
pkg_case("manifest-version", edit_manifest=lambda m: m.update(version=99), must="version")
pkg_case("manifest-micro-batch", edit_manifest=lambda m: m.update(micro_batch=-1))
pkg_case("manifest-micro-batch-str", edit_manifest=lambda m: m.update(micro_batch="2"))
pkg_case("manifest-seq-len", edit_manifest=lambda m: m.update(seq_len=999))
# The manifest's ranks, bucket sizes and recompute mode describe the plan
# (which is signed, and is what runs); editing them changes nothing run.
pkg_case("manifest-ranks", edit_manifest=lambda m: m.update(ranks=0), expect="any")
pkg_case("manifest-dtype", edit_manifest=lambda m: m.update(dtype="f16"))
pkg_case("manifest-bucket", edit_manifest=lambda m: m.update(bucket_cap_mb=-1), expect="any")
pkg_case("manifest-recompute", edit_manifest=lambda m: m.update(recompute="maybe"), expect="any")
pkg_case("manifest-files-missing", edit_manifest=lambda m: m["files"].pop("plan.txt"))
pkg_case("manifest-file-extra", edit_manifest=lambda m: m["files"].update({"../x": "0"}))
pkg_case("manifest-kernels-counts", edit_manifest=lambda m: m["kernels"]["train_step"].update(
    launches=-5), expect="any")
pkg_case("manifest-config", edit_manifest=lambda m: m.update(config="tiny: n_layer=7"))
for name in ("manifest.json", "plan.txt", "kernels.cpp", "hf_config.json", "graph.mlir"):
    out = p("pkgs", "missing-" + name)
    shutil.copytree(PKG, out)
    os.unlink(os.path.join(out, name))
    case("package", "missing " + name, [MLC, "train", out, "--data", DATA, "--steps", "1"],
         "any" if name in ("graph.mlir", "kernels.cu") else "refuse", name)
out = p("pkgs", "manifest-fifo")
shutil.copytree(PKG, out)
os.unlink(os.path.join(out, "manifest.json"))
os.mkfifo(os.path.join(out, "manifest.json"))
case("package", "manifest fifo", [MLC, "train", out, "--data", DATA, "--steps", "1"], "refuse",
     "manifest.json")
out = p("pkgs", "plan-zero")
shutil.copytree(PKG, out)
os.unlink(os.path.join(out, "plan.txt"))
os.symlink("/dev/zero", os.path.join(out, "plan.txt"))
case("package", "plan /dev/zero", [MLC, "train", out, "--data", DATA, "--steps", "1"], "refuse",
     "plan.txt")

# ------------------------------------------------------------ checkpoints
ckfiles = {f: open(os.path.join(CK, f), "rb").read() for f in os.listdir(CK)}


def ck_case(name, files, expect="refuse", must=None, resign=True):
    out = p("cks", f"{name}.{next(SERIAL)}", "step-00000002")
    os.makedirs(out)
    meta = json.loads(ckfiles["checkpoint.json"])
    for f, data in ckfiles.items():
        data = files.get(f, data)
        write(os.path.join(out, f), data)
        if resign and f in meta["files"]:
            meta["files"][f] = fnv1a(data)
    write(os.path.join(out, "checkpoint.json"), files.get("checkpoint.json",
                                                          json.dumps(meta, indent=2).encode()))
    case("checkpoint", name, [MLC, "train", PKG, "--data", DATA, "--steps", "4", "--resume", out],
         expect, must or "step-00000002")


def st_edit(fname, edit):
    h, body = st_read(os.path.join(CK, fname))
    body = bytearray(body)
    h = edit(h, body) or h
    hb = json.dumps(h).encode()
    return struct.pack("<Q", len(hb)) + hb + bytes(body)


def poison(prefix, value):
    def edit(h, body):
        k = next(k for k in h if k.startswith(prefix))
        a, b = h[k]["data_offsets"]
        body[a:b] = np.full((b - a) // 4, value, np.float32).tobytes()
    return edit


def reshape(h, body):
    k = next(k for k in h if k != "__metadata__" and len(h[k]["shape"]) == 2)
    h[k]["shape"] = h[k]["shape"][::-1] if h[k]["shape"][0] != h[k]["shape"][1] else [1, -1]


ck_case("weights-nan", {"model.safetensors": st_edit("model.safetensors", poison("transformer", np.nan))})
ck_case("weights-inf", {"model.safetensors": st_edit("model.safetensors", poison("transformer", np.inf))})
ck_case("exp-avg-nan", {"optimizer.safetensors": st_edit("optimizer.safetensors", poison("exp_avg.", np.nan))})
ck_case("exp-avg-sq-negative", {"optimizer.safetensors": st_edit("optimizer.safetensors",
                                                                 poison("exp_avg_sq.", -1.0))})
ck_case("exp-avg-sq-inf", {"optimizer.safetensors": st_edit("optimizer.safetensors",
                                                            poison("exp_avg_sq.", np.inf))})
ck_case("weights-transposed", {"model.safetensors": st_edit("model.safetensors", reshape)})
ck_case("optimizer-transposed", {"optimizer.safetensors": st_edit("optimizer.safetensors", reshape)})
ck_case("weights-missing-tensor", {"model.safetensors": st_edit(
    "model.safetensors", lambda h, b: h.pop(next(k for k in h if k != "__metadata__")) and None)})
ck_case("optimizer-missing-tensor", {"optimizer.safetensors": st_edit(
    "optimizer.safetensors", lambda h, b: h.pop(next(k for k in h if k.startswith("exp_avg_sq"))) and None)})
for f in ("model.safetensors", "optimizer.safetensors", "state.json"):
    for cut in (0, 7, len(ckfiles[f]) // 2, len(ckfiles[f]) - 3):
        ck_case(f"{f}-truncated-{cut}", {f: ckfiles[f][:cut]})
    ck_case(f"{f}-unsigned-flip", {f: ckfiles[f][:-1] + bytes([ckfiles[f][-1] ^ 1])}, resign=False)
state = json.loads(ckfiles["state.json"])
for key, value in [("step", -1), ("step", 1 << 62), ("step", "2"), ("step", 2.5), ("step", None)]:
    s = dict(state)
    s[key] = value
    ck_case(f"state-{key}-{value}", {"state.json": json.dumps(s).encode()})
s = json.loads(json.dumps(state))
s.pop("run", None)
ck_case("state-no-run", {"state.json": json.dumps(s).encode()})
ck_case("checkpoint-json-step-mismatch", {"checkpoint.json": ckfiles["checkpoint.json"].replace(
    b'"step": 2', b'"step": 3')})
ck_case("checkpoint-json-empty", {"checkpoint.json": b""})

# --init weights with NaN / wrong shape (no checkpoint, just weights).
w = p("w.safetensors")
h, body = st_read(w)
for name, edit in [("nan", poison("transformer", np.nan)), ("shape", reshape)]:
    body2 = bytearray(body)
    h2 = json.loads(json.dumps(h))
    edit(h2, body2)
    f = p(f"init-{name}.safetensors")
    st_write(f, h2, bytes(body2))
    case("checkpoint", f"--init {name}", TRAIN + ["--init", f], "refuse", f)
body2 = bytearray(body)
h2 = json.loads(json.dumps(h))
k = next(k for k in h2 if k != "__metadata__")
h2[k]["dtype"] = "F16"
a, b = h2[k]["data_offsets"]
st_write(p("init-f16.safetensors"), h2, bytes(body2))
case("checkpoint", "--init F16 with F32 bytes", TRAIN + ["--init", p("init-f16.safetensors")],
     "refuse", "init-f16.safetensors")
h2 = json.loads(json.dumps(h))
h2["extra.tensor"] = dict(h2[k])
st_write(p("init-extra.safetensors"), h2, body)
case("checkpoint", "--init with an unknown tensor", TRAIN + ["--init", p("init-extra.safetensors")],
     "refuse", "init-extra.safetensors")

# ------------------------------------------------------------------- ONNX
try:
    import onnx
    from onnx import helper, numpy_helper, TensorProto
except ImportError:
    onnx = None
SRC = os.path.join(ROOT, "test", "onnx", "Inputs", "gpt2-lm-opset14-eval.onnx")
raw = open(SRC, "rb").read()
for cut in (0, 1, 10, 100, len(raw) // 3, len(raw) // 2, len(raw) - 10, len(raw) - 1):
    f = write(p("onnx", f"cut-{cut}.onnx"), raw[:cut])
    case("onnx", f"truncated at {cut}", [MLC, "import", f, "--micro-batch", "2", "--seq-len", "8"],
         "refuse", f)
for at in (20, 200, 2000, 20000, len(raw) // 2):
    f = write(p("onnx", f"flip-{at}.onnx"), raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1:])
    case("onnx", f"byte flipped at {at}", [MLC, "import", f, "--micro-batch", "2", "--seq-len", "8"],
         "any", f)
if onnx:
    base = onnx.load(SRC)

    def onnx_case(name, edit, expect="refuse", must=None, flags=("--micro-batch", "2", "--seq-len", "8")):
        m = onnx.ModelProto()
        m.CopyFrom(base)
        edit(m)
        f = p("onnx", name + ".onnx")
        os.makedirs(os.path.dirname(f), exist_ok=True)
        open(f, "wb").write(m.SerializeToString())
        case("onnx", name, [MLC, "import", f] + list(flags), expect, must or f)

    def first_node(m, op):
        return next(n for n in m.graph.node if n.op_type == op)

    init_names = [i.name for i in base.graph.initializer]
    big_init = max(base.graph.initializer, key=lambda t: len(t.raw_data))
    onnx_case("missing-initializer", lambda m: m.graph.initializer.remove(
        next(i for i in m.graph.initializer if i.name == big_init.name)), must=big_init.name)
    onnx_case("init-wrong-type", lambda m: next(i for i in m.graph.initializer
                                                if i.name == big_init.name).__setattr__(
        "data_type", TensorProto.INT64), must=big_init.name)
    onnx_case("init-short-data", lambda m: next(i for i in m.graph.initializer
                                                if i.name == big_init.name).__setattr__(
        "raw_data", big_init.raw_data[:-4]), must=big_init.name)

    def huge_dims(m):
        t = next(i for i in m.graph.initializer if i.name == big_init.name)
        del t.dims[:]
        t.dims.extend([1 << 31, 1 << 31])
    onnx_case("init-huge-dims", huge_dims, must=big_init.name)

    def neg_dims(m):
        t = next(i for i in m.graph.initializer if i.name == big_init.name)
        t.dims[0] = -4
    onnx_case("init-negative-dim", neg_dims, must=big_init.name)

    def unsupported(m):
        n = first_node(m, "Softmax") if any(n.op_type == "Softmax" for n in m.graph.node) \
            else m.graph.node[5]
        n.op_type = "FancyOp"
    onnx_case("unsupported-op", unsupported, must="FancyOp")

    def input_huge(m):
        d = m.graph.input[0].type.tensor_type.shape.dim
        d[0].ClearField("dim_param")
        d[0].dim_value = 1 << 40
    onnx_case("input-huge-dim", input_huge, must=base.graph.input[0].name, flags=())

    def input_type(m):
        m.graph.input[0].type.tensor_type.elem_type = TensorProto.STRING
    onnx_case("input-string-type", input_type, must=base.graph.input[0].name)

    def node_bad_input(m):
        m.graph.node[3].input[0] = "does_not_exist"
    onnx_case("node-dangling-input", node_bad_input, must="does_not_exist")

    def cycle(m):
        n = m.graph.node[4]
        m.graph.node[2].input[0] = n.output[0]
    onnx_case("graph-cycle", cycle, expect="refuse", must=None)

    def dup_output(m):
        m.graph.node[4].output[0] = m.graph.node[3].output[0]
    onnx_case("duplicate-output-name", dup_output)

    def bad_attr(m):
        for n in m.graph.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.INT:
                    a.i = 1 << 40
                    return
    onnx_case("attribute-huge", bad_attr, must=None)

    def opset(m):
        m.opset_import[0].version = 99
    onnx_case("opset-99", opset, must="opset")

    def no_output(m):
        del m.graph.output[:]
    onnx_case("no-outputs", no_output, must=None)
    for dim in ("0", "-1", "1e12", "99999999999999999999", "abc"):
        case("onnx", f"--seq-len {dim}", [MLC, "import", SRC, "--micro-batch", "2", "--seq-len", dim],
             "refuse", "--seq-len")
    for spec in ("batch=0", "nope=2", "batch=-1", "batch", "=2"):
        case("onnx", f"--dim {spec}", [MLC, "import", SRC, "--dim", spec, "--seq-len", "8"],
             "refuse", "--dim")

# --------------------------------------------------- tokenizer.json files
TOKSRC = os.path.join(ROOT, "test", "integration", "Inputs", "hf_tokenizers", "gpt2", "tokenizer.json")
tok = json.load(open(TOKSRC))


def tok_case(name, obj_or_bytes, expect="refuse", must=None, fits=False):
    """fits: the file's ids all lie in the 256-row model's vocabulary (--save
    copies such a file as it is, whether or not mlc's tokenizers read it)."""
    d = p("toks", name)
    os.makedirs(d)
    f = os.path.join(d, "tokenizer.json")
    if isinstance(obj_or_bytes, (bytes, str)):
        write(f, obj_or_bytes)
    else:
        write(f, json.dumps(obj_or_bytes))
    case("tokenizer", f"preprocess {name}",
         [MLC, "preprocess", "--input", p("corpus.jsonl"), "--output-prefix", p("tokout", name),
          "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", f], expect, must or f)
    case("tokenizer", f"generate {name}",
         [MLC, "generate", "gpt2", "--config", TINY, "--init", p("w.safetensors"), "--prompt",
          "The ", "--max-tokens", "2", "--seq-len", "8", "--tokenizer-type",
          "HuggingFaceTokenizer", "--tokenizer-model", f], "refuse",
         # a valid tokenizer of 50257 ids is refused for the 256-row model
         ("vocabulary", f) if expect == "any" else must or f)
    # Any tokenizer copied beside the 256-row model must fit it or be refused.
    case("tokenizer", f"save {name}", TRAIN + ["--save", p("tokhf", name) + "/",
                                               "--tokenizer-model", d],
         "any" if fits else "refuse", f)


def tedit(fn):
    t = json.loads(json.dumps(tok))
    fn(t)
    return t


tok_case("model-unknown", tedit(lambda t: t["model"].update(type="Transmogrifier")), must="Transmogrifier")
tok_case("model-missing", tedit(lambda t: t.pop("model")))
tok_case("merges-bad-string", tedit(lambda t: t["model"].update(merges=["a"] + t["model"]["merges"])))
tok_case("merges-unknown-token", tedit(lambda t: t["model"].update(merges=["zzqq xxyy"] + t["model"]["merges"])))
tok_case("merges-not-list", tedit(lambda t: t["model"].update(merges={"a": 1})))
tok_case("vocab-id-negative", tedit(lambda t: t["model"]["vocab"].update({"Ġthe": -3})))
tok_case("vocab-id-huge", tedit(lambda t: t["model"]["vocab"].update({"Ġthe": 1 << 40})))
tok_case("vocab-id-duplicate", tedit(lambda t: t["model"]["vocab"].update(
    {k: 0 for k in list(t["model"]["vocab"])[1:3]})))
tok_case("vocab-id-float", tedit(lambda t: t["model"]["vocab"].update({"Ġthe": 1.5})))
# HF's vocab is a map: ids may leave gaps. The data then holds id 5000000,
# which training refuses against the model's vocabulary.
tok_case("vocab-gap", tedit(lambda t: t["model"]["vocab"].update({"Ġthe": 5000000})), "any")
tok_case("added-token-id-huge", tedit(lambda t: t.setdefault("added_tokens", []).append(
    {"id": 1 << 33, "content": "<x>", "special": True, "single_word": False, "lstrip": False,
     "rstrip": False, "normalized": False})))
tok_case("normalizer-unknown", tedit(lambda t: t.update(normalizer={"type": "Frobnicate"})),
         must="Frobnicate")
tok_case("pretokenizer-unknown", tedit(lambda t: t.update(pre_tokenizer={"type": "Frobnicate"})),
         must="Frobnicate")
tok_case("empty", b"")
tok_case("deep", "[" * 100000 + "]" * 100000)
tok_case("huge", '{"x": "' + "a" * (40 << 20) + '"}', must=None)
tok_case("not-object", "[1]")
d = p("toks", "fifo")
os.makedirs(d)
os.mkfifo(os.path.join(d, "tokenizer.json"))
case("tokenizer", "preprocess fifo", [MLC, "preprocess", "--input", p("corpus.jsonl"),
                                      "--output-prefix", p("tokout", "fifo"), "--tokenizer-type",
                                      "HuggingFaceTokenizer", "--tokenizer-model", d],
     "refuse", "tokenizer.json")
case("tokenizer", "save fifo", TRAIN + ["--save", p("tokhf", "fifo") + "/", "--tokenizer-model", d],
     "refuse", "tokenizer.json")
# A tokenizer whose vocabulary is bigger than the model's (ids out of range).
case("tokenizer", "generate with a 50257-token tokenizer on a 256-row model",
     GEN + ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", TOKSRC], "refuse",
     "vocab")
case("tokenizer", "save with a 50257-token tokenizer on a 256-row model",
     TRAIN + ["--save", p("tokhf", "big") + "/", "--tokenizer-model", TOKSRC], "refuse", "vocab")

# ------------------------------------- model directories, --save DIR/, shards
os.makedirs(p("tokhf"), exist_ok=True)
os.makedirs(p("tokout"), exist_ok=True)
HF = p("hf")
index = json.load(open(os.path.join(HF, "model.safetensors.index.json")))
shards = sorted(set(index["weight_map"].values()))


def hf_case(name, edit, expect="refuse", must=None, also_config=True):
    d = p("hfs", name)
    shutil.copytree(HF, d)
    edit(d)
    case("model-dir", f"--init {name}", TRAIN + ["--init", d], expect, must or d)
    if also_config:
        case("model-dir", f"--config {name}",
             [MLC, "train", "gpt2", "--config", d, "--init", d, "--data", DATA, "--steps", "1",
              "--micro-batch", "2", "--seq-len", "8"], expect, must or d)


def edit_index(fn):
    def edit(d):
        f = os.path.join(d, "model.safetensors.index.json")
        ix = json.load(open(f))
        fn(ix, d)
        write(f, json.dumps(ix))
    return edit


hf_case("index-missing-shard", edit_index(lambda ix, d: ix["weight_map"].update(
    {next(iter(ix["weight_map"])): "model-00099-of-00099.safetensors"})), must="model-00099")
hf_case("index-path-escape", edit_index(lambda ix, d: ix["weight_map"].update(
    {next(iter(ix["weight_map"])): "../w.safetensors"})), must="../w.safetensors")
hf_case("index-absolute", edit_index(lambda ix, d: ix["weight_map"].update(
    {next(iter(ix["weight_map"])): p("w.safetensors")})), must="w.safetensors")


def two_shards(ix, d):
    # A tensor present in two shards: copy it into another shard's file.
    name = next(iter(ix["weight_map"]))
    s1 = ix["weight_map"][name]
    s2 = next(s for s in shards if s != s1)
    h1, b1 = st_read(os.path.join(d, s1))
    h2, b2 = st_read(os.path.join(d, s2))
    a, b = h1[name]["data_offsets"]
    h2[name] = dict(h1[name], data_offsets=[len(b2), len(b2) + b - a])
    st_write(os.path.join(d, s2), h2, b2 + b1[a:b])


hf_case("tensor-in-two-shards", edit_index(two_shards))


def header_disagrees(ix, d):
    name = next(iter(ix["weight_map"]))
    s1 = ix["weight_map"][name]
    s2 = next(s for s in shards if s != s1)
    ix["weight_map"][name] = s2


hf_case("shard-header-disagrees", edit_index(header_disagrees))
hf_case("index-missing-tensor", edit_index(lambda ix, d: ix["weight_map"].pop(next(iter(ix["weight_map"])))))
hf_case("index-extra-tensor", edit_index(lambda ix, d: ix["weight_map"].update({"extra.w": shards[0]})),
        must="extra.w")
hf_case("index-not-json", lambda d: write(os.path.join(d, "model.safetensors.index.json"), "{"))
hf_case("index-weight-map-list", edit_index(lambda ix, d: ix.update(weight_map=[])))
hf_case("index-total-size-wrong", edit_index(lambda ix, d: ix["metadata"].update(total_size=5)), "any")
hf_case("index-fifo", lambda d: (os.unlink(os.path.join(d, "model.safetensors.index.json")),
                                 os.mkfifo(os.path.join(d, "model.safetensors.index.json"))))
hf_case("shard-truncated", lambda d: write(os.path.join(d, shards[0]),
                                           open(os.path.join(d, shards[0]), "rb").read()[:-9]),
        must=shards[0])
hf_case("shard-zero-link", lambda d: (os.unlink(os.path.join(d, shards[0])),
                                      os.symlink("/dev/zero", os.path.join(d, shards[0]))), must=shards[0])
hf_case("config-missing", lambda d: os.unlink(os.path.join(d, "config.json")), "any", also_config=False)
# --init DIR is weights: the model is --config's (the package's); a
# config.json beside the weights that disagrees is not read (docs/models.md).
hf_case("config-other-model", lambda d: write(os.path.join(d, "config.json"), json.dumps(
    dict(json.load(open(os.path.join(HF, "config.json"))), n_embd=64))), "any", None,
        also_config=False)
case("model-dir", "--config and --init of a directory whose config.json disagrees with its shards",
     [MLC, "train", "gpt2", "--config", p("hfs", "config-other-model"), "--init",
      p("hfs", "config-other-model"), "--data", DATA, "--steps", "1", "--micro-batch", "2",
      "--seq-len", "8"], "refuse", "transformer")
hf_case("both-single-and-index", lambda d: shutil.copy(p("w.safetensors"),
                                                       os.path.join(d, "model.safetensors")))
for value in ["0", "-1", "-5MB", "1e400", "nan", "inf", "abc", "", "5XB", "99999999999999999999GB",
              "1", "1B", "1KB", "100TB", "1.5MB", "0.0001KB", "5 GB", "5gb"]:
    case("max-shard-size", f"--max-shard-size {value!r}",
         TRAIN + ["--save", p("saves", f"s{next(SERIAL)}") + "/", "--max-shard-size", value],
         "any" if value in ("1", "1B", "1KB", "100TB", "1.5MB", "5gb", "5 GB") else "refuse",
         "--max-shard-size")
write(p("saves", "isfile"), "x")
case("max-shard-size", "--save DIR/ over a file", TRAIN + ["--save", p("saves", "isfile") + "/"],
     "refuse", "isfile")
case("max-shard-size", "--save DIR/ into the --init DIR", TRAIN + ["--init", HF, "--save", HF + "/"],
     "refuse", HF)



# ======================================================= fresh variants
# The second probe (issue 30's acceptance): new cases of every kind above,
# none of them a case of the first. `--fresh` runs these alone.
FRESH[0] = True


def same(ref):
    REFS.append([str(a) for a in ref])
    return f"same:{len(REFS) - 1}"


GRAPH = ["--seq-len", "8", "--micro-batch", "1", "--emit=graph", "-o", "-"]

# --config files of other kinds.
F = p("fresh", "cfg")
os.makedirs(F)
os.symlink(os.path.join(F, "loop-b.json"), os.path.join(F, "loop-a.json"))
os.symlink(os.path.join(F, "loop-a.json"), os.path.join(F, "loop-b.json"))
os.symlink(os.path.join(F, "self.json"), os.path.join(F, "self.json"))
os.symlink(F, os.path.join(F, "link-to-dir.json"))
os.makedirs(os.path.join(F, "dir-fifo"))
os.mkfifo(os.path.join(F, "dir-fifo", "config.json"))
os.makedirs(os.path.join(F, "dir-loop"))
os.symlink(os.path.join(F, "dir-loop", "config.json"), os.path.join(F, "dir-loop", "config.json"))
G2 = {"model_type": "gpt2", "vocab_size": 64, "n_positions": 32, "n_embd": 32, "n_layer": 1,
      "n_head": 4}
g2 = json.dumps(G2)[:-1]
FILES = {
    "whitespace.json": (b" \n\t \n", "refuse"),
    "bom.json": (b"\xef\xbb\xbf" + json.dumps(G2).encode(), "any"),
    "latin1-value.json": (g2.encode() + b', "name_or_path": "caf\xe9"}', "any"),
    "latin1-key.json": (g2.encode() + b', "n_l\xe9yer": 2}', "any"),
    "bad-utf8-model-type.json": (b'{"model_type": "gpt\xff2"}', "refuse"),
    "lone-surrogate.json": ((g2 + ', "x": "\\ud800"}').encode(), "any"),
    "overlong-utf8.json": (g2.encode() + b', "x": "\xc0\xaf"}', "any"),
    "comment.json": (b"// a comment\n" + json.dumps(G2).encode(), "refuse"),
    "trailing-comma.json": ((g2 + ",}").encode(), "refuse"),
    "single-quotes.json": (b"{'model_type': 'gpt2'}", "refuse"),
    # LLVM's JSON reader takes 01, +1 and 1. as the numbers they spell.
    "leading-zero.json": ((g2 + ', "n_layer": 01}').encode(), "any"),
    "plus-number.json": ((g2 + ', "n_layer": +1}').encode(), "any"),
    "bare-minus.json": ((g2 + ', "n_layer": -}').encode(), "refuse"),
    "dot-number.json": ((g2 + ', "n_layer": 1.}').encode(), "any"),
    "exp-overflow.json": ((g2 + ', "n_layer": 1e999999999999}').encode(), "refuse"),  # n_layer
    "digits-100k.json": ((g2 + ', "n_layer": ' + "1" * 100000 + "}").encode(), "refuse"),
    "wide-10k-keys.json": ((g2 + "".join(f', "k{i}": {i}' for i in range(10000)) + "}").encode(),
                           "any"),
    "long-key.json": ((g2 + ', "' + "k" * (1 << 20) + '": 1}').encode(), "any"),
    "depth-64.json": ((g2 + ', "x": ' + "[" * 63 + "]" * 63 + "}").encode(), "any"),
    "nul-in-key.json": ((g2 + ', "n_layer\\u0000x": 2}').encode(), "any"),
    "nan-literal.json": ((g2 + ', "layer_norm_epsilon": nan}').encode(), "refuse"),
    "neg-zero-eps.json": ((g2 + ', "layer_norm_epsilon": -0.0}').encode(), "refuse"),
    "underflow-eps.json": ((g2 + ', "layer_norm_epsilon": 1e-400}').encode(), "refuse"),
    "denormal-eps.json": ((g2 + ', "layer_norm_epsilon": 1e-310}').encode(), "any"),
    "int-2p32-plus-1.json": ((g2 + ', "n_head": 4294967297}').encode(), "refuse"),
    "n-embd-2p32-plus-32.json": ((g2 + ', "n_embd": 4294967328}').encode(), "refuse"),
    "n-layer-2p64.json": ((g2 + ', "n_layer": 18446744073709551617}').encode(), "refuse"),
    "vocab-2p63.json": ((g2 + ', "vocab_size": 9223372036854775807}').encode(), "refuse"),
    "vocab-neg-2p63.json": ((g2 + ', "vocab_size": -9223372036854775808}').encode(), "refuse"),
    "float-int.json": ((g2 + ', "n_layer": 1.0}').encode(), "any"),
    "float-int-exp.json": ((g2 + ', "n_embd": 3.2e1}').encode(), "any"),
    "float-int-frac.json": ((g2 + ', "n_embd": 32.5}').encode(), "refuse"),
    "neg-zero-dropout.json": ((g2 + ', "resid_pdrop": -0.0}').encode(), "any"),
    "dropout-1.json": ((g2 + ', "resid_pdrop": 1}').encode(), "refuse"),
    "n-inner-neg.json": ((g2 + ', "n_inner": -4}').encode(), "refuse"),
    "init-range-huge.json": ((g2 + ', "initializer_range": 1e300}').encode(), "any"),
    "n-positions-below-seq.json": ((g2 + ', "n_positions": 4}').encode(), "refuse"),
    "heads-not-dividing.json": ((g2 + ', "n_head": 5}').encode(), "refuse"),
    "model-type-empty.json": (b'{"model_type": ""}', "refuse"),
    "model-type-null.json": (b'{"model_type": null}', "refuse"),
    "model-type-list.json": (b'{"model_type": ["gpt2"]}', "refuse"),
    "architectures-other.json": ((g2 + ', "architectures": ["BertForMaskedLM"]}').encode(), "any"),
    "escape-bad.json": ((g2 + ', "x": "\\q"}').encode(), "refuse"),
    "escape-short-u.json": ((g2 + ', "x": "\\u12"}').encode(), "refuse"),
    "control-char.json": ((g2 + ', "x": "a\x01b"}').encode(), "refuse"),
    "unterminated-string.json": ((g2 + ', "x": "abc').encode(), "refuse"),
    "only-bom.json": (b"\xef\xbb\xbf", "refuse"),
}
for name, (data, expect) in FILES.items():
    f = write(os.path.join(F, name), data)
    must = {"int-2p32-plus-1.json": "n_head", "n-embd-2p32-plus-32.json": "n_embd",
            "n-layer-2p64.json": "n_layer", "vocab-2p63.json": "vocab_size",
            "vocab-neg-2p63.json": "vocab_size", "dropout-1.json": "resid_pdrop",
            "n-inner-neg.json": "n_inner", "init-range-huge.json": "initializer_range",
            "n-positions-below-seq.json": "--seq-len", "heads-not-dividing.json": "n_head",
            "neg-zero-eps.json": "layer_norm_epsilon", "underflow-eps.json": "layer_norm_epsilon",
            "denormal-eps.json": "layer_norm_epsilon", "float-int-frac.json": "n_embd",
            "exp-overflow.json": "n_layer", "digits-100k.json": "n_layer"}.get(name, name)
    case("config-file", f"fresh {name}", [MLC, "compile", "gpt2", "--config", f] + GRAPH, expect,
         must)
for name in ["loop-a.json", "self.json", "link-to-dir.json", "dir-fifo", "dir-loop"]:
    case("config-file", f"fresh {name}",
         [MLC, "compile", "gpt2", "--config", os.path.join(F, name)] + GRAPH, "refuse",
         "config.json" if name.startswith("dir-") else name)
# Duplicate keys: Python's json (HF's reader) keeps the last value.
for name, text, last in [
        ("dup-n-embd", g2 + ', "n_embd": 64}', dict(G2, n_embd=64)),
        ("dup-model-type", '{"model_type": "bert", ' + g2[1:] + "}", G2),
        ("dup-eps", g2 + ', "layer_norm_epsilon": 1e-3, "layer_norm_epsilon": 1e-5}',
         dict(G2, layer_norm_epsilon=1e-5)),
        ("dup-nested", g2 + ', "n_layer": 2, "n_layer": 1}', G2)]:
    f = write(os.path.join(F, name + ".json"), text)
    ref = write(os.path.join(F, name + "-ref.json"), json.dumps(last))
    case("config-file", f"fresh {name}", [MLC, "compile", "gpt2", "--config", f] + GRAPH,
         same([MLC, "compile", "gpt2", "--config", ref] + GRAPH))

# The same keys on the command line.
for spec, expect, must in [
        ("tiny,n_head=4294967300", "refuse", "n_head"),
        ("tiny,n_embd=4294967424", "refuse", "n_embd"),
        ("tiny,n_layer=18446744073709551617", "refuse", "n_layer"),
        ("tiny,n_layer=-0", "any", None),
        ("tiny,layer_norm_epsilon=-0", "refuse", "layer_norm_epsilon"),
        ("tiny,layer_norm_epsilon=1e-400", "refuse", "layer_norm_epsilon"),
        ("tiny,layer_norm_epsilon=1e-310", "any", None),
        ("tiny,resid_pdrop=-0", "any", None),
        ("tiny,resid_pdrop=1", "refuse", "resid_pdrop"),
        ("tiny,n_embd=0x20", "refuse", "n_embd"),
        ("tiny,n_embd=1e2", "any", None),
        ("tiny,n_embd= 128", "any", None),
        ("tiny,n_embd=128 ", "any", None),
        ("tiny,n_layer=1,n_layer=2", "any", None),
        ("tiny,,n_layer=1", "any", None),
        ("tiny,=1", "refuse", "--config"),
        ("tiny,n_layer", "refuse", "n_layer"),
        ("tiny,n_layers=1", "refuse", "n_layers"),
        ("tiny,model_type=bert", "refuse", "model_type"),
        ("tiny,vocab_size=4294967552", "refuse", "vocab_size"),
        ("tiny,n_positions=99999999999999999999", "refuse", "n_positions"),
        ("tiny,initializer_range=nan", "refuse", "initializer_range"),
        ("tiny,initializer_range=-0.02", "refuse", "initializer_range"),
        ("tiny,n_inner=-1", "refuse", "n_inner"),
        ("tiny,tie_word_embeddings=2", "refuse", "tie_word_embeddings"),
        ("tiny,tie_word_embeddings=", "refuse", "tie_word_embeddings"),
        ("tiny,scale_attn_weights=nan", "refuse", "scale_attn_weights"),
        ("TINY", "refuse", "TINY"),
        ("tiny\u00e9", "refuse", "--config"),
        (" tiny", "any", None)]:
    case("config-flag", f"fresh --config {spec!r}", [MLC, "compile", "gpt2", "--config", spec] + GRAPH,
         expect, must)
for spec, expect, must in [("tiny,rms_norm_eps=-0", "refuse", "rms_norm_eps"),
                           ("tiny,rms_norm_eps=1e-400", "refuse", "rms_norm_eps"),
                           ("tiny,rope_theta=0", "refuse", "rope_theta"),
                           ("tiny,rope_theta=inf", "refuse", "rope_theta"),
                           ("tiny,rope_theta=-1e4", "refuse", "rope_theta"),
                           ("tiny,num_key_value_heads=3", "refuse", "num_key_value_heads"),
                           ("tiny,num_key_value_heads=0", "refuse", "num_key_value_heads"),
                           ("tiny,head_dim=7", "refuse", "head_dim"),
                           ("tiny,head_dim=4294967312", "refuse", "head_dim"),
                           ("tiny,num_attention_heads=4294967300", "refuse", "num_attention_heads"),
                           ("tiny,intermediate_size=0", "refuse", "intermediate_size")]:
    case("config-flag", f"fresh llama --config {spec!r}",
         [MLC, "compile", "llama", "--config", spec] + GRAPH, expect, must)
for spec, expect, must in [("tiny,layer_norm_eps=-0", "refuse", "layer_norm_eps"),
                           ("tiny,type_vocab_size=0", "refuse", "type_vocab_size"),
                           ("tiny,num_attention_heads=4294967300", "refuse", "num_attention_heads"),
                           ("tiny,max_position_embeddings=4", "refuse", "--seq-len")]:
    case("config-flag", f"fresh bert --config {spec!r}",
         [MLC, "compile", "bert", "--config", spec] + GRAPH, expect, must)

# Numeric training flags at other spellings and edges.
FRESH_VALUES = ["-0", "+1", " 1", "1 ", "1e-320", "0.0", "1,5", "NaN", "Infinity", "-nan", "1_0",
                "0b1", "1e", "4294967297", "-2147483649", "9223372036854775808", "1e308"]
INT_FLAGS = {"warmup", "eval-interval", "save-interval", "steps", "global-batch", "log-every",
             "eval-iters", "keep"}
for flag in ["lr", "min-lr", "warmup", "clip-grad", "weight-decay", "beta1", "beta2", "eps",
             "eval-interval", "save-interval", "global-batch", "steps", "log-every"]:
    for value in FRESH_VALUES:
        if flag == "steps" and value in ("4294967297", "9223372036854775808", "1e308"):
            continue
        extra = ["--save-dir", p("fresh", "sd", f"{flag}{next(SERIAL)}")] \
            if flag == "save-interval" else []
        case("train-flag", f"fresh --{flag} {value!r}", TRAIN + [f"--{flag}", value] + extra,
             "any", f"--{flag}")
for flag, value, expect in [("beta1", "1", "refuse"), ("beta2", "1", "refuse"),
                            ("beta2", "0.99999999999", "any"),
                            ("beta1", "0.999999999999", "any"),
                            ("beta2", "0.9999999", "any"), ("eps", "1e-38", "any"),
                            ("eps", "1e-45", "refuse"), ("eps", "3.5e38", "refuse"),
                            ("lr", "3.5e38", "refuse"), ("lr", "1e-46", "any"),
                            ("weight-decay", "3.5e38", "refuse"), ("clip-grad", "3.5e38", "any"),
                            ("clip-grad", "1e-46", "any"), ("min-lr", "1e-46", "any"),
                            ("warmup", "5", "any"), ("steps", "2", "any")]:
    case("train-flag", f"fresh --{flag} {value} (an f32 edge)",
         TRAIN[:5] + ["--steps", "2", "--progress", "plain", f"--{flag}", value], expect,
         # the update guard names the rate that overflows it
         "learning rate" if flag == "lr" else f"--{flag}")
case("train-flag", "fresh --warmup above --steps with cosine",
     TRAIN + ["--warmup", "100", "--lr-schedule", "cosine"], "any")
case("train-flag", "fresh --lr-decay-iters 0", TRAIN + ["--lr-decay-iters", "0"], "any")
case("train-flag", "fresh --eval-interval 1 --eval-iters 0",
     TRAIN + ["--eval-interval", "1", "--eval-iters", "0"], "refuse", "--eval-iters")
case("train-flag", "fresh --lr twice", TRAIN + ["--lr", "1e-3", "--lr", "2e-3"], "any")
case("train-flag", "fresh --steps=", TRAIN[:5] + ["--steps="], "refuse", "--steps")
for flag in ("micro-batch", "seq-len"):
    for value in ["-0", "+2", "0x2", "2.0", "1e0", "4294967298", "NaN"]:
        case("compile-flag", f"fresh --{flag} {value!r}",
             [MLC, "compile", "gpt2", "--config", TINY, f"--{flag}", value, "--emit=plan", "-o",
              os.devnull], "any", f"--{flag}")
for value in ["-0", "4294967297", "1e0", "0x1"]:
    case("compile-flag", f"fresh --ranks {value!r}", COMPILE + ["--ranks", value], "any", "--ranks")
    case("compile-flag", f"fresh --tensor-parallel {value!r}",
         COMPILE + ["--tensor-parallel", value], "any", "--tensor-parallel")
for value in ["h100,bw=-0", "h100,f32=1e9", "h100,f32=1000000001",
              "h100,bw=1,bw=2", "h100,bf16=1e-320", "h100,peak-f32=nan", "h100,peak-f32=-1",
              "h100,peak-f32=inf",
              "h100,peak-bf16=0", "h100,f32gemm=0", "h100,launch=-1", "h100,launch=nan",
              "h100,nvlink=0", "h100,ib=0", "h100,node=0", "h100,node=1.5", "h100,node=1e9",
              "h100,node=-1", "h100,launch=0", "h100,,bw=1", "h200,bw=0x10", "H200", " h200",
              "bw=1,bf16=1", "bw=1", "f32=1,bf16=1,bw=1,peak-f32=0"]:
    ok = value in ("h100,f32=1e9", "h100,bw=1,bw=2", "h100,node=1e9", "h100,launch=0", "H200",
                   " h200", "h100,bf16=1e-320", "h100,,bw=1")
    case("compile-flag", f"fresh --roofline {value!r}", COMPILE[:-3] + ["--report", "--roofline",
                                                                        value, "--cuda-arch",
                                                                        "none"],
         "any" if ok else "refuse", "--roofline")

# Other compile flags given with a package.
for extra, same_value in [(["--recompute", "selective"], False), (["--recompute", "auto"], False),
                          (["--recompute-granularity", "full"], False),
                          (["--first-bucket-mb", "1"], True), (["--first-bucket-mb", "2"], False),
                          (["--varlen"], False), (["--varlen=false"], True),
                          (["--reset-position-ids"], False), (["--reset-position-ids=false"], True),
                          (["--use-distributed-optimizer"], False),
                          (["--tensor-parallel", "2"], False), (["--tensor-parallel", "1"], True),
                          (["--tensor-model-parallel-size", "2"], False),
                          (["--sequence-parallel"], False), (["--dtype", "bf16"], False),
                          (["--fuse=false"], False), (["--no-fuse=false"], True),
                          (["--config", "tiny,n_layer=1,n_embd=64"], False),
                          (["--config", "tiny,n_layer=1,layer_norm_epsilon=1e-6"], False),
                          (["--config", "tiny,n_layer=1,resid_pdrop=0"], False),
                          (["--config", "tiny,n_layer=1,resid_pdrop=0.1"], True),
                          (["--config", os.path.join(PKG, "hf_config.json")], True),
                          (["--micro-batch", "02"], True), (["--seq-len", "8.0"], False),
                          (["--bucket-cap-mb", "25.0"], True), (["--ranks", "01"], True),
                          (["--dim", "seq=8"], False), (["--labels", "labels"], False),
                          (["--loss", "auto"], False)]:
    name = "fresh " + " ".join(extra)
    named = {"--recompute-granularity": "--recompute",  # the aliases' messages name the flag
             "--tensor-model-parallel-size": "--tensor-parallel"}.get(extra[0], extra[0])
    case("package-flag", name, TRAIN + extra, "any" if same_value else "refuse",
         named.split("=")[0])
    if extra[0] in ("--varlen", "--reset-position-ids", "--dtype", "--config", "--fuse=false"):
        case("package-flag", "fresh generate " + " ".join(extra),
             [MLC, "generate", PKG, "--init", p("w.safetensors"), "--prompt", "ab",
              "--max-tokens", "2"] + extra, "any" if same_value else "refuse",
             extra[0].split("=")[0])
case("package-flag", "fresh --package-dir with a package",
     TRAIN + ["--package-dir", p("fresh", "pkgdir")], "refuse", "--package-dir")

# Plans edited past the GEMM sizes, the manifest's hash recomputed.
FP = 0


def plan_case(name, new_plan, expect="refuse", must="plan.txt"):
    out = pkg_variant("fresh-" + name, files={"plan.txt": new_plan})
    case("package", f"fresh plan {name}", [MLC, "train", out, "--data", DATA, "--steps", "1"],
         expect, must)


def sub(pattern, repl, count=1):
    new, n = re.subn(pattern, repl, plan, count=count, flags=re.M)
    assert n, pattern
    return new


plan_case("kernel-extra-arg", sub(r"^(kernel k3 .*)$", r"\1 %0"))
plan_case("kernel-no-args", sub(r"^kernel k3 .*$", "kernel k3"))
plan_case("kernel-unknown", sub(r"^kernel k3 ", "kernel k99999 "), must="k99999")
plan_case("kernel-name-not-k", sub(r"^kernel k3 ", "kernel main "), must="'main'")
plan_case("kernel-undefined-buffer", sub(r"^(kernel k3 %[0-9]+ )%[0-9]+", r"\1%99999"))
plan_case("kernel-buffer-not-percent", sub(r"^(kernel k3 %[0-9]+ )%([0-9]+)", r"\1\2"))
plan_case("kernel-negative-buffer", sub(r"^(kernel k3 %[0-9]+ )%[0-9]+", r"\1%-1"))
plan_case("buf-offset-negative", sub(r"^(buf %[0-9]+ arena )8192 ", r"\g<1>-8192 "))
plan_case("buf-offset-huge", sub(r"^(buf %[0-9]+ arena )8192 ", r"\g<1>9223372036854775800 "))
plan_case("buf-offset-overflow", sub(r"^(buf %[0-9]+ arena )8192 ", r"\g<1>18446744073709551616 "))
plan_case("buf-offset-unaligned", sub(r"^(buf %[0-9]+ arena )8192 ", r"\g<1>8193 "))
plan_case("buf-count-negative", sub(r"^(buf %[0-9]+ arena 8192 f32 )[0-9]+", r"\g<1>-1024"))
plan_case("buf-count-zero", sub(r"^(buf %[0-9]+ arena 8192 f32 )[0-9]+", r"\g<1>0"), "any")
plan_case("buf-count-huge", sub(r"^(buf %[0-9]+ arena 8192 f32 )[0-9]+", r"\g<1>4611686018427387904"))
# A buffer of another element type inside the arena: the kernels read what
# they read (the plan is the user's program once re-signed, as a GEMM's
# smaller sizes are); only memory past a buffer must be refused.
plan_case("buf-type-i64", sub(r"^(buf %[0-9]+ arena 8192 )f32", r"\1i64"), "any")
plan_case("buf-type-unknown", sub(r"^(buf %[0-9]+ arena 8192 )f32", r"\1f8"))
plan_case("buf-duplicate-id", sub(r"^buf %19 ", "buf %18 "))
plan_case("buf-id-gap", sub(r"^buf %19 ", "buf %1900 "))
plan_case("buf-alias-self", sub(r"^buf %36 alias %32 ", "buf %36 alias %36 "))
plan_case("buf-alias-later", sub(r"^buf %36 alias %32 ", "buf %36 alias %37 "))
plan_case("buf-alias-negative", sub(r"^(buf %[0-9]+ alias %[0-9]+ )0 ", r"\g<1>-4 "))
plan_case("buf-alias-past", sub(r"^(buf %36 alias %32 0 f32 )4096", r"\g<1>4097"))
plan_case("buf-input-unknown", sub(r"^buf %16 input input_ids", "buf %16 input nothing"))
plan_case("buf-kind-unknown", sub(r"^buf %19 arena", "buf %19 heap"))
plan_case("func-arena-zero", sub(r"^func forward [0-9]+", "func forward 0"))
plan_case("func-arena-negative", sub(r"^func forward [0-9]+", "func forward -81920"))
plan_case("func-arena-huge", sub(r"^func forward [0-9]+", "func forward 9223372036854775807"),
          must="needs")
plan_case("func-unknown", sub(r"^func forward ", "func backward_pass "))
plan_case("func-duplicate", plan.replace("\nfunc evaluate", "\n" + plan[plan.index("func forward"):
                                         plan.index("end\n") + 4] + "func evaluate", 1))
plan_case("output-shape-mismatch", sub(r"^output logits (%[0-9]+) 2x8x256", r"output logits \1 2x8x999"))
plan_case("output-shape-negative", sub(r"^output logits (%[0-9]+) 2x8x256", r"output logits \1 -2x8x256"))
plan_case("output-loss-int", sub(r"^output loss %35 scalar", "output loss %33 scalar"), "any")
plan_case("input-shape-bigger", sub(r"^input input_ids i64 2x8", "input input_ids i64 2x9"))
plan_case("input-shape-zero", sub(r"^input input_ids i64 2x8", "input input_ids i64 2x0"))
plan_case("input-type-f32", sub(r"^input input_ids i64", "input input_ids f32"))
plan_case("scalars-fewer", sub(r"^scalars adamw f64 9", "scalars adamw f64 3"), must="adamw")
plan_case("scalars-huge", sub(r"^scalars adamw f64 9", "scalars adamw f64 4611686018427387904"))
plan_case("scalars-negative", sub(r"^scalars adamw f64 9", "scalars adamw f64 -9"))
plan_case("param-init-nan", sub(r"^(param \S+ f32 \S+ 1) normal:[0-9.]+", r"\1 normal:nan"))
plan_case("param-init-inf", sub(r"^(param \S+ f32 \S+ 1) normal:[0-9.]+", r"\1 normal:inf"))
plan_case("param-init-negative", sub(r"^(param \S+ f32 \S+ 1) normal:[0-9.]+", r"\1 normal:-1"))
plan_case("param-shape-negative", sub(r"^(param \S+ f32 )128x384", r"\g<1>128x-384"))
plan_case("param-duplicate", sub(r"^param transformer.ln_f.bias ", "param transformer.ln_f.weight "))
plan_case("param-decay-2", sub(r"^(param \S+ f32 \S+ )1 ", r"\g<1>2 "))
plan_case("version-4", sub(r"^mlc-plan 5", "mlc-plan 4"), "refuse", "plan")
plan_case("version-huge", sub(r"^mlc-plan 5", "mlc-plan 99999999999999999999"), "refuse", "plan")
plan_case("gemm-trans-2", sub(r"^gemm 0 0 16 384 128 0 ", "gemm 2 0 16 384 128 0 "))
plan_case("gemm-batch-negative", sub(r"^gemm 0 0 16 384 128 0 ", "gemm 0 0 16 384 128 -1 "))
plan_case("gemm-unknown-epilogue", sub(r"^(gemm 0 0 16 384 128 0 )bias ", r"\1frobnicate "))
plan_case("gemm-missing-operand", sub(r"^(gemm 0 0 16 384 128 0 bias %[0-9]+ %[0-9]+ %[0-9]+) %[0-9]+",
                                      r"\1"))
plan_case("gemm-extra-operand", sub(r"^(gemm 0 0 16 384 128 0 bias .*)$", r"\1 %0"))
plan_case("gemm-output-is-param", sub(r"^(gemm 0 0 16 384 128 0 bias )%[0-9]+", r"\1%4"), "any")
plan_case("gemm-i64-operand", sub(r"^(gemm 0 0 16 384 128 0 bias %[0-9]+ )%[0-9]+", r"\1%18"))
plan_case("gemm-overflow-m", sub(r"^gemm 0 0 16 384 128 0 ", "gemm 0 0 4611686018427387904 384 128 0 "))
plan_case("gemm-m-times-n-wraps", sub(r"^gemm 0 0 16 384 128 0 ",
                                      "gemm 0 0 4294967296 4294967296 128 0 "))
plan_case("line-unknown", sub(r"^end$", "frobnicate 1 2\nend"))
plan_case("line-huge", sub(r"^end$", "buf " + "9" * (8 << 20) + "\nend"))
plan_case("end-twice", sub(r"^end$", "end\nend"))
plan_case("crlf", plan.replace("\n", "\r\n"), "any")
plan_case("nul-byte", sub(r"^end$", "end\0"))
kcpp = open(os.path.join(PKG, "kernels.cpp")).read()
for name, new in [("kernel-args-count", re.sub(r'k3_args = [0-9]+', "k3_args = 2", kcpp)),
                  ("kernel-args-negative", re.sub(r'k3_args = [0-9]+', "k3_args = -1", kcpp)),
                  ("kernel-args-missing", re.sub(r'extern "C" const int64_t k3_args = [0-9]+;', "",
                                                 kcpp))]:
    out = pkg_variant("fresh-" + name, files={"kernels.cpp": new})
    case("package", f"fresh kernels.cpp {name}", [MLC, "train", out, "--data", DATA, "--steps", "1"],
         "refuse", "k3")
pkg_case("fresh manifest files hash uppercase", edit_manifest=lambda m: m["files"].update(
    {"plan.txt": m["files"]["plan.txt"].upper()}), expect="any")
pkg_case("fresh manifest not an object", files={"manifest.json": "[]"}, resign=False,
         must="manifest.json")
pkg_case("fresh manifest deep", files={"manifest.json": "[" * 100000 + "]" * 100000}, resign=False,
         must="manifest.json")
pkg_case("fresh manifest micro_batch 2^32+2", edit_manifest=lambda m: m.update(micro_batch=4294967298))
pkg_case("fresh manifest seq_len 8.0", edit_manifest=lambda m: m.update(seq_len=8.0), expect="any")
pkg_case("fresh manifest model bert", edit_manifest=lambda m: m.update(model="bert"))
pkg_case("fresh manifest model unknown", edit_manifest=lambda m: m.update(model="mamba"))

# Datasets: other corruptions of .idx and .bin.
big_n = n_seq


def dsf(name, idx_bytes, bin_bytes, expect="refuse", must=None):
    prefix = p("ds", "fresh-" + name)
    write(prefix + ".idx", idx_bytes)
    write(prefix + ".bin", bin_bytes)
    case("dataset", "fresh " + name, TRAIN[:3] + ["--data", prefix] + TRAIN[5:], expect,
         must or prefix)


isz = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 4, 7: 8, 8: 2}[dtype_code]
sizes = list(struct.unpack(f"<{n_seq}i", idx[sizes_at:ptr_at]))
ptrs = list(struct.unpack(f"<{n_seq}q", idx[ptr_at:doc_at]))
docs = list(struct.unpack(f"<{n_doc}q", idx[doc_at:doc_at + 8 * n_doc]))


def idx_with(sizes_=None, ptrs_=None, docs_=None, n_seq_=None, n_doc_=None):
    s_, q_, d_ = sizes_ or sizes, ptrs_ or ptrs, docs_ or docs
    head = idx[:18] + struct.pack("<QQ", len(s_) if n_seq_ is None else n_seq_,
                                  len(d_) if n_doc_ is None else n_doc_)
    return head + struct.pack(f"<{len(s_)}i", *s_) + struct.pack(f"<{len(q_)}q", *q_) + \
        struct.pack(f"<{len(d_)}q", *d_)


dsf("idx-is-dir", b"", binb)
os.unlink(p("ds", "fresh-idx-is-dir.idx"))
os.makedirs(p("ds", "fresh-idx-is-dir.idx"))
dsf("bin-loop", idx, binb)
os.unlink(p("ds", "fresh-bin-loop.bin"))
os.symlink(p("ds", "fresh-bin-loop.bin"), p("ds", "fresh-bin-loop.bin"))
dsf("idx-header-only", idx[:34], binb)
dsf("bin-short-by-one-token", idx, binb[:-isz])
dsf("bin-half", idx, binb[:len(binb) // 2])
dsf("ptr-nonmonotonic", idx_with(ptrs_=[ptrs[0], ptrs[2], ptrs[1]] + ptrs[3:]), binb, "any")
dsf("ptr-overlapping", idx_with(ptrs_=[ptrs[0]] + [ptrs[0]] * (n_seq - 1)), binb, "any")
dsf("ptr-size-past-end", idx_with(ptrs_=ptrs[:-1] + [len(binb) - isz]), binb)
dsf("sizes-zero", idx_with(sizes_=[0] * n_seq), binb)
dsf("size-one-past-end", idx_with(sizes_=sizes[:-1] + [sizes[-1] + 1]), binb)
dsf("doc-first-not-zero", idx_with(docs_=[1] + docs[1:]), binb)
dsf("doc-last-short", idx_with(docs_=docs[:-1] + [docs[-1] - 1]), binb)
dsf("doc-last-past", idx_with(docs_=docs[:-1] + [docs[-1] + 1]), binb)
dsf("doc-negative", idx_with(docs_=[0, -1] + docs[2:]), binb)
dsf("doc-nonmonotonic", idx_with(docs_=[0, 3, 2] + docs[3:]), binb)
dsf("doc-count-zero", idx_with(docs_=[], n_doc_=0), binb)
dsf("doc-count-one", idx_with(docs_=[0]), binb)
dsf("nseq-says-more", idx_with(n_seq_=n_seq + 3), binb)
dsf("nseq-says-fewer", idx_with(n_seq_=n_seq - 3), binb)
dsf("ndoc-says-more", idx_with(n_doc_=n_doc + 3), binb)
for code in (1, 3, 4, 5):  # another integer type over the same bytes
    if code != dtype_code:  # int16 holds the byte vocabulary's ids as uint16 does
        dsf(f"dtype-{code}-same-bytes", idx[:17] + bytes([code]) + idx[18:], binb,
            "any" if {code, dtype_code} == {3, 8} else "refuse")
dsf("dtype-float32", idx[:17] + bytes([6]) + idx[18:], binb)
dsf("dtype-float64", idx[:17] + bytes([7]) + idx[18:], binb)
dsf("version-0", patch(idx, 9, "<Q", 0), binb)
dsf("magic-case", idx[:1].lower() + idx[1:] if idx[:1].isupper() else b"m" + idx[1:], binb)
dsf("all-ids-255-bytes", idx, bytes([255]) * len(binb), "any")
for blend, expect in [("1e-320 " + GOOD, "any"), ("1 " + GOOD + " 1e308 " + GOOD, "any"),
                      ("1e308 " + GOOD + " 1e308 " + GOOD, "any"), ("0x1 " + GOOD, "any"),
                      ("-0 " + GOOD, "refuse"), ("1 " + GOOD + " 0 " + GOOD + " 0 " + GOOD, "any"),
                      (GOOD + " ", "any"), (" 1 " + GOOD, "any")]:
    case("dataset", f"fresh blend {blend.replace(W, '')!r}",
         TRAIN[:3] + ["--data", blend] + TRAIN[5:], expect, "--data")
for name, data, expect in [("lonely-eod", b"\0" * 9, "any"), ("nul-text", b"\0" * 4096, "any"),
                           ("10-bytes", b"0123456789", "any")]:
    f = write(p("ds", "fresh-" + name + ".txt"), data)
    case("dataset", f"fresh plain {name}", TRAIN[:3] + ["--data", f] + TRAIN[5:], expect, f)
for spec in ["1,0,0", "0,1,0", "0,0,1", "1e-320,1,0", "99,1,0", "1,1e308,0", "1,1,1,"]:
    case("dataset", f"fresh --split {spec!r} --eval-interval 1",
         TRAIN + ["--split", spec, "--eval-interval", "1"],
         "any" if spec in ("99,1,0", "1,1e308,0") else "refuse", "--split")

# Tokenizer inputs.
TOKD = p("fresh", "tok")
os.makedirs(TOKD)
TCORPUS = {
    "empty.jsonl": b"",
    "blank-lines.jsonl": b"\n\n\n",
    "null-text.jsonl": b'{"text": null}\n',
    "number-text.jsonl": b'{"text": 5}\n',
    "bad-utf8.jsonl": b'{"text": "caf\xe9 \xff\xfe"}\n' * 20,
    "lone-surrogate.jsonl": b'{"text": "a\\ud800b"}\n' * 20,
    "one-char.jsonl": b'{"text": "a"}\n',
    "huge-line.jsonl": b'{"text": "' + b"ab " * (4 << 20) + b'"}\n',
    "nul-text.jsonl": b'{"text": "\\u0000\\u0000\\u0000"}\n' * 20,
    "no-newline.jsonl": b'{"text": "hello world"}',
    "crlf.jsonl": b'{"text": "hello world"}\r\n' * 20,
    "array-line.jsonl": b'[1, 2]\n{"text": "ok"}\n',
}
for name, data in TCORPUS.items():
    f = write(os.path.join(TOKD, name), data)
    nodocs = name in ("empty.jsonl", "blank-lines.jsonl", "null-text.jsonl", "number-text.jsonl")
    case("tokenizer-flag", f"fresh tokenizer train {name}",
         [MLC, "tokenizer", "train", "--input", f, "--output-dir", os.path.join(TOKD, "o-" + name),
          "--vocab-size", "300"], "refuse" if nodocs else "any", name)
    case("preprocess-flag", f"fresh preprocess {name}",
         [MLC, "preprocess", "--input", f, "--output-prefix", os.path.join(TOKD, "pp-" + name),
          "--tokenizer-type", "ByteTokenizer"], "refuse" if nodocs else "any", name)
# (A FIFO is a corpus streamed in, test/robustness/data.py: it is read until
# its writer closes it.)
os.symlink("/dev/zero", os.path.join(TOKD, "zero.jsonl"))
os.symlink("/dev/urandom", os.path.join(TOKD, "urandom.jsonl"))
for name in ("zero.jsonl", "urandom.jsonl"):
    case("tokenizer-flag", f"fresh tokenizer train {name}",
         [MLC, "tokenizer", "train", "--input", os.path.join(TOKD, name), "--output-dir",
          os.path.join(TOKD, "o-" + name), "--vocab-size", "300"], "refuse", name)
    case("preprocess-flag", f"fresh preprocess {name}",
         [MLC, "preprocess", "--input", os.path.join(TOKD, name), "--output-prefix",
          os.path.join(TOKD, "pp-" + name)], "refuse", name)
write(os.path.join(TOKD, "a-file"), "x")
case("tokenizer-flag", "fresh tokenizer train --output-dir over a file",
     [MLC, "tokenizer", "train", "--input", p("corpus.jsonl"), "--output-dir",
      os.path.join(TOKD, "a-file"), "--vocab-size", "300"], "refuse", "a-file")
case("tokenizer-flag", "fresh tokenizer train --json-keys missing",
     [MLC, "tokenizer", "train", "--input", p("corpus.jsonl"), "--output-dir",
      os.path.join(TOKD, "o-keys"), "--vocab-size", "300", "--json-keys", "body"], "refuse", "body")
case("tokenizer-flag", "fresh tokenizer nosuch", [MLC, "tokenizer", "nosuch"], "refuse", "usage")
case("tokenizer-flag", "fresh tokenizer (no verb)", [MLC, "tokenizer"], "refuse", "train")
# HF's added vocabulary skips a token of empty content.
tok_case("fresh-added-empty", tedit(lambda t: t.setdefault("added_tokens", []).append(
    {"id": 50300, "content": "", "special": True, "single_word": False, "lstrip": False,
     "rstrip": False, "normalized": False})), "any")
tok_case("fresh-added-space", tedit(lambda t: t.setdefault("added_tokens", []).append(
    {"id": 50300, "content": " ", "special": False, "single_word": False, "lstrip": False,
     "rstrip": False, "normalized": False})), "any")
tok_case("fresh-merges-pairs", tedit(lambda t: t["model"].update(
    merges=[m.split(" ") for m in t["model"]["merges"]])), "any")
tok_case("fresh-merges-triple", tedit(lambda t: t["model"].update(
    merges=[["a", "b", "c"]] + t["model"]["merges"])))
tok_case("fresh-vocab-empty", {"version": "1.0", "model": {"type": "BPE", "vocab": {},
                                                         "merges": []}}, must="model.vocab",
         fits=True)
tok_case("fresh-vocab-not-object", tedit(lambda t: t["model"].update(vocab=[1, 2])))
tok_case("fresh-vocab-key-empty", tedit(lambda t: t["model"]["vocab"].update({"": 50300})), "any")
tok_case("fresh-normalizer-deep", tedit(lambda t: t.update(normalizer=json.loads(
    '{"type": "Sequence", "normalizers": [' * 60 + '{"type": "NFC"}' + "]}" * 60))), "any")
tok_case("fresh-pretok-split-bad-regex", tedit(lambda t: t.update(pre_tokenizer={
    "type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": False})),
    must="unclosed")
tok_case("fresh-pretok-split-catastrophic", tedit(lambda t: t.update(pre_tokenizer={
    "type": "Split", "pattern": {"Regex": "(a*)*$"}, "behavior": "Isolated", "invert": False})),
    "any")
tok_case("fresh-pretok-split-empty-match", tedit(lambda t: t.update(pre_tokenizer={
    "type": "Split", "pattern": {"Regex": ""}, "behavior": "Isolated", "invert": False})), "any")
tok_case("fresh-decoder-unknown", tedit(lambda t: t.update(decoder={"type": "Frobnicate"})),
         must="Frobnicate")
tok_case("fresh-wordpiece-empty", {"version": "1.0", "model": {"type": "WordPiece", "vocab": {},
                                                               "unk_token": "[UNK]"}},
         fits=True)
tok_case("fresh-unigram-nan", {"version": "1.0", "model": {"type": "Unigram", "unk_id": 0,
                                                           "vocab": [["<unk>", 0.0],
                                                                     ["a", float("nan")]]}},
         must="model.vocab[1]", fits=True)
tok_case("fresh-unigram-unk-past", {"version": "1.0", "model": {"type": "Unigram", "unk_id": 7,
                                                                "vocab": [["<unk>", 0.0],
                                                                          ["a", -1.0]]}},
         fits=True)
tok_case("fresh-bom", b"\xef\xbb\xbf" + json.dumps(tok).encode(), "any")
# An unknown top-level key (here not UTF-8) is not read.
tok_case("fresh-bad-utf8-key", json.dumps(tok).encode().replace(b'"model"', b'"\xff": 1, "model"', 1),
         "any")


# Checkpoints: other edits, the hashes recomputed.
def st_retype(fname, prefix, dtype, scale):
    """The first tensor named prefix* re-encoded as dtype (its bytes right)."""
    def edit(h, body):
        k = next(k for k in h if k.startswith(prefix))
        a, b = h[k]["data_offsets"]
        x = np.frombuffer(bytes(body[a:b]), np.float32)
        new = x.astype(dtype).tobytes() if dtype != "bf16" else \
            (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        # Moved to the end so the others keep their offsets.
        body[a:b] = b"\0" * (b - a)
        h[k] = dict(h[k], dtype={np.float64: "F64", np.float16: "F16", "bf16": "BF16"}[dtype],
                    data_offsets=[len(body), len(body) + len(new)])
        body.extend(new)
    return st_edit(fname, edit)


ck_case("fresh exp-avg-sq -1e-45", {"optimizer.safetensors": st_edit(
    "optimizer.safetensors", poison("exp_avg_sq.", -1e-45))})
ck_case("fresh exp-avg-sq -0.0", {"optimizer.safetensors": st_edit(
    "optimizer.safetensors", poison("exp_avg_sq.", -0.0))}, "any")
ck_case("fresh exp-avg 3e38", {"optimizer.safetensors": st_edit(
    "optimizer.safetensors", poison("exp_avg.", 3e38))}, "any")
ck_case("fresh weights 3e38", {"model.safetensors": st_edit(
    "model.safetensors", poison("transformer", 3e38))}, "any")
ck_case("fresh optimizer F64", {"optimizer.safetensors": st_retype(
    "optimizer.safetensors", "exp_avg.", np.float64, 1)}, "any")
ck_case("fresh model BF16", {"model.safetensors": st_retype(
    "model.safetensors", "transformer", "bf16", 1)}, "any")
ck_case("fresh optimizer extra tensor", {"optimizer.safetensors": st_edit(
    "optimizer.safetensors", lambda h, b: h.update(
        {"exp_avg.extra": dict(h[next(k for k in h if k.startswith("exp_avg."))])}))},
    must="optimizer.safetensors")
for key, value in [("step", 2.0), ("steps", -1), ("steps", 1 << 62), ("package", None),
                   ("run", [])]:
    s2 = json.loads(json.dumps(state))
    s2[key] = value
    ck_case(f"fresh state-{key}-{value}", {"state.json": json.dumps(s2).encode()},
            "any" if (key, value) == ("step", 2.0) else "refuse")
for key, value in [("lr", "nan"), ("lr", "-1"), ("beta2", "1"), ("seed", "abc"),
                   ("global-batch", "0"), ("eps", "1e-300")]:
    s2 = json.loads(json.dumps(state))
    s2["run"][key] = value
    ck_case(f"fresh state run.{key}={value}", {"state.json": json.dumps(s2).encode()})
ck_case("fresh state deep", {"state.json": ("[" * 100000 + "]" * 100000).encode()})
ck_case("fresh checkpoint.json version 2", {"checkpoint.json": ckfiles["checkpoint.json"].replace(
    b'"version": 1', b'"version": 2')}, must="version")
ck_case("fresh checkpoint.json files missing state", {"checkpoint.json": json.dumps(dict(
    json.loads(ckfiles["checkpoint.json"]), files={k: v for k, v in json.loads(
        ckfiles["checkpoint.json"])["files"].items() if k != "state.json"})).encode()})
ck_case("fresh checkpoint.json step 2.5", {"checkpoint.json": ckfiles["checkpoint.json"].replace(
    b'"step": 2', b'"step": 2.5')})

# Environment variables.
ENVCASES = [("OMP_NUM_THREADS=-1", "any"), ("OMP_NUM_THREADS=", "any"),
            ("OMP_NUM_THREADS=2,abc", "any"), ("OMP_NUM_THREADS=1,100000", "any"),
            ("OMP_NUM_THREADS=100000,1", "any"), ("OMP_NUM_THREADS= 4", "any"),
            ("OMP_NUM_THREADS=1e3", "any"), ("OMP_NUM_THREADS=99999999999999999999", "any"),
            ("OMP_NUM_THREADS=-100000", "any"), ("OMP_NUM_THREADS=0x10", "any"),
            ("OMP_THREAD_LIMIT=0", "any"), ("OMP_THREAD_LIMIT=100000", "any"),
            ("OMP_DYNAMIC=maybe", "any"), ("OMP_PROC_BIND=sideways", "any"),
            ("OMP_PLACES=nowhere", "any"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE=0", "any"), ("OMPI_COMM_WORLD_LOCAL_SIZE=-1", "any"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE=abc", "any"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE=100000", "any"),
            ("MLC_BLAS=bogus", "any"), ("MLC_PROFILE=", "any"), ("MLC_PROFILE=all", "any"),
            ("MLC_PROFILE=garbage", "any"), ("MLC_NO_PROGRESS=abc", "any"),
            ("MLC_DEBUG_GATHER=1", "any"), ("MLC_CUDA_GRAPH=banana", "any"),
            ("MLC_CUBLASLT_EPILOGUE=-1", "any"), ("MLC_NCCL=nope", "any"),
            ("MLC_TEST_KILL_IN_CHECKPOINT=", "any"),
            ("MLC_THREADS_CONFIGURED=1 OMP_NUM_THREADS=100000", "any"),
            ("MLC_THREADS_CONFIGURED=0 OMP_NUM_THREADS=100000", "any"),
            ("MLC_THREADS_CONFIGURED= OMP_NUM_THREADS=100000", "any"),
            ("HOME= MLC_CACHE_DIR=", "any")]
for spec, expect in ENVCASES:
    case("env", f"fresh {spec}", ["env"] + spec.split(" ") + TRAIN, expect, spec.split("=")[0])
write(p("fresh", "cache-is-file"), "x")
os.makedirs(p("fresh", "ro-cache"))
os.chmod(p("fresh", "ro-cache"), 0o500)
for spec, must in [(f"MLC_CACHE_DIR={p('fresh', 'cache-is-file')}", "cache-is-file"),
                   ("MLC_CACHE_DIR=/dev/null", "/dev/null"),
                   (f"MLC_CACHE_DIR={p('fresh', 'cache-is-file')}/sub", "cache-is-file"),
                   ("MLC_CACHE_DIR=/proc/self", "/proc/self"),
                   ("CXX=false", "host compiler (false)"),
                   ("CXX=/nonexistent/c++", "/nonexistent/c++"),
                   ("CXX=c++ -DNOTHING=1 -O", "any"), ("CXX=c++ -o /dev/null", "any")]:
    # A fresh cache for the host-compiler cases, so that the compiler runs.
    env = spec.split("=", 1)
    argv = ["env", spec] + ([f"MLC_CACHE_DIR={p('fresh', 'cxx-cache-' + str(next(SERIAL)))}"]
                            if spec.startswith("CXX") else []) + TRAIN
    case("env", f"fresh {spec}", argv, "any" if must == "any" else "refuse",
         None if must == "any" else must)
case("env", "fresh read-only MLC_CACHE_DIR", ["env", f"MLC_CACHE_DIR={p('fresh', 'ro-cache')}"] +
     TRAIN, "any" if os.geteuid() == 0 else "refuse", "ro-cache")

# mlc run inputs of other kinds.
for name, arr, expect in [("labels-all-ignored", np.full((2, 8), -100, np.int64), "any"),
                          ("labels-minus-2", np.full((2, 8), -2, np.int64), "refuse"),
                          ("ids-i16", np.zeros((2, 8), np.int16), "any"),
                          ("ids-u64-huge", np.full((2, 8), 2 ** 63, np.uint64), "refuse"),
                          ("ids-bool", np.zeros((2, 8), bool), "refuse"),
                          ("ids-fortran", np.asfortranarray(np.zeros((2, 8), np.int64)), "any"),
                          ("ids-big-endian", np.zeros((2, 8), ">i8"), "any"),
                          ("ids-object", np.array([[None] * 8] * 2, dtype=object), "refuse")]:
    f = p("fresh", name + ".npy")
    np.save(f, arr, allow_pickle=True)
    target = "labels" if name.startswith("labels") else "input_ids"
    other = "input_ids" if target == "labels" else "labels"
    case("run-input", "fresh " + name, RUN + ["--input", f"{target}={f}", "--input",
                                              f"{other}={p('ids.npy')}", "--micro-batch", "2",
                                              "--seq-len", "8"], expect,
         # a dtype .npy files of ids never hold is named with the file
         (f if name in ("ids-u64-huge", "ids-object") else target) if expect == "refuse"
         else None)
for spec in ["input_ids", "=x.npy", f"nosuch={p('ids.npy')}", f"input_ids={p('ids.npy')}="]:
    case("run-input", f"fresh --input {spec!r}",
         RUN + ["--input", spec, "--input", f"labels={p('ids.npy')}", "--micro-batch", "2",
                "--seq-len", "8"], "refuse",
         "nosuch" if "nosuch" in spec else "ids.npy=" if spec.endswith("=") else "--input")
case("run-input", "fresh --input twice", RUN + ["--input", f"input_ids={p('ids.npy')}", "--input",
                                                f"input_ids={p('ids.npy')}", "--input",
                                                f"labels={p('ids.npy')}"], "refuse", "input_ids")

# ---------------------------------------------------------------- running
def classify(c):
    kind, name, argv, expect, must = c
    # The second try waits 6x longer: on a loaded machine NVRTC or the host
    # compiler alone can take minutes of wall time for seconds of CPU.
    for t in (args.timeout, args.timeout * args.retry):
        try:
            r = subprocess.run(argv, capture_output=True, timeout=t, env=ENV, cwd=W,
                               stdin=subprocess.DEVNULL)
            break
        except subprocess.TimeoutExpired:
            r = None
    if r is None:
        return "hang", ""
    err = r.stderr.decode(errors="replace")
    tail = err[-600:]
    crashed = (r.returncode < 0 or r.returncode >= 128 or
               any(s in err for s in ("LLVM ERROR", "AddressSanitizer", "UndefinedBehaviorSanitizer",
                                      "runtime error:", "Stack dump", "terminate called",
                                      "Segmentation fault", "Assertion", "PLEASE submit")))
    if crashed:
        return "crash", f"exit {r.returncode}: {tail}"
    if r.returncode == 0 and expect.startswith("same:"):
        ref = subprocess.run(REFS[int(expect[5:])], capture_output=True, env=ENV, cwd=W,
                             stdin=subprocess.DEVNULL, timeout=args.timeout * args.retry)
        if ref.returncode != 0 or ref.stdout != r.stdout:
            return "accepted", "its output differs from " + " ".join(REFS[int(expect[5:])])[-200:]
        return "ok", ""
    if r.returncode == 0:
        if expect == "refuse":
            out = r.stdout.decode(errors="replace")[-300:]
            return "accepted", f"{tail[-300:]}{out}"
        return "ok", ""
    musts = must if isinstance(must, tuple) else (must,)  # any of them
    if expect == "refuse" and must and not any(m in err or m.lstrip("-") in err for m in musts):
        return "vague", tail[-300:]
    return "refused" if expect == "refuse" else "ok", ""


print(f"{len(cases)} cases", flush=True)
results = []
with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
    for c, (outcome, detail) in zip(cases, ex.map(classify, cases)):
        results.append((c, outcome, detail))
        if outcome not in ("refused", "ok"):
            print(f"[{outcome}] {c[0]}: {c[1]}\n    {' '.join(c[2])[-200:]}\n    "
                  f"{detail.strip()[-400:]}".replace("\n", "\n    "), flush=True)

by = {}
for (kind, *_), outcome, _ in results:
    by.setdefault(outcome, 0)
    by[outcome] += 1
print("\n" + " ".join(f"{k}={v}" for k, v in sorted(by.items())) + f" total={len(results)}")
kinds = sorted({c[0] for c in cases})
for k in kinds:
    counts = {}
    for c, outcome, _ in results:
        if c[0] == k:
            counts[outcome] = counts.get(outcome, 0) + 1
    print(f"  {k}: " + " ".join(f"{o}={n}" for o, n in sorted(counts.items())))
if args.json:
    json.dump([{"kind": c[0], "case": c[1], "argv": c[2], "expect": c[3], "outcome": o,
                "detail": d} for c, o, d in results], open(args.json, "w"), indent=1)
sys.exit(1 if any(o in ("crash", "hang", "accepted") for _, o, _ in results) else 0)
