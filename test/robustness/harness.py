"""What every robustness family shares: run a tool on a bad input and check how it fails.

A family script builds its cases, calls `run` (or `expect`) for each, and ends
with `report()`, which prints one line per boundary with its count and exits 1
listing any failure. A case passes when the tool
  * exits cleanly: a status in 1..127 (never a signal or a hang; 30 s limit),
  * says on stderr what is wrong (the flag or the file, `must_name`),
  * leaves nothing behind: no temporary files in `out_dirs`.
"""
import argparse
import glob
import os
import subprocess
import sys

failures, counts = [], {}


def arguments(*extra):
    """The command line every family takes (--mlc, --runtime, --work, --data and
    `extra`, (flag, help) pairs of optional ones); the work directory is
    created, and `work` is its absolute path."""
    ap = argparse.ArgumentParser()
    for flag in ("--mlc", "--runtime", "--work", "--data"):
        ap.add_argument(flag, required=True)
    for flag, help in extra:
        ap.add_argument(flag, help=help)
    args = ap.parse_args()
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    return args


def count(boundary):
    counts[boundary] = counts.get(boundary, 0) + 1


def run(boundary, argv, must_name, out_dirs=(), timeout=30, **kwargs):
    """A case that must fail cleanly; returns the CompletedProcess (None on a hang)."""
    count(boundary)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        failures.append(f"{boundary}: hang: {' '.join(argv)}")
        return None
    where = f"{boundary}: {' '.join(argv)[-160:]}"
    if not 1 <= r.returncode <= 127:
        failures.append(f"{where}: exit {r.returncode}\n{r.stderr[-400:]}")
    elif must_name not in r.stderr:
        failures.append(f"{where}: the message does not name {must_name!r}: {r.stderr[-300:]}")
    for d in out_dirs:
        left = glob.glob(os.path.join(d, "*.tmp*")) + glob.glob(os.path.join(d, ".*.tmp*"))
        if left:
            failures.append(f"{where}: left {left}")
    return r


def tiny_package(args, name="pkg"):
    """A one-layer tiny GPT-2 package (micro-batch 2, 8 tokens) in the work
    directory, the families' usual subject; returns its path."""
    pkg = os.path.join(args.work, name)
    sh(args.mlc, "compile", "gpt2", "--config", "tiny,n_layer=1", "--micro-batch", "2",
       "--seq-len", "8", "-o", pkg)
    return pkg


def check(boundary, ok, what):
    """A case decided by the caller: `ok` false records `what` as a failure."""
    count(boundary)
    if not ok:
        failures.append(f"{boundary}: {what}")


def sh(*argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)


def report():
    for boundary, n in counts.items():
        print(f"{boundary}: {n} cases")
    if failures:
        print(f"ROBUSTNESS FAILURES ({len(failures)}):")
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print(f"ROBUSTNESS OK: {sum(counts.values())} cases")
