"""The GPT-2 of the CPU step benchmarks (bench/train_step.py, bench/packed_step.py).

Its flags (the mlc binary, steps and the model's shape: by default n_layer=4,
n_embd=256, n_head=4, vocab 8192, micro-batch 8, seq 256), its config with
dropout off, and its initial weights, written once for every run to share.
"""

import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "test", "integration", "Inputs"))
import torch_models as tm  # noqa: E402


def add_model_arguments(ap, steps):
    ap.add_argument("--mlc", default=os.path.join(here, "..", "build", "bin", "mlc"))
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)


def model_config(args):
    """`--config` of the builtin gpt2 for these shapes, dropout off."""
    return (f"tiny,vocab_size={args.vocab},n_positions={args.seq},n_embd={args.embd},"
            f"n_layer={args.layers},n_head={args.heads},resid_pdrop=0,embd_pdrop=0,attn_pdrop=0")


def initial_weights(args, work):
    """Seeded initial parameters (HF names) in WORK/w.safetensors; returns the
    path and the parameters."""
    params = tm.init_params(tm.gpt2_shapes(args.vocab, args.seq, args.embd, args.layers),
                            seed=1, dtype=torch.float32)
    path = os.path.join(work, "w.safetensors")
    tm.write_safetensors(path, params)
    return path, params
