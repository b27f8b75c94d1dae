"""Compares the per-step losses of two `mlc train --log-json` logs."""
import json
import sys

a = [json.loads(line)["loss"] for line in open(sys.argv[1])]
b = [json.loads(line)["loss"] for line in open(sys.argv[2])]
tol = float(sys.argv[3])
assert len(a) == len(b) and a, (len(a), len(b))
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"{len(a)} steps, loss {b[0]:.5f} -> {b[-1]:.5f}, max rel diff {worst:.2e}")
print("MATCH" if worst <= tol else f"MISMATCH (tolerance {tol})")
