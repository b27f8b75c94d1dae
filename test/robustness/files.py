"""The robustness suite, the shell and the disk: what mlc does with the paths it is given.

    files.py --mlc MLC --runtime MLC_RUNTIME --work DIR --data CORPUS

Boundaries:
  * shell: a cache directory, a home directory or a $CXX with shell metacharacters
    (quotes, `;`, `$(...)`, backticks, spaces, a newline, a leading `-`): kernels
    still compile and train, and no command hidden in the path runs;
  * signal: SIGTERM or SIGINT while the host compiler runs ends the run and leaves
    no temporary file in the kernel cache, nor the compiler behind;
  * full-disk: every writer under a file size limit (ulimit -f) fails cleanly,
    naming the file, without a stack dump, and leaves the previous file intact;
  * same-file: an output that is one of the run's inputs (or a link to one) is
    refused before anything runs, and the input stays intact.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
from harness import check, report, run, sh

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--runtime", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--data", required=True)
args = ap.parse_args()
W = os.path.abspath(args.work)
os.makedirs(W, exist_ok=True)
MLC, RUNTIME = (os.path.abspath(shutil.which(t) or t) for t in (args.mlc, args.runtime))
CACHE = os.path.join(W, "cache")
ENV = dict(os.environ, MLC_CACHE_DIR=CACHE)


def path(*names):
    return os.path.join(W, *names)


def digest(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None


def digests(d):
    return {f: digest(f) for f in sorted(glob.glob(os.path.join(d, "*")))}


def leftovers(d):
    return glob.glob(os.path.join(d, "*.tmp*")) + glob.glob(os.path.join(d, ".*.tmp*"))


pkg = path("pkg")
sh(MLC, "compile", "gpt2", "--config", "tiny,n_layer=1", "--micro-batch", "2", "--seq-len",
   "8", "-o", pkg)
data = path("corpus.txt")
shutil.copy(args.data, data)
# The kernel cache is warm before any case that limits the disk.
sh(MLC, "train", pkg, "--data", data, "--steps", "1", env=ENV)
ids = path("ids.npy")
np.save(ids, np.zeros((2, 8), dtype=np.int64))
run_inputs = ["--input", f"input_ids={ids}", "--input", f"labels={ids}"]

# 1. shell: metacharacters where a path reaches the compiler.
marker = path("PWNED")
nasty = ["q'uote", "semi;colon", "dollar$(touch PWNED)", "back`touch PWNED`tick",
         "two  spaces", "new\nline", "-dash", f"x';touch {marker};'", "dq\"uote", "star*glob"]
for i, name in enumerate(nasty):
    where = path(f"shell{i}")
    os.makedirs(where, exist_ok=True)
    for var in ("MLC_CACHE_DIR", "HOME") if i < 3 else ("MLC_CACHE_DIR",):
        value = name
        env = dict(os.environ, **{var: value})
        if var == "HOME":
            env.pop("MLC_CACHE_DIR", None)
        r = subprocess.run([MLC, "train", pkg, "--data", data, "--steps", "1"], cwd=where, env=env,
                           capture_output=True, text=True, timeout=300)
        cache = os.path.join(where, name if var == "MLC_CACHE_DIR" else name + "/.cache/mlc")
        check("shell", r.returncode == 0 and "compiling kernels" in r.stderr and
              glob.glob(os.path.join(cache, "kernels-*.so")),
              f"{var}={name!r}: exit {r.returncode}, no kernels compiled there: {r.stderr[-300:]}")
        check("shell", not os.path.exists(marker) and not os.path.exists(os.path.join(where, "PWNED")),
              f"{var}={name!r}: a command in the path ran")
# $CXX is split into words, never given to a shell.
for cxx in ["c++ -w", "  c++   -O1  ", "c++ -DX=';touch${IFS}PWNED;'$(touch\tPWNED)`id`"]:
    r = subprocess.run([MLC, "train", pkg, "--data", data, "--steps", "1"],
                       env=dict(os.environ, MLC_CACHE_DIR=path("cxx-cache"), CXX=cxx), cwd=W,
                       capture_output=True, text=True, timeout=300)
    check("shell", r.returncode == 0 and not os.path.exists(marker),
          f"CXX={cxx!r}: exit {r.returncode}: {r.stderr[-300:]}")
shutil.rmtree(path("cxx-cache"), ignore_errors=True)
run("shell", [MLC, "train", pkg, "--data", data, "--steps", "1"], "no-such-compiler",
    env=dict(os.environ, MLC_CACHE_DIR=path("cxx-missing"), CXX="no-such-compiler -O2"),
    out_dirs=[path("cxx-missing")])
# An output path with metacharacters is only a name.
for name in nasty:
    out = path("out-" + name.replace("/", "_") + ".safetensors")
    r = subprocess.run([RUNTIME, "train", pkg, "--data", data, "--steps", "1", "--save", out],
                       env=ENV, capture_output=True, text=True, timeout=120)
    check("shell", r.returncode == 0 and os.path.exists(out) and not os.path.exists(marker),
          f"--save {out!r}: exit {r.returncode}: {r.stderr[-300:]}")

# 2. signal: a signal while the host compiler runs. The wrapper writes the
# compiler's output file (as a linker does) and waits, so the signal always
# lands mid-compile.
started = path("compiler-started")
slow = path("slow-cxx")
with open(slow, "w") as f:
    f.write("#!/bin/sh\nprev=\nfor a in \"$@\"; do [ \"$prev\" = -o ] && echo partial > \"$a\"; "
            f"prev=$a; done\nsleep 60 & echo $! > '{started}.pid'\nmv '{started}.pid' '{started}'\n"
            "wait $!\nexec c++ \"$@\"\n")
os.chmod(slow, 0o755)


def alive(pid):
    """Running, not a zombie that nobody reaps (a container's init may not)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


for sig in (signal.SIGTERM, signal.SIGINT):
    for tool in ([MLC, "train", pkg, "--data", data, "--steps", "1"],
                 [RUNTIME, "run", pkg] + run_inputs + ["--output-dir", path("sig-out")]):
        cache = path(f"sig-cache-{int(sig)}-{os.path.basename(tool[0])}")
        if os.path.exists(started):
            os.remove(started)
        p = subprocess.Popen(tool, env=dict(os.environ, MLC_CACHE_DIR=cache, CXX=slow),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while not os.path.exists(started) and p.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        partial = glob.glob(os.path.join(cache, "*.tmp*"))
        p.send_signal(sig)
        t0 = time.time()
        try:
            _, err = p.communicate(timeout=20)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            rc = "hang"
        what = f"{sig.name} to {os.path.basename(tool[0])} {tool[1]} mid-compile"
        check("signal", bool(partial), f"{what}: the wrapper never started ({partial})")
        check("signal", rc == -sig or (isinstance(rc, int) and 1 <= rc <= 127),
              f"{what}: exit {rc} after {time.time() - t0:.1f} s: {err[-300:]}")
        check("signal", not leftovers(cache), f"{what}: left {leftovers(cache)}")
        check("signal", "Stack dump" not in err, f"{what}: a stack dump: {err[-300:]}")
        time.sleep(0.2)
        pid = int(open(started).read()) if os.path.exists(started) else 0
        check("signal", pid and not alive(pid), f"{what}: the compiler still runs")


# 3. full-disk: each writer under `ulimit -f`, over a previous output.
def limited(blocks, argv):
    return ["bash", "-c", f'ulimit -f {blocks}; exec "$@"', "limited"] + argv


def full_disk(what, argv, target, blocks):
    """`argv` writes `target` (a file or a package directory) past the limit."""
    is_dir = os.path.isdir(target)
    before = digests(target) if is_dir else digest(target)
    r = run("full-disk", limited(blocks, argv), target,
            out_dirs=[target if is_dir else os.path.dirname(target)], env=ENV)
    if r is None:
        return
    for bad in ("Stack dump", "PLEASE submit", "LLVM ERROR"):
        check("full-disk", bad not in r.stderr, f"{what}: {bad!r} in {r.stderr[-300:]}")
    after = digests(target) if is_dir else digest(target)
    check("full-disk", after == before, f"{what}: the previous {target} changed")


old_weights = path("old.safetensors")
sh(RUNTIME, "train", pkg, "--data", data, "--steps", "1", "--save", old_weights, env=ENV)
for tool in (MLC, RUNTIME):
    full_disk(f"{tool} train --save", [tool, "train", pkg, "--data", data, "--steps", "1",
                                       "--save", old_weights], old_weights, blocks=64)
old_pkg = path("old-pkg")
sh(MLC, "compile", "gpt2", "--config", "tiny,n_layer=1", "--micro-batch", "2", "--seq-len", "8",
   "-o", old_pkg)
full_disk("mlc compile -o PKG", [MLC, "compile", "gpt2", "--config", "tiny,n_layer=2",
                                 "--micro-batch", "2", "--seq-len", "8", "-o", old_pkg],
          old_pkg, blocks=16)
r = run("full-disk", limited(16, [MLC, "compile", "gpt2", "--config", "tiny,n_layer=1",
                                  "--micro-batch", "2", "--seq-len", "8", "-o", path("new-pkg")]),
        "new-pkg", out_dirs=[W])
check("full-disk", not os.path.exists(path("new-pkg")), "mlc compile -o NEW: a half package left")
for emit in ("graph", "mlir", "plan", "kernels", "cuda"):
    text = path(f"old.{emit}")
    with open(text, "w") as f:
        f.write("previous\n")
    full_disk(f"mlc compile --emit={emit} -o", [MLC, "compile", "gpt2", "--config", "tiny",
                                                "--micro-batch", "2", "--seq-len", "8",
                                                f"--emit={emit}", "-o", text], text, blocks=4)
out_dir = path("old-out")
sh(RUNTIME, "run", pkg, *run_inputs, "--output-dir", out_dir, env=ENV)
for tool in (MLC, RUNTIME):
    full_disk(f"{tool} run --output-dir", [tool, "run", pkg] + run_inputs +
              ["--output-dir", out_dir], out_dir, blocks=8)
# The kernel cache under the limit: the compiler fails, the cache keeps no temporary file.
limited_cache = path("limited-cache")
r = run("full-disk", limited(64, [MLC, "train", pkg, "--data", data, "--steps", "1"]),
        limited_cache, out_dirs=[limited_cache],
        env=dict(os.environ, MLC_CACHE_DIR=limited_cache))
check("full-disk", r is not None and not glob.glob(os.path.join(limited_cache, "*.so")),
      "a kernel library written past the limit is in the cache")

# 4. same-file: outputs over inputs, given directly and through a symlink.
shutil.copy(args.data, path("in.txt"))
with open(path("c.jsonl"), "w") as f:
    for i in range(40):
        f.write(json.dumps({"text": f"document {i} " * 20}) + "\n")
sh(MLC, "preprocess", "--input", path("c.jsonl"), "--output-prefix", path("ds"))
prefix = path("ds_text_document")
batches = path("batches")
os.makedirs(batches, exist_ok=True)
np.save(os.path.join(batches, "input_ids.npy"), np.zeros((1, 2, 8), dtype=np.int64))
np.save(os.path.join(batches, "labels.npy"), np.zeros((1, 2, 8), dtype=np.int64))
vocab, merges = path("vocab.json"), path("merges.txt")
for p, text in ((vocab, "{}"), (merges, "#version: 0.2\n")):
    with open(p, "w") as f:
        f.write(text)
ckpt = path("ckpt")
sh(MLC, "train", pkg, "--data", data, "--steps", "1", "--save-dir", ckpt, env=ENV)
ckpt_step = sorted(d for d in glob.glob(os.path.join(ckpt, "*")) if os.path.isdir(d))[-1]
ckpt_file = sorted(glob.glob(os.path.join(ckpt_step, "*")))[0]
data_dir = path("datadir")
os.makedirs(data_dir, exist_ok=True)
shutil.copy(args.data, os.path.join(data_dir, "in.txt"))


def same_file(tool, argv, out_flag, out, victim):
    """`argv` with `out_flag out` where `out` is `victim`, then a link to it."""
    for how in ("same", "link"):
        target = out
        if how == "link":
            target = out + ".link"
            if os.path.lexists(target):
                os.remove(target)
            os.symlink(victim, target)
        before = digests(victim) if os.path.isdir(victim) else digest(victim)
        run("same-file", [tool] + argv + [out_flag, target], f"{out_flag} {target}", env=ENV)
        after = digests(victim) if os.path.isdir(victim) else digest(victim)
        check("same-file", after == before, f"{out_flag} {target}: {victim} changed")


train = ["train", pkg, "--steps", "1"]
for tool in (MLC, RUNTIME):
    base = os.path.basename(tool)
    same_file(tool, train + ["--data", path("in.txt")], "--save", path("in.txt"), path("in.txt"))
    same_file(tool, train + ["--data", path("in.txt")], "--log-json", path("in.txt"),
              path("in.txt"))
    same_file(tool, train + ["--data", prefix], "--save", prefix + ".bin", prefix + ".bin")
    same_file(tool, train + ["--data", f"1 {prefix} 1 {prefix}"], "--log-json", prefix + ".idx",
              prefix + ".idx")
    same_file(tool, train + ["--data", data, "--init", old_weights], "--save", old_weights,
              old_weights)
    same_file(tool, train + ["--data", data, "--vocab-file", vocab], "--log-json", vocab, vocab)
    same_file(tool, train + ["--data", data, "--merge-file", merges], "--save", merges, merges)
    same_file(tool, train + ["--batches", batches], "--save",
              os.path.join(batches, "labels.npy"), os.path.join(batches, "labels.npy"))
    same_file(tool, train + ["--data", data, "--resume", ckpt_step, "--steps", "2"], "--log-json",
              ckpt_file, ckpt_file)
    same_file(tool, train + ["--data", os.path.join(data_dir, "in.txt")], "--save-dir", data_dir,
              data_dir)
    # run: an output NAME.npy that is an input or a file of the package.
    out = path(f"run-out-{base}")
    os.makedirs(out, exist_ok=True)
    for victim in (ids, os.path.join(pkg, "plan.txt"), old_weights):
        logits = os.path.join(out, "logits.npy")
        if os.path.lexists(logits):
            os.remove(logits)
        os.symlink(victim, logits)
        before = digest(victim)
        run("same-file", [tool, "run", pkg] + run_inputs + ["--init", old_weights, "--output-dir",
                                                             out], f"--output-dir {logits}", env=ENV)
        check("same-file", digest(victim) == before, f"{base} run: {victim} changed")
        os.remove(logits)
# compile: the model is never overwritten by what is compiled from it.
onnx_dir = path("onnx")
os.makedirs(onnx_dir, exist_ok=True)
model = os.path.join(onnx_dir, "model.onnx")
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx", "Inputs",
                   "gpt2-lm-opset14-eval.onnx")
shutil.copy(src, model)
compile_model = ["compile", model, "--micro-batch", "2", "--seq-len", "16"]
same_file(MLC, compile_model, "-o", onnx_dir, onnx_dir)
same_file(MLC, compile_model + ["--emit=mlir"], "-o", model, model)
same_file(MLC, compile_model + ["--report"], "--report-json", model, model)

report()
