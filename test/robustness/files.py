"""The robustness suite, the shell and the disk: what mlc does with the paths it is given.

    files.py --mlc MLC --runtime MLC_RUNTIME --work DIR --data CORPUS [--only BOUNDARY]

Boundaries:
  * shell: a cache directory, a home directory, an output or a $CXX with shell
    metacharacters (quotes, `;`, `$(...)`, backticks, spaces, a newline, a leading
    `-`): kernels still compile and train, and no command hidden in them runs;
  * signal: SIGTERM or SIGINT while the host compiler runs ends the run, the
    compiler with it, and leaves no temporary file in the kernel cache;
  * full-disk: every writer under a file size limit (ulimit -f) fails cleanly,
    naming the file, without a stack dump, and leaves the previous file intact;
  * same-file: an output that is one of the run's inputs (or a link to one) is
    refused before anything runs, and the input stays intact.
"""
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
from harness import arguments, check, report, run, sh

args = arguments(("--only", "one boundary: shell, signal, full-disk or same-file"))
W = args.work
MLC, RUNTIME = (os.path.abspath(shutil.which(t) or t) for t in (args.mlc, args.runtime))
ENV = dict(os.environ, MLC_CACHE_DIR=os.path.join(W, "cache"))


def path(*names):
    return os.path.join(W, *names)


def digest(p):
    """A file's hash, or a directory's files' hashes."""
    if os.path.isdir(p):
        return {f: digest(f) for f in sorted(glob.glob(os.path.join(p, "*")))}
    return hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None


def leftovers(d):
    return glob.glob(os.path.join(d, "*.tmp*")) + glob.glob(os.path.join(d, ".*.tmp*"))


def train1(tool, *more):
    return [tool, "train", pkg, "--data", data, "--steps", "1", *more]


pkg, data, ids, weights = path("pkg"), path("corpus.txt"), path("ids.npy"), path("w.safetensors")
sh(MLC, "compile", "gpt2", "--config", "tiny,n_layer=1", "--micro-batch", "2", "--seq-len",
   "8", "-o", pkg)
shutil.copy(args.data, data)
# The kernel cache is warm before any case that limits the disk.
sh(*train1(RUNTIME, "--save", weights), env=ENV)
np.save(ids, np.zeros((2, 8), dtype=np.int64))
run_inputs = ["--input", f"input_ids={ids}", "--input", f"labels={ids}"]
marker = path("PWNED")
nasty = ["q'uote", "semi;colon", "dollar$(touch PWNED)", "back`touch PWNED`tick", "two  spaces",
         "new\nline", "-dash", f"x';touch {marker};'", "dq\"uote", "star*glob"]


def shell_cases():
    """Metacharacters where a path or $CXX reaches the host compiler."""
    def pwned(where):
        return os.path.exists(marker) or os.path.exists(os.path.join(where, "PWNED"))

    for i, name in enumerate(nasty):
        where = path(f"shell{i}")
        os.makedirs(where, exist_ok=True)
        # MLC_CACHE_DIR, or the default cache under HOME.
        for var in ("MLC_CACHE_DIR", "HOME") if i < 3 else ("MLC_CACHE_DIR",):
            env = dict(os.environ, **{var: name})
            if var == "HOME":
                env.pop("MLC_CACHE_DIR", None)
            r = subprocess.run(train1(MLC), cwd=where, env=env, capture_output=True, text=True,
                               timeout=300)
            cache = os.path.join(where, name if var == "MLC_CACHE_DIR" else name + "/.cache/mlc")
            check("shell", r.returncode == 0 and "compiling kernels" in r.stderr and
                  glob.glob(os.path.join(glob.escape(cache), "kernels-*.so")),
                  f"{var}={name!r}: exit {r.returncode}, no kernels there: {r.stderr[-300:]}")
            check("shell", not pwned(where), f"{var}={name!r}: a command in the path ran")
    # The form of the report: an absolute cache directory whose quote ends the
    # old command's quoting, beside a directory the hidden `touch` writes into.
    os.makedirs(path("x"), exist_ok=True)
    cache = f"{W}/x';touch {W}/x/PWNED;'"
    r = subprocess.run(train1(MLC), env=dict(os.environ, MLC_CACHE_DIR=cache), capture_output=True,
                       text=True, timeout=300)
    check("shell", r.returncode == 0 and not os.path.exists(path("x", "PWNED")),
          f"MLC_CACHE_DIR={cache!r}: exit {r.returncode}, or the touch ran: {r.stderr[-300:]}")
    # $CXX is split into words, never given to a shell.
    for cxx in ["c++ -w", "  c++   -O1  ", "c++ -DX=';touch${IFS}PWNED;'$(id)`id`"]:
        r = subprocess.run(train1(MLC), env=dict(os.environ, MLC_CACHE_DIR=path("cxx"), CXX=cxx),
                           cwd=W, capture_output=True, text=True, timeout=300)
        check("shell", r.returncode == 0 and not pwned(W),
              f"CXX={cxx!r}: exit {r.returncode}: {r.stderr[-300:]}")
        shutil.rmtree(path("cxx"))
    run("shell", train1(MLC), "no-such-compiler", out_dirs=[path("cxx")],
        env=dict(os.environ, MLC_CACHE_DIR=path("cxx"), CXX="no-such-compiler -O2"))
    # An output with metacharacters is only a name.
    for name in nasty:
        os.makedirs(path("shell-out"), exist_ok=True)
        out = path("shell-out", name.replace("/", "_") + ".safetensors")
        r = subprocess.run(train1(RUNTIME, "--save", out), env=ENV, cwd=W, capture_output=True,
                           text=True, timeout=120)
        check("shell", r.returncode == 0 and os.path.exists(out) and not pwned(W),
              f"--save {out!r}: exit {r.returncode}: {r.stderr[-300:]}")


def alive(pid):
    """Running, not a zombie that nobody reaps (a container's init may not)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def signal_cases():
    """A signal while the host compiler runs. The wrapper writes the compiler's
    output file (as a linker would) and waits, so the signal lands mid-compile."""
    started, slow = path("compiler-started"), path("slow-cxx")
    with open(slow, "w") as f:
        f.write(f"""#!/bin/sh
prev=
for a in "$@"; do [ "$prev" = -o ] && echo partial > "$a"; prev=$a; done
sleep 60 & echo $! > '{started}.pid'
mv '{started}.pid' '{started}'
wait $!
exec c++ "$@"
""")
    os.chmod(slow, 0o755)
    for sig in (signal.SIGTERM, signal.SIGINT):
        for tool in (train1(MLC), [RUNTIME, "run", pkg] + run_inputs + ["--output-dir", path("o")]):
            what = f"{sig.name} to {os.path.basename(tool[0])} {tool[1]} mid-compile"
            cache = path(f"sig-cache-{int(sig)}-{os.path.basename(tool[0])}")
            if os.path.exists(started):
                os.remove(started)
            # Started as from a terminal: a test runner may start us with SIGINT ignored.
            p = subprocess.Popen(tool, env=dict(os.environ, MLC_CACHE_DIR=cache, CXX=slow),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            deadline = time.time() + 60
            while not os.path.exists(started) and p.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            partial = leftovers(cache)
            p.send_signal(sig)
            try:
                _, err = p.communicate(timeout=20)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                rc = "a hang"
            check("signal", bool(partial), f"{what}: the compiler never started")
            check("signal", rc == -sig or (isinstance(rc, int) and 1 <= rc <= 127),
                  f"{what}: exit {rc}: {err[-300:]}")
            check("signal", not leftovers(cache), f"{what}: left {leftovers(cache)}")
            check("signal", "Stack dump" not in err, f"{what}: a stack dump: {err[-300:]}")
            time.sleep(0.2)
            pid = int(open(started).read()) if os.path.exists(started) else 0
            check("signal", pid and not alive(pid), f"{what}: the compiler still runs")


def limited(blocks, argv):
    return ["bash", "-c", f'ulimit -f {blocks}; exec "$@"', "limited"] + argv


def full_disk(what, blocks, argv, target):
    """`argv` writes `target` (a file, or a directory of outputs) past the limit."""
    before = digest(target)
    r = run("full-disk", limited(blocks, argv), target, env=ENV,
            out_dirs=[target if os.path.isdir(target) else os.path.dirname(target)])
    if r is None:
        return
    for bad in ("Stack dump", "PLEASE submit", "LLVM ERROR"):
        check("full-disk", bad not in r.stderr, f"{what}: {bad!r} in {r.stderr[-300:]}")
    check("full-disk", digest(target) == before, f"{what}: the previous {target} changed")


def full_disk_cases():
    """Each writer under `ulimit -f` (blocks of 1 KiB), over a previous output."""
    for tool in (MLC, RUNTIME):
        full_disk(f"{tool} train --save", 64, train1(tool, "--save", weights), weights)
    gpt2 = ["compile", "gpt2", "--micro-batch", "2", "--seq-len", "8", "--config"]
    old_pkg = path("old-pkg")
    sh(MLC, *gpt2, "tiny,n_layer=2", "-o", old_pkg)
    # Past the limit after two of its files (kernels.cu is the largest): neither replaces the old.
    full_disk("mlc compile -o PKG", 60, [MLC, *gpt2, "tiny,n_layer=1,n_embd=32", "-o", old_pkg],
              old_pkg)
    run("full-disk", limited(16, [MLC, *gpt2, "tiny", "-o", path("new-pkg")]), "new-pkg",
        out_dirs=[W])
    check("full-disk", not os.path.exists(path("new-pkg")), "compile -o NEW: a half package left")
    for emit in ("graph", "mlir", "plan", "kernels", "cuda"):
        text = path(f"old.{emit}")
        with open(text, "w") as f:
            f.write("previous\n")
        full_disk(f"mlc compile --emit={emit} -o", 4,
                  [MLC, *gpt2, "tiny", f"--emit={emit}", "-o", text], text)
    # A device that is always full, named by -o and as the standard output.
    if os.path.exists("/dev/full"):
        run("full-disk", [MLC, *gpt2, "tiny", "--emit=graph", "-o", "/dev/full"], "/dev/full")
        to_full = ["bash", "-c", 'exec "$@" > /dev/full', "full"]
        run("full-disk", to_full + [MLC, *gpt2, "tiny", "--emit=plan"], "standard output")
        run("full-disk", to_full + [MLC, *gpt2, "tiny", "-o", path("pkg-full")],
            "standard output")
        run("full-disk", to_full + [RUNTIME, "generate", pkg, "--prompt", "a", "--max-tokens", "2"],
            "standard output", env=ENV)
    # Previous outputs from other inputs, so that a rewritten loss.npy would differ.
    out_dir, ones = path("old-out"), path("ones.npy")
    np.save(ones, np.ones((2, 8), dtype=np.int64))
    for tool in (MLC, RUNTIME):
        sh(RUNTIME, "run", pkg, "--input", f"input_ids={ones}", "--input", f"labels={ones}",
           "--output-dir", out_dir, env=ENV)
        full_disk(f"{tool} run --output-dir", 8,
                  [tool, "run", pkg] + run_inputs + ["--output-dir", out_dir], out_dir)
    # A kernel library past the limit: the compiler fails, the cache keeps nothing of it.
    cache = path("limited-cache")
    run("full-disk", limited(64, train1(MLC)), cache, out_dirs=[cache],
        env=dict(os.environ, MLC_CACHE_DIR=cache))
    check("full-disk", not glob.glob(os.path.join(cache, "*.so")), "a truncated library is cached")


def same_file(tool, argv, out_flag, out, victim=None):
    """`tool argv out_flag out` where `out` is `victim` (default: itself), then a
    link to it: refused, naming the output, and `victim` unchanged."""
    victim = victim or out
    for target in (out, out + ".link"):
        if target != out:
            if os.path.lexists(target):
                os.remove(target)
            os.symlink(victim, target)
        before = digest(victim)
        run("same-file", [tool] + argv + [out_flag, target], f"{out_flag} {target}", env=ENV)
        check("same-file", digest(victim) == before, f"{out_flag} {target}: {victim} changed")


def same_file_cases():
    """Outputs over inputs, for each output and input flag."""
    text = path("in.txt")
    shutil.copy(args.data, text)
    with open(path("c.jsonl"), "w") as f:
        for i in range(40):
            f.write(json.dumps({"text": f"document {i} " * 20}) + "\n")
    sh(MLC, "preprocess", "--input", path("c.jsonl"), "--output-prefix", path("ds"))
    prefix = path("ds_text_document")
    batches = path("batches")
    os.makedirs(batches, exist_ok=True)
    for name in ("input_ids", "labels"):
        np.save(os.path.join(batches, name + ".npy"), np.zeros((1, 2, 8), dtype=np.int64))
    vocab, merges = path("vocab.json"), path("merges.txt")
    for p, content in ((vocab, "{}"), (merges, "#version: 0.2\n")):
        with open(p, "w") as f:
            f.write(content)
    sh(*train1(MLC, "--save-dir", path("ckpt")), env=ENV)
    step = sorted(d for d in glob.glob(path("ckpt", "*")) if os.path.isdir(d))[-1]
    step_file = sorted(glob.glob(os.path.join(step, "*")))[0]
    data_dir = path("datadir")
    os.makedirs(data_dir, exist_ok=True)
    shutil.copy(args.data, os.path.join(data_dir, "in.txt"))
    for tool in (MLC, RUNTIME):
        t = ["train", pkg, "--steps", "1"]
        same_file(tool, t + ["--data", text], "--save", text)
        same_file(tool, t + ["--data", text], "--log-json", text)
        same_file(tool, t + ["--data", prefix], "--save", prefix + ".bin")
        same_file(tool, t + ["--data", f"1 {text} 1 {prefix}"], "--log-json", prefix + ".idx")
        same_file(tool, t + ["--data", data, "--init", weights], "--save", weights)
        same_file(tool, t + ["--data", data, "--vocab-file", vocab], "--log-json", vocab)
        same_file(tool, t + ["--data", data, "--merge-file", merges], "--save", merges)
        same_file(tool, t + ["--batches", batches], "--save", os.path.join(batches, "labels.npy"))
        same_file(tool, t + ["--data", data, "--resume", step, "--steps", "2"], "--log-json",
                  step_file)
        # A --save-dir beside the data is fine: checkpoints never touch it.
        r = subprocess.run([tool, *t, "--data", os.path.join(data_dir, "in.txt"), "--save-dir",
                            data_dir], capture_output=True, text=True, env=ENV, timeout=60)
        check("same-file", r.returncode == 0 and open(os.path.join(data_dir, "in.txt"), "rb").read()
              == open(args.data, "rb").read(), f"{tool} --save-dir beside --data: {r.stderr[-300:]}")
        for d in glob.glob(os.path.join(data_dir, "step-*")):
            shutil.rmtree(d)
        # A --log-json in the --batches directory is fine: only its NAME.npy are inputs
        # (with ranks, rank 0 creates the log while another rank still checks).
        beside = os.path.join(batches, "run.jsonl")
        with open(beside, "w") as f:
            f.write("{}\n")
        r = subprocess.run([tool, *t, "--batches", batches, "--log-json", beside],
                           capture_output=True, text=True, env=ENV, timeout=60)
        check("same-file", r.returncode == 0, f"{tool} --log-json beside --batches: {r.stderr[-300:]}")
        os.remove(beside)
        # run: an output NAME.npy that is a link to an input or to a file of the package.
        out = path(f"run-out-{os.path.basename(tool)}")
        os.makedirs(out, exist_ok=True)
        logits = os.path.join(out, "logits.npy")
        for victim in (ids, os.path.join(pkg, "plan.txt"), weights):
            os.symlink(victim, logits)
            before = digest(victim)
            run("same-file", [tool, "run", pkg, *run_inputs, "--init", weights, "--output-dir", out],
                f"--output-dir {logits}", env=ENV)
            check("same-file", digest(victim) == before, f"{tool} run: {victim} changed")
            os.remove(logits)
    # compile: the model is never overwritten by what is compiled from it.
    onnx_dir = path("onnx")
    os.makedirs(onnx_dir, exist_ok=True)
    model = os.path.join(onnx_dir, "model.onnx")
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx", "Inputs",
                             "gpt2-lm-opset14-eval.onnx"), model)
    c = ["compile", model, "--micro-batch", "2", "--seq-len", "16"]
    same_file(MLC, c, "-o", onnx_dir)
    same_file(MLC, c + ["--emit=mlir"], "-o", model)
    same_file(MLC, c + ["--report"], "--report-json", model)


CASES = {"shell": shell_cases, "signal": signal_cases, "full-disk": full_disk_cases,
         "same-file": same_file_cases}
for boundary, cases in CASES.items():
    if args.only in (None, boundary):
        cases()
report()
