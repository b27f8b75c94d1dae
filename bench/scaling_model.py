"""The data-parallel cost model of docs/scaling.md: step time of GPT-2 124M and
BERT-large on 8 to 1,024 GPUs (A100, H100) with mlc's gradient buckets.

    python3 bench/scaling_model.py [--markdown]

Everything it assumes is a named constant below, with its source. The compute
side is calibrated by our own measurement (bench/results/
2026-11-29-h200-torch-baseline.txt: GPT-2 124M, 8 x 1024 tokens, bf16,
torch.compile, 25.3 ms/step on an H200 = 28% MFU); mlc is held to that MFU.
"""
import argparse
import math

# --- Hardware (public specifications; achieved bandwidth ~85-90% of peak) ----
GPUS = {
    # dense bf16 FLOP/s, HBM B/s, NVLink bus bandwidth per GPU B/s (one
    # direction, what a ring moves), InfiniBand per GPU B/s (one NIC per GPU)
    "A100": dict(flops=312e12, hbm=2.0e12, nvlink=0.85 * 300e9, ib=0.9 * 25e9),  # NVLink3, HDR 200 Gb/s
    "H100": dict(flops=989e12, hbm=3.35e12, nvlink=0.85 * 450e9, ib=0.9 * 50e9),  # NVLink4, NDR 400 Gb/s
}
GPUS_PER_NODE = 8
LATENCY_NVLINK = 3e-6  # per tree step inside a node
LATENCY_IB = 8e-6  # per tree step across nodes
MFU = 0.28  # measured: torch.compile GPT-2 on an H200 (see the docstring)
BACKWARD_SHARE = 2 / 3  # backward is ~2/3 of a step's FLOPs

# --- Models (f32 gradients, as mlc trains today) ---------------------------
MODELS = {
    # parameters, tokens per GPU per step, the layer stack's share of the
    # parameters (ready progressively during backward) and the embedding
    # that is ready only at the end of backward (GPT-2's tied wte).
    "GPT-2 124M (8 x 1024 tokens/GPU)": dict(params=124.4e6, tokens=8 * 1024,
                                             late=50257 * 768),
    "BERT-large 340M (32 x 512 tokens/GPU)": dict(params=335e6, tokens=32 * 512,
                                                  late=30522 * 1024),
}
CAP_MB, FIRST_MB = 25, 1
BYTES = 4


def allreduce_seconds(size, n, gpu):
    """Ring all-reduce of `size` bytes over n GPUs: 2 (n-1)/n of the data over
    the slowest link (NVLink inside a node, the NIC across nodes), plus a
    tree's latency (NCCL's double binary tree for the latency term)."""
    if n == 1:
        return 0.0
    bw = gpu["nvlink"] if n <= GPUS_PER_NODE else gpu["ib"]
    lat = LATENCY_NVLINK if n <= GPUS_PER_NODE else LATENCY_IB
    return 2 * (n - 1) / n * size / bw + 2 * math.ceil(math.log2(n)) * lat


def buckets(model):
    """Bucket sizes in bytes, in the order backward finishes them: the layer
    stack (first bucket FIRST_MB, then CAP_MB), then the late embedding (a
    bucket of its own: larger than the cap, ready last)."""
    stack = (model["params"] - model["late"]) * BYTES
    sizes = [FIRST_MB * 1e6]
    left = stack - sizes[0]
    while left > 0:
        sizes.append(min(CAP_MB * 1e6, left))
        left -= sizes[-1]
    ready = []  # fraction of backward done when each bucket is complete
    done = 0
    for s in sizes:
        done += s
        ready.append(done / stack)
    sizes.append(model["late"] * BYTES)
    ready.append(1.0)
    return sizes, ready


def step(model_name, gpu_name, n):
    model, gpu = MODELS[model_name], GPUS[gpu_name]
    flops = 6 * model["params"] * model["tokens"]
    compute = flops / (MFU * gpu["flops"])
    backward = BACKWARD_SHARE * compute
    fwd = compute - backward
    sizes, ready = buckets(model)
    # One communication stream: a bucket starts when it is complete and the
    # previous one has finished.
    t = 0.0
    finish = []
    for s, r in zip(sizes, ready):
        t = max(t, fwd + r * backward) + allreduce_seconds(s, n, gpu)
        finish.append(t)
    comm = sum(allreduce_seconds(s, n, gpu) for s in sizes)
    exposed = max(0.0, finish[-1] - compute)
    # AdamW over the flat buffers reads p, g, m, v and writes p, m, v; the
    # global norm reads g once more.
    params_bytes = model["params"] * BYTES
    optimizer = 7 * params_bytes / gpu["hbm"]
    norm = params_bytes / gpu["hbm"]
    # Global clipping: the norm needs every bucket, then the whole update.
    global_clip = compute + exposed + norm + optimizer
    # Bucket-wise clipping: a bucket is clipped before its sum, and its
    # update can run when it arrives; only the last bucket's update (and
    # nothing of the norm) follows the last sum.
    last_share = sizes[-1] / sum(sizes)
    hidden_updates = max(0.0, optimizer * (1 - last_share) - exposed)
    bucket_clip = compute + exposed + optimizer - (optimizer * (1 - last_share) - hidden_updates)
    return dict(buckets=len(sizes), compute=compute, comm=comm, exposed=exposed,
                global_clip=global_clip, bucket_clip=bucket_clip,
                efficiency=compute / global_clip)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    for model in MODELS:
        sizes, _ = buckets(MODELS[model])
        print(f"\n{model}: {len(sizes)} buckets: first {sizes[0] / 1e6:.0f} MB, "
              f"{len(sizes) - 2} of <= {CAP_MB} MB, the embedding's {sizes[-1] / 1e6:.0f} MB last; "
              f"{sum(sizes) / 1e6:.0f} MB of f32 gradients\n")
        head = ("GPU", "GPUs", "compute ms", "all-reduce ms", "exposed ms",
                "step ms (global clip)", "step ms (bucket clip)", "scaling efficiency")
        if args.markdown:
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
        else:
            print("  ".join(f"{h:>14}" for h in head))
        for gpu in GPUS:
            for n in (8, 64, 256, 1024):
                r = step(model, gpu, n)
                row = (gpu, str(n), f"{1e3 * r['compute']:.1f}", f"{1e3 * r['comm']:.1f}",
                       f"{1e3 * r['exposed']:.1f}", f"{1e3 * r['global_clip']:.1f}",
                       f"{1e3 * r['bucket_clip']:.1f}", f"{100 * r['efficiency']:.0f}%")
                if args.markdown:
                    print("| " + " | ".join(row) + " |")
                else:
                    print("  ".join(f"{c:>14}" for c in row))


if __name__ == "__main__":
    main()
