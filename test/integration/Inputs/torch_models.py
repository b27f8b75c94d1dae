"""Reference PyTorch implementations of the models mlc builds, for parity tests.

GPT-2 follows transformers' GPT2LMHeadModel and BERT its BertForMaskedLM op for
op, with parameters held in a dict under HF checkpoint names, so the same
weights (exchanged as safetensors) drive both mlc and PyTorch.
"""

import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F


def gpt2_shapes(V, P, E, L):
    s = {"transformer.wte.weight": (V, E), "transformer.wpe.weight": (P, E)}
    for i in range(L):
        p = f"transformer.h.{i}."
        s.update({p + "ln_1.weight": (E,), p + "ln_1.bias": (E,),
                  p + "attn.c_attn.weight": (E, 3 * E), p + "attn.c_attn.bias": (3 * E,),
                  p + "attn.c_proj.weight": (E, E), p + "attn.c_proj.bias": (E,),
                  p + "ln_2.weight": (E,), p + "ln_2.bias": (E,),
                  p + "mlp.c_fc.weight": (E, 4 * E), p + "mlp.c_fc.bias": (4 * E,),
                  p + "mlp.c_proj.weight": (4 * E, E), p + "mlp.c_proj.bias": (E,)})
    s.update({"transformer.ln_f.weight": (E,), "transformer.ln_f.bias": (E,)})
    return s


def bert_shapes(V, P, T, E, L, I):
    s = {"bert.embeddings.word_embeddings.weight": (V, E),
         "bert.embeddings.position_embeddings.weight": (P, E),
         "bert.embeddings.token_type_embeddings.weight": (T, E),
         "bert.embeddings.LayerNorm.weight": (E,), "bert.embeddings.LayerNorm.bias": (E,)}
    for i in range(L):
        p = f"bert.encoder.layer.{i}."
        for n in ("query", "key", "value"):
            s[p + f"attention.self.{n}.weight"] = (E, E)
            s[p + f"attention.self.{n}.bias"] = (E,)
        s.update({p + "attention.output.dense.weight": (E, E),
                  p + "attention.output.dense.bias": (E,),
                  p + "attention.output.LayerNorm.weight": (E,),
                  p + "attention.output.LayerNorm.bias": (E,),
                  p + "intermediate.dense.weight": (I, E), p + "intermediate.dense.bias": (I,),
                  p + "output.dense.weight": (E, I), p + "output.dense.bias": (E,),
                  p + "output.LayerNorm.weight": (E,), p + "output.LayerNorm.bias": (E,)})
    s.update({"cls.predictions.transform.dense.weight": (E, E),
              "cls.predictions.transform.dense.bias": (E,),
              "cls.predictions.transform.LayerNorm.weight": (E,),
              "cls.predictions.transform.LayerNorm.bias": (E,),
              "cls.predictions.bias": (V,)})
    return s


def llama_shapes(V, E, I, L, H, HKV):
    """LlamaForCausalLM's parameters by HF name: no biases, an untied head,
    H query heads of E // H over HKV key/value heads (the reference itself is
    transformers' own model, as in llama_parity.py)."""
    D = E // H
    s = {"model.embed_tokens.weight": (V, E)}
    for i in range(L):
        p = f"model.layers.{i}."
        s.update({p + "input_layernorm.weight": (E,),
                  p + "self_attn.q_proj.weight": (H * D, E),
                  p + "self_attn.k_proj.weight": (HKV * D, E),
                  p + "self_attn.v_proj.weight": (HKV * D, E),
                  p + "self_attn.o_proj.weight": (E, H * D),
                  p + "post_attention_layernorm.weight": (E,),
                  p + "mlp.gate_proj.weight": (I, E), p + "mlp.up_proj.weight": (I, E),
                  p + "mlp.down_proj.weight": (E, I)})
    s.update({"model.norm.weight": (E,), "lm_head.weight": (V, E)})
    return s

def init_params(shapes, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in shapes.items():
        if name.endswith("LayerNorm.weight") or ".ln_" in name and name.endswith("weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)
        else:
            t = 0.05 * torch.randn(shape, generator=g, dtype=torch.float64)
        params[name] = t.to(dtype).requires_grad_(True)
    return params


def gpt2_forward(p, ids, labels, L, H, eps=1e-5):
    B, S = ids.shape
    x = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][torch.arange(S)]
    E = x.shape[-1]
    D = E // H
    causal = torch.ones(S, S, dtype=torch.bool).tril()
    for i in range(L):
        q = f"transformer.h.{i}."
        h = F.layer_norm(x, (E,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], eps)
        qkv = h @ p[q + "attn.c_attn.weight"] + p[q + "attn.c_attn.bias"]
        qq, kk, vv = (t.reshape(B, S, H, D).transpose(1, 2) for t in qkv.split(E, dim=2))
        scores = qq @ kk.transpose(-1, -2) / math.sqrt(D)
        scores = scores.masked_fill(~causal, float("-inf"))
        a = (scores.softmax(-1) @ vv).transpose(1, 2).reshape(B, S, E)
        x = x + a @ p[q + "attn.c_proj.weight"] + p[q + "attn.c_proj.bias"]
        h = F.layer_norm(x, (E,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], eps)
        h = F.gelu(h @ p[q + "mlp.c_fc.weight"] + p[q + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ p[q + "mlp.c_proj.weight"] + p[q + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (E,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
    logits = x @ p["transformer.wte.weight"].T
    V = logits.shape[-1]
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1),
                           ignore_index=-100)
    return loss, logits


def bert_forward(p, ids, types, mask, labels, L, H, eps=1e-12):
    B, S = ids.shape
    pre = "bert.embeddings."
    x = (p[pre + "word_embeddings.weight"][ids] + p[pre + "token_type_embeddings.weight"][types]
         + p[pre + "position_embeddings.weight"][torch.arange(S)])
    E = x.shape[-1]
    D = E // H
    x = F.layer_norm(x, (E,), p[pre + "LayerNorm.weight"], p[pre + "LayerNorm.bias"], eps)
    ext = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min

    def lin(t, n):
        return t @ p[n + ".weight"].T + p[n + ".bias"]

    for i in range(L):
        q = f"bert.encoder.layer.{i}."
        qq, kk, vv = (lin(x, q + "attention.self." + n).reshape(B, S, H, D).transpose(1, 2)
                      for n in ("query", "key", "value"))
        scores = qq @ kk.transpose(-1, -2) / math.sqrt(D) + ext
        a = (scores.softmax(-1) @ vv).transpose(1, 2).reshape(B, S, E)
        a = lin(a, q + "attention.output.dense")
        x = F.layer_norm(a + x, (E,), p[q + "attention.output.LayerNorm.weight"],
                         p[q + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(lin(x, q + "intermediate.dense"))
        h = lin(h, q + "output.dense")
        x = F.layer_norm(h + x, (E,), p[q + "output.LayerNorm.weight"],
                         p[q + "output.LayerNorm.bias"], eps)
    t = F.gelu(lin(x, "cls.predictions.transform.dense"))
    t = F.layer_norm(t, (E,), p["cls.predictions.transform.LayerNorm.weight"],
                     p["cls.predictions.transform.LayerNorm.bias"], eps)
    logits = t @ p["bert.embeddings.word_embeddings.weight"].T + p["cls.predictions.bias"]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                           ignore_index=-100)
    return loss, logits


def write_safetensors(path, tensors):
    """Writes the safetensors layout: u64 header size, JSON header, raw data."""
    codes = {np.dtype("float32"): "F32", np.dtype("float64"): "F64"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        a = np.ascontiguousarray(t.detach().cpu().numpy())
        header[name] = {"dtype": codes[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Reads a safetensors file of F32/F64 tensors into numpy arrays by name."""
    codes = {"F32": np.float32, "F64": np.float64}
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + e],
                                  dtype=codes[info["dtype"]]).reshape(info["shape"]).copy()
    return out


def adamw(params, lr, wd, betas, eps):
    """torch.optim.AdamW with decay only on matrices (mlc's convention)."""
    decay = [t for t in params.values() if t.dim() >= 2]
    no_decay = [t for t in params.values() if t.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps)
