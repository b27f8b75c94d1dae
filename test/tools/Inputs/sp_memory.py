"""Checks that --sequence-parallel divides the saved activations per rank by
the tensor-parallel size T, from three `mlc compile --report-json` files of
one model and micro-batch: T = 1, T, and T with --sequence-parallel.

  sp_memory.py T1.json TP.json SP.json T TOKENS VOCAB

Per rank, with --sequence-parallel:
  - parameters, gradients and moments are those of T without it (the
    stream's norms are replicated either way);
  - every layer but the last saves exactly 1/T of its bytes at T = 1: the
    stream's values are the rank's 1/T of the tokens, the regions' values
    its 1/T of the heads and hidden units, and a region's gathered input is
    gathered again in backward, not saved;
  - in all, the saved activations are 1/T of T = 1's plus what the
    vocabulary-parallel loss keeps and the fused loss at T = 1 does not:
    the exponentials of the rank's logits (f32) and its target-column mask
    (i1), TOKENS x VOCAB / T each (its shift is detached, so the logits are
    not kept for the max); within 64 bytes per token (the per-token
    vectors: the loss's max, sums and weights, the stream's row mask, each a
    64-byte slice or so). (The last layer's is compared only in the total: at
    T = 1 the final norm is a kernel outside the layers, under
    --sequence-parallel it joins the last layer's residual add.)
  - and they are fewer than at T without it.

Prints one OK line with the numbers, or exits non-zero with every mismatch.
"""

import json
import sys


def main(args):
    one, tp, sp = (json.load(open(p))["memory"] for p in args[:3])
    t, tokens, vocab = map(int, args[3:6])
    problems = []
    for key in ("parameter_count",):
        if sp[key] != tp[key]:
            problems.append(f"{key}: {sp[key]} with --sequence-parallel, {tp[key]} without")
    for item in ("parameters", "gradients", "moments"):
        if sp["cpu"][item] != tp["cpu"][item] or sp["cuda"][item] != tp["cuda"][item]:
            problems.append(f"{item}: {sp['cpu'][item]} with --sequence-parallel, "
                            f"{tp['cpu'][item]} without")
    by1 = {e["layer"]: e["bytes"] for e in one["saved_by_layer"]}
    bysp = {e["layer"]: e["bytes"] for e in sp["saved_by_layer"]}
    layers = sorted(k for k in by1 if k >= 0)
    if sorted(k for k in bysp if k >= 0) != layers:
        problems.append(f"layers {sorted(bysp)} with --sequence-parallel, {sorted(by1)} at T = 1")
    for layer in layers[:-1]:
        if bysp.get(layer, 0) * t != by1[layer]:
            problems.append(f"layer {layer} saves {bysp.get(layer)}, not 1/{t} of "
                            f"{by1[layer]} (T = 1)")
    loss = tokens * (vocab // t) * (4 + 1)
    rest = sp["saved_activations"] - loss - one["saved_activations"] // t
    if not 0 <= rest <= 64 * tokens:
        problems.append(f"saved {sp['saved_activations']} = 1/{t} of {one['saved_activations']} "
                        f"(T = 1) + the loss's {loss} + {rest}, not within 64 x {tokens} bytes")
    if not sp["saved_activations"] < tp["saved_activations"]:
        problems.append(f"saved {sp['saved_activations']} with --sequence-parallel, not fewer "
                        f"than {tp['saved_activations']} without")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"OK sequence-parallel: saved {one['saved_activations']} (T = 1) -> "
          f"{tp['saved_activations']} (T = {t}) -> {sp['saved_activations']} "
          f"(T = {t}, sequence-parallel: 1/{t} + the loss's {loss} + {rest})")


if __name__ == "__main__":
    main(sys.argv[1:])
