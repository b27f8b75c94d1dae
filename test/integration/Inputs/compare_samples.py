"""Compares the samples and evaluation losses of two `mlc train` runs.

    compare_samples.py A.err B.err A.jsonl B.jsonl TOLERANCE

A.err and B.err are the runs' stderr (--progress plain): their
`sample N/M | ...` lines (bytes: a sample of untrained weights need not be
UTF-8) must be the same, in the same order, and there must be some. The logs'
val_loss and test_loss rows must agree within the relative TOLERANCE.
Prints `SAMPLES n same` and `EVAL n within TOLERANCE` (or what differs) and
exits 1 on any difference.
"""
import json
import sys


def samples(path):
    return [line for line in open(path, "rb").read().split(b"\n") if line.startswith(b"sample ")]


def evals(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return [(r["step"], k, r[k]) for r in rows for k in ("val_loss", "test_loss") if k in r]


ok = True
a, b = samples(sys.argv[1]), samples(sys.argv[2])
if a == b and a:
    print(f"SAMPLES {len(a)} same")
else:
    ok = False
    print(f"SAMPLES differ: {len(a)} against {len(b)}")
    for x, y in zip(a, b):
        if x != y:
            print(" ", x[:60], "\n ", y[:60])
ea, eb = evals(sys.argv[3]), evals(sys.argv[4])
tol = float(sys.argv[5])
if [e[:2] for e in ea] != [e[:2] for e in eb] or not ea:
    ok = False
    print(f"EVAL rows differ: {[e[:2] for e in ea]} against {[e[:2] for e in eb]}")
else:
    worst = max(abs(x[2] - y[2]) / max(abs(y[2]), 1e-30) for x, y in zip(ea, eb))
    print(f"max rel diff {worst:.1e}")
    if worst <= tol:
        print(f"EVAL {len(ea)} within {tol:g}")
    else:
        ok = False
        print(f"EVAL differ (tolerance {tol:g})")
sys.exit(0 if ok else 1)
