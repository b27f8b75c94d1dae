"""Robustness of training runs: checkpoints, resume, keep-rotation, batch sizes.

    training.py --mlc MLC --runtime MLC_RUNTIME --work DIR --data FILE

Families (one boundary each):
  * state: state.json and checkpoint.json with a field edited (wrong type,
    out of range, missing) and the hash recomputed: refused naming the field;
  * tensors: a checkpoint's moment or parameter edited to a non-finite value
    (a second moment to a negative one), the hash recomputed: refused naming
    the file and the tensor, and --save writes nothing;
  * resume: a resume under each changed setting is refused naming it, and
    accepted with --resume-with-changes, the difference printed;
  * keep: --keep beside another run's checkpoints deletes only this run's,
    never its newest; a run that would overwrite another's is refused;
  * global-batch: global batches that do not split over the ranks and
    micro-batches are refused naming --global-batch.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools",
                                "Inputs"))

from edit_state import content_hash, edit
from harness import arguments, check, report, run, sh

args = arguments()
W = args.work

model = ["gpt2", "--config", "tiny,n_layer=1", "--seq-len", "8"]
pkg = os.path.join(W, "pkg")
sh(args.mlc, "compile", *model, "--micro-batch", "2", "-o", pkg)
base = os.path.join(W, "base")
sh(args.runtime, "train", pkg, "--data", args.data, "--steps", "2", "--save-dir", base,
   "--save-interval", "1")
step1 = os.path.join(base, "step-00000001")


def train(package=pkg, *extra):
    return [args.runtime, "train", package, "--data", args.data, *extra]


def copy(name):
    dst = os.path.join(W, "cases", name)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(step1, dst)
    return dst


# 1. state.json and checkpoint.json fields: wrong types, out of range, missing.
bad_numbers = ['"1"', "null", "true", "[1]", "{}", "3.5", "-1", "1e18", "DELETE"]
fields = {"step": bad_numbers + ["0"], "steps": bad_numbers + ["0"],
          "package": ['"gpt2"', "1", "[]", "null", "DELETE"],
          "run": ['"x"', "2", "[]", "null", "DELETE"],
          "package.micro_batch": ["2", "null", "[]"], "run.lr": ["0.0003", "true", "{}"]}
for field, values in fields.items():
    for i, value in enumerate(values):
        d = copy(f"state-{field}-{i}")
        edit(d, field, value)
        name = f'"{field.split(".")[0]}"' + (f".{field.split('.')[1]}" if "." in field else "")
        run("state", train(pkg, "--steps", "3", "--resume", d), name)
manifest_fields = {"version": ['"1"', "2", "1.5", "DELETE"], "step": ['"1"', "2", "0", "1e18"],
                   "run": ["7", '""', "null"], "files": ['"x"', "[]", "{}"]}
for field, values in manifest_fields.items():
    for i, value in enumerate(values):
        d = copy(f"manifest-{field}-{i}")
        edit(d, field, value, "checkpoint.json")
        run("state", train(pkg, "--steps", "3", "--resume", d), "checkpoint.json")


# The tensors of a checkpoint, a value edited and the file's hash recomputed
# (a corrupt or hand-edited file): refused naming the file and the tensor,
# before any update; --save writes nothing.
def edit_tensor(d, file, name, value):
    path = os.path.join(d, file)
    data = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", data[:8])[0]
    entry = json.loads(data[8:8 + n])[name]
    assert entry["dtype"] == "F32", entry
    at = 8 + n + entry["data_offsets"][0]
    data[at:at + 4] = struct.pack("<f", value)
    open(path, "wb").write(bytes(data))
    manifest = json.load(open(os.path.join(d, "checkpoint.json")))
    manifest["files"][file] = content_hash(bytes(data))
    json.dump(manifest, open(os.path.join(d, "checkpoint.json"), "w"), indent=2)


tensor_cases = [("optimizer.safetensors", "exp_avg_sq.transformer.h.0.mlp.c_fc.weight", v)
                for v in (-0.5, -1e-30, float("nan"), float("inf"))]
tensor_cases += [("optimizer.safetensors", "exp_avg.transformer.wte.weight", v)
                 for v in (float("nan"), float("-inf"))]
tensor_cases += [("model.safetensors", "transformer.ln_f.weight", v)
                 for v in (float("nan"), float("inf"))]
for i, (file, name, value) in enumerate(tensor_cases):
    d = copy(f"tensor-{i}")
    edit_tensor(d, file, name, value)
    saved = os.path.join(W, "cases", f"tensor-{i}.safetensors")
    r = run("tensors", train(pkg, "--steps", "3", "--resume", d, "--save", saved),
            f"{d}/{file}: {name} holds")
    check("tensors", not os.path.exists(saved), f"{file} {name} = {value}: --save wrote {saved}")

# Past --steps and at it: nothing to train.
d = copy("past")
edit(d, "step", "9")
edit(d, "step", "9", "checkpoint.json")
run("state", train(pkg, "--steps", "6", "--resume", d), "nothing to train")
run("state", train(pkg, "--steps", "1", "--resume", step1), "nothing to train")

# 2. Resume with each changed setting: refused naming it; accepted with
# --resume-with-changes, which prints the difference.
other_data = os.path.join(W, "other.txt")
shutil.copy(args.data, other_data)
with open(other_data, "a") as f:
    f.write("more text\n")
nofuse, mb4 = os.path.join(W, "nofuse"), os.path.join(W, "mb4")
sh(args.mlc, "compile", *model, "--micro-batch", "2", "--no-fuse", "-o", nofuse)
sh(args.mlc, "compile", *model, "--micro-batch", "4", "-o", mb4)
changes = [  # (names allowed, the package, flags, the line it prints)
    ("lr", pkg, ["--lr", "1e-3"], "--lr:"),
    ("min-lr", pkg, ["--min-lr", "1e-5"], "--min-lr:"),
    ("warmup", pkg, ["--warmup", "1"], "--warmup:"),
    ("lr-schedule", pkg, ["--lr-schedule", "constant"], "--lr-schedule:"),
    ("weight-decay", pkg, ["--weight-decay", "0.1"], "--weight-decay:"),
    ("beta1", pkg, ["--beta1", "0.8"], "--beta1:"),
    ("beta2", pkg, ["--beta2", "0.99"], "--beta2:"),
    ("eps", pkg, ["--eps", "1e-6"], "--eps:"),
    ("clip-grad", pkg, ["--clip-grad", "0.5"], "--clip-grad:"),
    ("clip", pkg, ["--clip", "none"], "--clip:"),
    ("seed", pkg, ["--seed", "7"], "--seed:"),
    ("split", pkg, ["--split", "90,5,5"], "--split:"),
    ("global-batch", pkg, ["--global-batch", "4"], "--global-batch:"),
    ("lr-scaling,base-batch", pkg, ["--lr-scaling", "sqrt", "--base-batch", "2"],
     "--lr-scaling:"),
    ("package", nofuse, [], "package:"),
    ("micro_batch,package,global-batch", mb4, [], "micro_batch:"),
]
for names, package, flags, line in changes:
    argv = [args.runtime, "train", package, "--data", args.data, "--steps", "2", "--resume",
            step1] + flags
    run("resume", argv, line)
    r = subprocess.run(argv + ["--resume-with-changes", names], capture_output=True, text=True,
                       timeout=60)
    check("resume", r.returncode == 0 and "resuming with changed settings" in r.stderr and
          line in r.stderr, f"--resume-with-changes {names}: exit {r.returncode}: "
          f"{r.stderr[-300:]}")
# A GPT-style package's data tokenizer is GPT-2 BPE: --vocab-file alone (BERT's
# WordPiece) is refused naming the flag whether resuming or not.
run("resume", train(pkg, "--steps", "2", "--resume", step1, "--vocab-file", args.data),
    "--vocab-file " + args.data + " without --merge-file")
argv = train(pkg, "--steps", "2", "--resume", step1)
argv[4] = other_data
run("resume", argv, "--data:")
run("resume", argv + ["--resume-with-changes", "lr"], "--resume-with-changes data")
run("resume", train(pkg, "--steps", "2", "--resume", step1, "--resume-with-changes", "colour"),
    "--resume-with-changes")
# The ranks: a 1-rank checkpoint of a 2-rank package, resumed on 2 ranks.
pkg2 = os.path.join(W, "pkg2")
sh(args.mlc, "compile", *model, "--micro-batch", "2", "--ranks", "2", "-o", pkg2)
sh(args.runtime, "train", pkg2, "--data", args.data, "--steps", "1", "--global-batch", "4",
   "--save-dir", os.path.join(W, "one"))
argv = ["mpirun", "--oversubscribe", "-np", "2", args.mlc, "train", pkg2, "--data", args.data,
        "--steps", "2", "--resume", os.path.join(W, "one", "step-00000001")]
run("resume", argv, "ranks:", timeout=120)
r = subprocess.run(argv + ["--resume-with-changes", "ranks"], capture_output=True, text=True,
                   timeout=120)
check("resume", r.returncode == 0 and "ranks: the checkpoint's '1', this run's '2'" in r.stderr,
      f"--resume-with-changes ranks on 2 ranks: exit {r.returncode}: {r.stderr[-300:]}")


# 3. Keep-rotation beside another run's checkpoints.
def listing(d):
    return sorted(x for x in os.listdir(d) if x.startswith("step-"))


foreign = os.path.join(base, "step-00000002")
for keep in (1, 2, 3):
    for where, name in (("higher", "step-00000100"), ("lower", "step-00000000"),
                        ("older-format", "step-00000050")):
        d = os.path.join(W, f"keep-{keep}-{where}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        shutil.copytree(foreign, os.path.join(d, name))
        if where == "older-format":
            edit(os.path.join(d, name), "run", "DELETE", "checkpoint.json")
        r = subprocess.run(train(pkg, "--steps", "6", "--save-dir", d, "--save-interval", "1",
                                 "--keep", str(keep)), capture_output=True, text=True)
        own = [f"step-{s:08d}" for s in range(7 - keep, 7)]
        check("keep", r.returncode == 0 and listing(d) == sorted(own + [name]),
              f"--keep {keep} beside a {where} checkpoint of another run left {listing(d)}")
        # Resumed, it is the same run: its older checkpoints rotate out.
        r = subprocess.run(train(pkg, "--steps", "8", "--save-dir", d, "--save-interval", "1",
                                 "--keep", str(keep), "--resume",
                                 os.path.join(d, "step-00000006")), capture_output=True, text=True)
        own = [f"step-{s:08d}" for s in range(9 - keep, 9)]
        check("keep", r.returncode == 0 and listing(d) == sorted(own + [name]),
              f"resumed --keep {keep} beside a {where} checkpoint left {listing(d)}")
# A run that would overwrite another run's checkpoint is refused before it trains.
d = os.path.join(W, "keep-1-higher")
before = listing(d)
run("keep", train(pkg, "--steps", "100", "--save-dir", d, "--save-interval", "50"), "--save-dir",
    out_dirs=[d])
check("keep", listing(d) == before, f"the refused run changed {d}: {listing(d)}")

# 4. Global batches that do not split over ranks x micro-batches.
for g in ("1", "3", "5", "7"):
    run("global-batch", train(pkg, "--steps", "1", "--global-batch", g), "--global-batch")
batches = os.path.join(W, "batches")
os.makedirs(batches, exist_ok=True)
sh(sys.executable, "-c", "import numpy as np, sys; ids = np.zeros((2, 6, 8), dtype=np.int64); "
   f"np.save('{batches}/input_ids.npy', ids); np.save('{batches}/labels.npy', ids)")
run("global-batch", [args.runtime, "train", pkg, "--batches", batches, "--steps", "1",
                     "--global-batch", "4"], "--global-batch")
mpirun = ["mpirun", "--oversubscribe", "-np", "2"]
for g in ("2", "6", "10"):
    run("global-batch", mpirun + [args.mlc, "train", *model, "--micro-batch", "2", "--data",
                                  args.data, "--steps", "1", "--global-batch", g],
        "--global-batch", timeout=120)
run("global-batch", mpirun + [args.mlc, "train", *model, "--micro-batch", "2", "--batches",
                              batches, "--steps", "1"], "input_ids.npy", timeout=120)

report()
