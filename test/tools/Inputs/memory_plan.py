"""Checks `mlc compile --report-json`'s memory plan.

  memory_plan.py gpt2 REPORT.json VOCAB POSITIONS EMBD LAYERS BATCH SEQ
      the items of a GPT-2 against a hand computation: P parameters
      (wte, wpe, per layer 12 E^2 + 13 E, ln_f), 4 bytes each (f32) for the
      parameters and the gradients, 8 for AdamW's two moments, none for the
      accumulation sums (stated apart: 4 bytes each, allocated only by a run
      that accumulates); input_ids and labels as B x S int64; cuBLASLt's 32 MiB. Saved
      for backward, per layer, 16 f32 [B x S, E] tensors: the layer's input
      and ln_1 of it, q/k/v (3), the attention's output, the residual after
      it and ln_2 of it, the MLP's pre-activation (4) and GELU output (4);
      outside the layers the last residual and ln_f of it (2) and the
      labels, but not the logits (the loss step writes their gradient over
      them in place).
  memory_plan.py scale REPORT_B.json REPORT_2B.json
      the saved activations of every layer double when the micro-batch does.
  memory_plan.py runtime REPORT.json RUNTIME.json cpu|cuda [accumulating]
      what the runtime allocated (mlc train --memory-report) equals the
      report's items for that backend, item by item, and its total; with
      `accumulating` (a run with --global-batch above micro-batch x ranks)
      plus the gradient sums the report states apart.

Exits non-zero with every mismatch listed.
"""

import json
import sys


def fail(problems):
    for p in problems:
        print("MISMATCH:", p)
    sys.exit(1)


def memory(path):
    return json.load(open(path))["memory"]


def gpt2(args):
    report, (vocab, positions, embd, layers, batch, seq) = args[0], map(int, args[1:])
    m = memory(report)
    params = vocab * embd + positions * embd + layers * (12 * embd * embd + 13 * embd) + 2 * embd
    problems = []

    def expect(what, got, want):
        if got != want:
            problems.append(f"{what}: report {got}, by hand {want}")

    expect("parameter_count", m["parameter_count"], params)
    for backend in ("cpu", "cuda"):
        items = m[backend]
        expect(f"{backend} parameters", items["parameters"], 4 * params)
        expect(f"{backend} gradients", items["gradients"], 4 * params)
        expect(f"{backend} moments", items["moments"], 8 * params)
        expect(f"{backend} gradient_sums", items["gradient_sums"], 0)
        expect(f"{backend} sums when accumulating",
               m["gradient_sums_when_accumulating"][backend], 4 * params)
        expect(f"{backend} inputs", items["inputs"], 2 * batch * seq * 8)
        expect(f"{backend} total", items["total"],
               sum(v for k, v in items.items() if k != "total"))
    expect("cuda gemm_workspace", m["cuda"]["gemm_workspace"], 32 << 20)
    expect("cpu gemm_workspace", m["cpu"]["gemm_workspace"], 0)
    by_layer = {entry["layer"]: entry["bytes"] for entry in m["saved_by_layer"]}
    expect("layers with saved activations", sorted(k for k in by_layer if k >= 0),
           list(range(layers)))
    tokens = batch * seq
    for layer in range(layers):
        expect(f"layer {layer} saved", by_layer.get(layer), 16 * tokens * embd * 4)
    outside = by_layer.get(-1, 0)
    if not 2 * tokens * embd * 4 <= outside < 2 * tokens * embd * 4 + tokens * 8 + 64:
        problems.append(f"outside the layers: {outside} saved, expected 2 x {tokens} x {embd} "
                        f"x 4 and the labels (the logits, {tokens * vocab * 4}, are not saved)")
    expect("saved activations = the sum over the layers", m["saved_activations"],
           sum(by_layer.values()))
    expect("weight copies (f32: none)", m["weight_copies"], 0)
    expect("saved + weight copies + transient = arena",
           m["saved_activations"] + m["weight_copies"] + m["transient_peak"], m["cuda"]["arena"])
    if not 0 < m["saved_activations"] < m["cuda"]["arena"]:
        problems.append(f"saved activations {m['saved_activations']} not inside the arena")
    if problems:
        fail(problems)
    print(f"OK gpt2: {params} parameters, saved {m['saved_activations']} of arena "
          f"{m['cuda']['arena']}, total {m['cuda']['total']}")


def scale(args):
    one, two = memory(args[0]), memory(args[1])
    a = {e["layer"]: e["bytes"] for e in one["saved_by_layer"]}
    b = {e["layer"]: e["bytes"] for e in two["saved_by_layer"]}
    problems = [f"layer {k}: {a.get(k)} -> {b.get(k)}, not doubled"
                for k in sorted(set(a) | set(b)) if k >= 0 and b.get(k) != 2 * a.get(k, -1)]
    if problems:
        fail(problems)
    print("OK scale:", ", ".join(f"layer {k} {a[k]} -> {b[k]}" for k in sorted(a) if k >= 0))


def runtime(args):
    m, allocated, backend = memory(args[0]), json.load(open(args[1])), args[2]
    report = dict(m[backend])
    if args[3:] == ["accumulating"]:
        sums = m["gradient_sums_when_accumulating"][backend]
        report["gradient_sums"] += sums
        report["total"] += sums
    elif args[3:]:
        fail([f"unknown argument {args[3:]}"])
    problems = [f"{k}: report {report.get(k)}, runtime {allocated.get(k)}"
                for k in sorted(set(report) | set(allocated) - {"device"})
                if report.get(k) != allocated.get(k)]
    if problems:
        fail(problems)
    print(f"OK {backend}: runtime allocated {allocated['total']} bytes, as the report states")


{"gpt2": gpt2, "scale": scale, "runtime": runtime}[sys.argv[1]](sys.argv[2:])
