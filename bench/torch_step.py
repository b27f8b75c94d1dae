"""PyTorch's side of bench/train_step.py: the same model, weights, batches and
AdamW as mlc's step, timed in whichever interpreter runs this file.

    PYTHON bench/torch_step.py REQUEST.json RESULT.json

train_step.py writes the request and reads the result, so one bench measures
Debian's torch 1.13 (build/venv/bin/python, the parity tests' reference) and a
current torch from a side environment (eager and torch.compile) beside the
same mlc run. The request:

    {"model": "gpt2" | "llama", "dims": {...}, "weights": W.safetensors,
     "batches": DIR (input_ids.npy, labels.npy: [steps, B, S]), "steps": n,
     "lr", "weight_decay", "betas", "eps", "clip",
     "threads": [1, cores], "compile": true}

Each setting trains `steps` steps from the same weights: zero_grad, forward
with the next-token loss, backward, clip_grad_norm_, AdamW (decay on
matrices only, mlc's convention). Eager runs once per thread count; with
"compile" and torch >= 2, torch.compile'd forward (Inductor's C++ backend,
which compiles for the thread count it is traced at) runs once more per
thread count. The result, per setting: the label, the
median ms/step of the steps after the first two (torch.compile compiles the
forward and backward graphs in step 1, so its compile time is never in the
median; it is reported as first_ms), and every step's loss, which the bench
compares with mlc's before it prints any ratio.

gpt2 is test/integration/Inputs/torch_models.py's GPT-2 (HF's op for op);
llama is transformers' own LlamaForCausalLM, as the parity tests use, with
SDPA attention where the torch has it (>= 2) and HF's eager attention on 1.13.
"""

import json
import os
import statistics
import sys
import time

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "test", "integration", "Inputs"))
import torch_models as tm  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def blas():
    """MKL in PyPI's wheels; Debian's torch says BLAS_INFO=generic, the system's
    libblas.so.3, which is OpenBLAS (with its own threads) on mlc's machines."""
    return "MKL" if "BLAS_INFO=mkl" in torch.__config__.show() else "OpenBLAS"


def gpt2_model(req, weights):
    """(parameters, step loss function) of the GPT-2 reference."""
    p = {k: torch.from_numpy(v).requires_grad_(True) for k, v in weights.items()}
    L, H = req["dims"]["layers"], req["dims"]["heads"]

    def loss(fwd, ids):
        return fwd(p, ids, ids, L, H)[0]

    return p, loss, tm.gpt2_forward


def llama_attention():
    return "sdpa" if TORCH2 else "eager"


def llama_model(req, weights):
    """(parameters, step loss function) of transformers' LlamaForCausalLM."""
    try:
        import transformers
    except ImportError:
        sys.exit(f"bench/torch_step.py: --model llama needs transformers in {sys.executable}; "
                 "run the bench with build/venv/bin/python or pass --torch build/venv/bin/python")
    d = req["dims"]
    cfg = transformers.LlamaConfig(
        vocab_size=d["vocab"], hidden_size=d["embd"], intermediate_size=d["intermediate"],
        num_hidden_layers=d["layers"], num_attention_heads=d["heads"],
        num_key_value_heads=d["kv_heads"], max_position_embeddings=d["seq"],
        rms_norm_eps=d["rms_norm_eps"], rope_theta=d["rope_theta"],
        tie_word_embeddings=False, attention_dropout=0.0, use_cache=False)
    cfg._attn_implementation = llama_attention()
    model = transformers.LlamaForCausalLM(cfg)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    model.train()

    def loss(fwd, ids):
        return fwd(input_ids=ids, labels=ids).loss

    return dict(model.named_parameters()), loss, model


MODELS = {"gpt2": gpt2_model, "llama": llama_model}


def train(req, threads, compiled):
    """One setting: `steps` timed steps from the request's weights."""
    torch.set_num_threads(threads)
    weights = tm.read_safetensors(req["weights"])
    params, loss_of, fwd = MODELS[req["model"]](req, weights)
    if compiled:
        torch._dynamo.reset()  # a graph traced at another thread count is not reused
        fwd = torch.compile(fwd)
    opt = tm.adamw(params, req["lr"], req["weight_decay"], tuple(req["betas"]), req["eps"])
    ids = np.load(os.path.join(req["batches"], "input_ids.npy"))
    times, losses = [], []
    for t in range(req["steps"]):
        batch = torch.from_numpy(ids[t])
        start = time.perf_counter()
        opt.zero_grad()
        loss = loss_of(fwd, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), req["clip"])
        opt.step()
        times.append(1e3 * (time.perf_counter() - start))
        losses.append(loss.item())
    return {"ms": statistics.median(times[2:]), "first_ms": times[0], "losses": losses}


def main():
    req = json.load(open(sys.argv[1]))
    runs = []
    for compiled in [False] + ([True] if req["compile"] and TORCH2 else []):
        for n in req["threads"]:
            label = ("1 omp thread + OpenBLAS threads" if blas() == "OpenBLAS" else "1 thread") \
                if n == 1 else f"{n} omp threads"
            runs.append(dict(train(req, n, compiled), mode="compile" if compiled else "eager",
                             label=label))
    if req["model"] == "llama":
        for r in runs:
            r["label"] += f", {llama_attention()} attention"
    json.dump({"torch": torch.__version__, "python": sys.executable, "blas": blas(),
               "runs": runs}, open(sys.argv[2], "w"), indent=1)


if __name__ == "__main__":
    main()
