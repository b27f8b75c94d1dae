"""Checks that a fused package launches fewer kernels than the unfused one.

    compare_counts.py FUSED.txt UNFUSED.txt

Reads the "mlc: @FN: K kernel launches, G GEMMs" lines that `mlc compile`
prints and exits 1 unless, for @train_step, fused K < unfused K and the GEMM
counts are equal (fusion never touches GEMMs).
"""
import re
import sys


def counts(path):
    found = {}
    for line in open(path):
        m = re.match(r"mlc: @(\w+): (\d+) kernel launches, (\d+) GEMMs", line)
        if m:
            found[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return found


fused, unfused = counts(sys.argv[1]), counts(sys.argv[2])
if "train_step" not in fused or "train_step" not in unfused:
    print("MISSING: no @train_step counts")
    sys.exit(1)
(fk, fg), (uk, ug) = fused["train_step"], unfused["train_step"]
if fk < uk and fg == ug:
    print(f"train_step: fused {fk} < unfused {uk} kernel launches, GEMMs equal")
    sys.exit(0)
print(f"NOT FEWER: fused {fk} kernels {fg} GEMMs, unfused {uk} kernels {ug} GEMMs")
sys.exit(1)
