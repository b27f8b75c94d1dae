"""Compares the per-step losses of two `mlc train --log-json` logs."""
import json
import sys

def losses(path):
    """Training losses; validation lines (val_loss) are not steps."""
    return [row["loss"] for row in map(json.loads, open(path)) if "loss" in row]


a, b = losses(sys.argv[1]), losses(sys.argv[2])
tol = float(sys.argv[3])
assert len(a) == len(b) and a, (len(a), len(b))
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"{len(a)} steps, loss {b[0]:.5f} -> {b[-1]:.5f}, max rel diff {worst:.2e}")
print("MATCH" if worst <= tol else f"MISMATCH (tolerance {tol})")
