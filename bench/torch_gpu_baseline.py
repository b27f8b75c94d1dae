"""PyTorch's GPT-2 training step on a GPU: the peer mlc's CUDA backend will face.

    python3 bench/torch_gpu_baseline.py [--steps 10] [--batch 8] [--dtype bf16|fp32]

HuggingFace GPT2LMHeadModel (small, 124M, built from its config), micro-batch 8,
seq 1024, fused AdamW, clipping at 1.0; eager and torch.compile. bf16: autocast
(TF32 for what stays f32); fp32: full f32, TF32 off (what mlc's f32 GEMMs
compute). Prints the median step time, tokens/s and MFU = (6 N + 12 L S E) FLOP
per token over the H200's dense peak (bf16 989 TFLOP/s; fp32 67 TFLOP/s,
datasheet).
"""

import argparse
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seq", type=int, default=1024)
ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
ap.add_argument("--modes", default="eager,compile")
args = ap.parse_args()
bf16 = args.dtype == "bf16"
torch.backends.cuda.matmul.allow_tf32 = bf16
torch.backends.cudnn.allow_tf32 = bf16
dev = "cuda"
cfg = GPT2Config(resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
B, S = args.batch, args.seq
PEAK = 989e12 if bf16 else 67e12


def run(compiled):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).to(dev)
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    step_model = torch.compile(model) if compiled else model
    ids = torch.randint(0, cfg.vocab_size, (B, S), device=dev)
    times = []
    for i in range(args.steps + 3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = step_model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    ms = 1e3 * statistics.median(times)
    tokens = B * S
    flops = (6 * n + 12 * cfg.n_layer * S * cfg.n_embd) * tokens
    print(f"gpt2 small ({n / 1e6:.0f}M) B{B} S{S} {args.dtype} {'torch.compile' if compiled else 'eager'}: "
          f"{ms:.1f} ms/step, {tokens / ms * 1e3:.0f} tokens/s, MFU {flops / (ms / 1e3) / PEAK:.3f}")


print(torch.cuda.get_device_name(), "torch", torch.__version__)
for mode in args.modes.split(","):
    run(mode == "compile")
