"""Compares the per-step losses of two `mlc train --log-json` logs.

    compare_logs.py A.jsonl B.jsonl TOLERANCE

Prints one summary line, then MATCH (exit 0) when every step's loss agrees
within the relative TOLERANCE, or MISMATCH (exit 1) otherwise. Tests anchor
the check ({{^}}MATCH{{$}}) and rely on the exit status too.
"""
import json
import sys


def losses(path):
    """Training losses; validation lines (val_loss) are not steps."""
    return [row["loss"] for row in map(json.loads, open(path)) if "loss" in row]


a, b = losses(sys.argv[1]), losses(sys.argv[2])
tol = float(sys.argv[3])
if len(a) != len(b) or not a:
    print(f"MISMATCH: {len(a)} steps against {len(b)}")
    sys.exit(1)
worst = max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b))
print(f"{len(a)} steps, loss {b[0]:.5f} -> {b[-1]:.5f}, max rel diff {worst:.2e}")
if worst <= tol:
    print("MATCH")
    sys.exit(0)
print(f"MISMATCH (tolerance {tol})")
sys.exit(1)
