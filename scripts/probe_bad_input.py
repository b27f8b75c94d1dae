#!/usr/bin/python3
"""Probe mlc with bad input and classify how each case ends.

    scripts/probe_bad_input.py [--bin build/bin] [--work DIR] [--only KIND,...]
                               [--timeout S] [--jobs N] [--json FILE]

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
A probe is not a test: `make test` runs the robustness suite
(test/robustness/) and the lit tests of each defect the probe found.
"""
import argparse
import concurrent.futures
import json
import os
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
args = ap.parse_args()
MLC = os.path.join(args.bin, "mlc")
RUNTIME = os.path.join(args.bin, "mlc-runtime")
W = os.path.abspath(args.work)
DATA = os.path.join(ROOT, "data", "corpus", "LICENSE-python-docs.txt")
ONLY = set(filter(None, args.only.split(",")))
ENV = dict(os.environ, OMP_NUM_THREADS="1", MLC_NO_PROGRESS="1")
SERIAL = iter(range(1 << 30))
cases = []  # (kind, name, argv, expect, must_name, cwd)


def case(kind, name, argv, expect="refuse", must_name=None):
    """expect: 'refuse' (a wrong value: must fail cleanly naming must_name) or
    'any' (legitimate or borderline: any clean exit is fine)."""
    if ONLY and kind not in ONLY:
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
    if files or edit_manifest:
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


def tok_case(name, obj_or_bytes, expect="refuse", must=None):
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
          "HuggingFaceTokenizer", "--tokenizer-model", f], "refuse", must or f)
    # Any tokenizer copied beside the 256-row model must fit it or be refused.
    case("tokenizer", f"save {name}", TRAIN + ["--save", p("tokhf", name) + "/",
                                               "--tokenizer-model", d], "refuse", f)


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


# ---------------------------------------------------------------- running
def classify(c):
    kind, name, argv, expect, must = c
    # The second try waits 6x longer: on a loaded machine NVRTC or the host
    # compiler alone can take minutes of wall time for seconds of CPU.
    for t in (args.timeout, args.timeout * 6):
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
    if r.returncode == 0:
        if expect == "refuse":
            out = r.stdout.decode(errors="replace")[-300:]
            return "accepted", f"{tail[-300:]}{out}"
        return "ok", ""
    if expect == "refuse" and must and must not in err and must.lstrip("-") not in err:
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
