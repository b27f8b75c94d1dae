"""Checks `mlc compile --roofline ... --report-json` against numbers worked
out by hand for GPT-2 tiny (2 layers, E = 128, 4 heads of 32, vocab 256,
1024 positions) at micro-batch 2, seq-len 16, f32: 32 tokens.

    roofline_check.py h200.json custom.json launch.json

Exits non-zero, naming the number, on any mismatch.
"""
import json
import sys

BW, F32 = 4.3e12, 60e12          # the h200 preset: copy bandwidth, f32 GEMM rate
T, E, H, D, S, B, L = 32, 128, 4, 32, 16, 2, 2
# Parameters: per layer 2 LayerNorms (4 E), c_attn E x 3E + 3E, c_proj E x E + E,
# c_fc E x 4E + 4E, mlp c_proj 4E x E + E; wte 256 x E, wpe 256 x E, ln_f 2 E.
N = L * (4 * E + E * 3 * E + 3 * E + E * E + E + E * 4 * E + 4 * E + 4 * E * E + E) \
    + 256 * E + 256 * E + 2 * E


def load(path):
    return json.load(open(path))["roofline"]


def check(what, got, want, rel=1e-9):
    if abs(got - want) > rel * max(abs(want), 1e-30):
        sys.exit(f"FAIL {what}: {got} != {want}")


def item(r, pred, what):
    found = [i for i in r["items"] if pred(i)]
    if len(found) != 1:
        sys.exit(f"FAIL {what}: {len(found)} rows match")
    return found[0]


r = load(sys.argv[1])
check("parameters", r["parameters"], N)
check("tokens", r["tokens"], T)

# c_fc with its GELU epilogue: out = gelu(x W + b), pre = x W + b.
# Bytes: x (T x E), W (E x 4E), out and pre (T x 4E), bias (4E), all f32.
fc = item(r, lambda i: i["name"] == "gemm 32x512x128 f32->f32 +bias +gelu", "c_fc GEMM")
per = 4 * (T * E + E * 4 * E + 2 * T * 4 * E + 4 * E)
check("c_fc launches", fc["launches"], L)
check("c_fc bytes", fc["bytes"], L * per)
check("c_fc flops", fc["flops"], L * 2 * T * 4 * E * E)
check("c_fc time (memory-bound)", fc["s"], L * per / BW)
assert fc["bound"] == "memory", fc

# AdamW: one pass reading p, g, m, v and writing p, m, v (f32).
adam = item(r, lambda i: i["kind"] == "optimizer", "AdamW")
check("AdamW bytes", adam["bytes"], 7 * 4 * N)

# The first LayerNorm, fused with the embeddings' sum: token rows (T x E),
# position rows (S x E, the same for both sequences: a broadcast, read once),
# weight and bias (E each, once), the residual stream and the normalized
# rows written (T x E each).
ln = item(r, lambda i: i["kind"] == "rows" and i["bytes"] == 4 * (3 * T * E + S * E + 2 * E),
           "embeddings + LayerNorm")
check("embeddings + LayerNorm launches", ln["launches"], 1)

# Causal attention, B x H x S x D per tensor (f32): forward o, q, k, v; backward
# dq, dk, dv, do, q, k, v. FLOPs 2 B H S S (D + D) / 2, backward 2.5x.
fwd_flops = 2 * B * H * S * S * 2 * D / 2
tensor = B * H * S * D * 4
att = [i for i in r["items"] if i["group"] == "attention"]
fwd = item(r, lambda i: i["group"] == "attention" and i["bytes"] == L * 4 * tensor, "attention")
bwd = item(r, lambda i: i["group"] == "attention" and i["bytes"] == L * 7 * tensor,
           "attention backward")
check("attention flops", fwd["flops"], L * fwd_flops)
check("attention backward flops", bwd["flops"], L * 2.5 * fwd_flops)
check("attention launches", fwd["launches"] + bwd["launches"], 2 * L)

# The step is the sum of its rows, and of its groups; MFU's FLOPs are
# 6 N T + 12 L S E T (= 3 x forward attention, not halved).
check("step = sum of rows", r["step_s"], sum(i["s"] for i in r["items"]))
check("step = sum of groups", r["step_s"], sum(g["s"] for g in r["groups"].values()))
check("model flops", r["model_flops"], 6 * N * T + 12 * L * S * E * T)
check("tokens/s", r["tokens_per_s"], T / r["step_s"])
check("MFU", r["mfu"], r["model_flops"] / r["step_s"] / 66.9e12)
times = [i["s"] for i in r["items"]]
assert times == sorted(times, reverse=True), "rows not sorted by time"

# A device given whole (bw=1,bf16=100,f32=10): c_fc is now compute-bound.
c = load(sys.argv[2])
fc = item(c, lambda i: i["name"] == "gemm 32x512x128 f32->f32 +bias +gelu", "custom c_fc")
check("custom c_fc time", fc["s"], L * 2 * T * 4 * E * E / 10e12)
assert fc["bound"] == "compute", fc

# h200 with 2 us per launch: the step grows by launches x 2 us.
l = load(sys.argv[3])
check("launch overhead", l["step_s"], r["step_s"] + r["launches"] * 2e-6)
print("ROOFLINE OK", len(r["items"]), "rows,", r["launches"], "launches")
