"""Variable-length attention's roofline FLOPs are the padded form's (their
upper bound: each micro-batch row one sequence), forward and backward, and
so are the model FLOPs MFU divides.

    roofline_varlen.py gpt2.json gpt2-packed.json bert.json bert-varlen.json

Exits non-zero, naming the pair, on any mismatch.
"""
import json
import sys


def load(path):
    return json.load(open(path))["roofline"]


def compare(what, padded, varlen):
    a, b = load(padded), load(varlen)
    if a["attention_upper_bound"] or not b["attention_upper_bound"]:
        sys.exit(f"FAIL {what}: attention_upper_bound {a['attention_upper_bound']} (padded), "
                 f"{b['attention_upper_bound']} (variable-length)")
    fa, fb = a["groups"]["attention"]["flops"], b["groups"]["attention"]["flops"]
    if fa <= 0 or abs(fa - fb) > 1e-9 * fa:
        sys.exit(f"FAIL {what}: attention FLOPs {fb} (variable-length) != {fa} (padded)")
    if abs(a["model_flops"] - b["model_flops"]) > 1e-9 * a["model_flops"]:
        sys.exit(f"FAIL {what}: model FLOPs {b['model_flops']} != {a['model_flops']}")
    print(f"{what} attention GFLOP {fb / 1e9:.6f} = padded {fa / 1e9:.6f}, model FLOPs equal")


compare("packed", sys.argv[1], sys.argv[2])
compare("unpadded BERT", sys.argv[3], sys.argv[4])
print("ROOFLINE VARLEN OK")
