"""Checks `mlc compile --tensor-parallel T --report-json`'s per-rank memory
and collectives for a GPT-2 against a hand computation.

  tp_report.py memory REPORT.json VOCAB POSITIONS EMBD LAYERS BATCH SEQ T
      Megatron's layout, per rank: split over T (each rank 1/T) are the
      token table (V E, vocabulary-parallel), per layer c_attn (3 E^2 + 3 E),
      attn.c_proj's weight (E^2), c_fc (4 E^2 + 4 E) and mlp.c_proj's weight
      (4 E^2): 12 E^2 + 7 E; replicated are the positions (P E), per layer
      ln_1, ln_2 and the two row-parallel biases (6 E), and ln_f (2 E).
      Parameters and gradients 4 bytes each, AdamW's moments 8.
      Tensor-parallel all-reduces of @train_step, N = B S tokens:
        forward:  sum: the lookup's and per layer the attention's and the
                  MLP's row-parallel products, [N, E] f32 each (1 + 2 L);
                  the loss's exp-sums and target logit, [N] f32 each (2);
                  max: the loss's shift, [N] f32 (1)
        backward: per layer the two regions' tp_copy duals, [N, E] (2 L);
                  the LM head's tp_copy dual, [N, E] (1) (the shift is
                  detached: it has no dual)
  tp_report.py overlap REPORT.json
      whether the data-parallel buckets' exposed time is above zero and
      below their time on the wire (the first ones ran under backward).
  tp_report.py roofline REPORT.json
      prints the roofline's communication numbers (us, exact) for FileCheck,
      and checks that the step with communication is the kernels' step plus
      the tensor-parallel time plus the exposed data-parallel time, and that
      tokens/s and MFU follow from it.

Exits non-zero with every mismatch listed.
"""

import json
import math
import sys


def memory(args):
    report, (vocab, positions, e, layers, batch, seq, t) = args[0], map(int, args[1:])
    m = json.load(open(report))["memory"]
    split = vocab * e + layers * (12 * e * e + 7 * e)
    replicated = positions * e + layers * 6 * e + 2 * e
    rank = split // t + replicated
    n = batch * seq
    problems = []

    def expect(what, got, want):
        if got != want:
            problems.append(f"{what}: report {got}, by hand {want}")

    tp = m["tensor_parallel"]
    expect("size", tp["size"], t)
    expect("parameter_count (this rank's)", m["parameter_count"], rank)
    expect("split_parameters (this rank's)", tp["split_parameters"], split // t)
    expect("replicated_parameters", tp["replicated_parameters"], replicated)
    expect("model_parameters", tp["model_parameters"], split + replicated)
    for backend in ("cpu", "cuda"):
        expect(f"{backend} parameters", m[backend]["parameters"], 4 * rank)
        expect(f"{backend} gradients", m[backend]["gradients"], 4 * rank)
        expect(f"{backend} moments", m[backend]["moments"], 8 * rank)
    want = {
        ("forward", "tp_all_reduce"): (1 + 2 * layers + 2, 4 * n * ((1 + 2 * layers) * e + 2)),
        ("forward", "tp_all_reduce max"): (1, 4 * n),
        ("backward", "tp_all_reduce"): (2 * layers + 1, 4 * n * (2 * layers + 1) * e),
    }
    got = {(c["phase"], c["op"]): (c["count"], c["bytes"]) for c in tp["collectives"]}
    expect("collectives (count, bytes) by phase and op", got, want)
    if problems:
        for p in problems:
            print("MISMATCH:", p)
        sys.exit(1)
    print(f"OK memory: {rank:,} parameters per rank ({split:,} / {t} split + {replicated:,} "
          f"replicated), {sum(c for c, _ in want.values())} tensor-parallel all-reduces")


def roofline(args):
    r = json.load(open(args[0]))["roofline"]
    for c in r["collectives"]:
        print(f"{c['group']} {c['phase']} {c['op']}: {c['count']} x, {c['bytes']:.0f} B, "
              f"{c['s'] * 1e6:.5f} us")
    print(f"tp {r['tp_s'] * 1e6:.5f} us, dp wire {r['dp_wire_s'] * 1e6:.5f} us, "
          f"dp exposed {r['dp_exposed_s'] * 1e6:.5f} us")
    step = r["step_s"] + r["tp_exposed_s"] + r["dp_exposed_s"]
    t = r["tensor_parallel"]
    checks = [
        ("step with communication", r["step_with_comm_s"], step),
        ("tokens/s per GPU", r["tokens_per_s_with_comm"], r["tokens"] / t / step),
        ("MFU", r["mfu_with_comm"], r["model_flops"] / step / r["mfu_peak"]),
    ]
    bad = [f"{w}: {g} != {x}" for w, g, x in checks if not math.isclose(g, x, rel_tol=1e-8)]
    # The asynchronous all-reduces' wire time is in tp_s; only what the
    # step waits for is exposed.
    if not 0 <= r["tp_s"] - r["tp_exposed_s"] <= r["tp_async_s"] * (1 + 1e-12):
        bad.append(f"tp exposed {r['tp_exposed_s']} outside [tp - async, tp]")
    if bad:
        print("MISMATCH:", "; ".join(bad))
        sys.exit(1)
    print("OK step = kernels + exposed tensor-parallel + exposed data-parallel")


def overlap(args):
    r = json.load(open(args[0]))["roofline"]
    buckets = sum(c["count"] for c in r["collectives"] if c["op"] == "all_reduce")
    ok = 0 < r["dp_exposed_s"] < r["dp_wire_s"]
    print(f"buckets {buckets} {'overlapped' if ok else 'NOT overlapped'}: "
          f"{r['dp_exposed_s'] * 1e6:.3f} of {r['dp_wire_s'] * 1e6:.3f} us exposed")
    # The asynchronous tensor-parallel all-reduces: part of their time runs
    # under the weight-gradient GEMMs.
    async_sums = r["tp_async_bytes"] > 0 and r["tp_exposed_s"] < r["tp_s"]
    print(f"tensor-parallel {r['tp_async_bytes']:.0f} B asynchronous "
          f"{'overlapped' if async_sums else 'NOT overlapped'}: "
          f"{r['tp_exposed_s'] * 1e6:.3f} of {r['tp_s'] * 1e6:.3f} us exposed")


if __name__ == "__main__":
    {"memory": memory, "roofline": roofline, "overlap": overlap}[sys.argv[1]](sys.argv[2:])
