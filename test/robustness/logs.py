"""Robustness of what a run logs: --log-json, --tensorboard-dir, --peak-tflops.

    logs.py --mlc MLC --runtime MLC_RUNTIME --work DIR --data FILE

Families (each case must fail cleanly, naming the log, the directory or the
flag, and leave no temporary files):
  full-disk    the log or the event file cannot grow (a file-size limit, its
               signal ignored): from the first row, or part way through; the
               JSON log keeps whole lines
  held         another live run writes the same log or TensorBoard directory:
               refused naming it and that run's process; the first run's log
               stays intact, and once it ends the log is free again
  not-a-log    a directory as --log-json, a file as --tensorboard-dir, paths
               whose parent is missing or is a file
  peak-tflops  values that are no peak: 0, -1, nan, inf, '', 1e400, text
"""
import glob
import json
import os
import resource
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import arguments, check, report, run, sh, tiny_package

args = arguments()
W = args.work

pkg = tiny_package(args)
train = [args.runtime, "train", pkg, "--data", args.data]
sh(*train, "--steps", "1")  # compiles the kernels once, outside any limit


def json_steps(path):
    """The steps of a JSON log, or None if a line is not a whole JSON object."""
    try:
        return [json.loads(line)["step"] for line in open(path)]
    except (ValueError, KeyError):
        return None


def file_limit(nbytes):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return limit


# 1. A full disk: no row fits, or the limit falls part way through the run.
for nbytes in [0, 3000]:
    log = os.path.join(W, f"full-{nbytes}.jsonl")
    run("full-disk", train + ["--steps", "60", "--log-json", log], log, [W],
        preexec_fn=file_limit(nbytes))
    steps = json_steps(log)
    check("full-disk", steps == list(range(1, len(steps or []) + 1)) and len(steps) < 60,
          f"{log}: not whole lines of consecutive steps: {steps}")
    tb = os.path.join(W, f"tb-full-{nbytes}")
    run("full-disk", train + ["--steps", "60", "--tensorboard-dir", tb], tb, [W, tb],
        preexec_fn=file_limit(nbytes))


# 2. Held by another run.
def start_holder(flag, path):
    """A long run writing `path`, once it has started writing it."""
    holder = subprocess.Popen(train + ["--steps", "100000", flag, path],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and holder.poll() is None:
        written = glob.glob(os.path.join(path, "events.out.tfevents.*")) if flag == \
            "--tensorboard-dir" else [path]
        if any(os.path.exists(f) and os.path.getsize(f) > 0 for f in written):
            break
        time.sleep(0.1)
    return holder


for flag, path in [("--log-json", os.path.join(W, "held.jsonl")),
                   ("--tensorboard-dir", os.path.join(W, "tb-held"))]:
    holder = start_holder(flag, path)
    r = run("held", train + ["--steps", "2", flag, path], path, [W])
    check("held", r is not None and f"process {holder.pid}" in r.stderr,
          f"{flag} {path}: the message does not name the run holding it (process "
          f"{holder.pid}): {r.stderr[-300:] if r else ''}")
    holder.send_signal(signal.SIGTERM)  # it finishes its step and stops
    holder.wait(timeout=60)
    if flag == "--log-json":
        steps = json_steps(path)
        check("held", steps is not None and steps == list(range(1, len(steps) + 1)),
              f"{path}: the first run's log is torn: {steps}")
    again = subprocess.run(train + ["--steps", "1", flag, path], capture_output=True, text=True)
    check("held", again.returncode == 0,
          f"{flag} {path}: still refused after the first run ended: {again.stderr[-300:]}")

# 3. Paths that cannot be a log.
a_dir = os.path.join(W, "a-dir")
a_file = os.path.join(W, "a-file")
os.makedirs(a_dir, exist_ok=True)
open(a_file, "w").close()
for flag, path in [("--log-json", a_dir), ("--log-json", os.path.join(W, "missing", "l.jsonl")),
                   ("--log-json", os.path.join(a_file, "l.jsonl")),
                   ("--tensorboard-dir", a_file), ("--tensorboard-dir", os.path.join(a_file, "tb"))]:
    run("not-a-log", train + ["--steps", "1", flag, path], path, [W])

# 4. --peak-tflops values that are no peak.
for value in ["0", "-1", "nan", "inf", "", "1e400", "abc", "1e-400"]:
    run("peak-tflops", train + ["--steps", "1", "--peak-tflops", value], "--peak-tflops", [W])

report()
