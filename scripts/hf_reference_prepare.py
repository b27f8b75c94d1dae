"""Prepares the check of mlc against HuggingFace transformers itself.

transformers is not installable on the development machine, so the check
runs in two halves: here, mlc computes the logits and loss of tiny GPT-2 and
BERT models from weights and batches written here; on the device machine
(scripts/device-check.sh), GPT2LMHeadModel and BertForMaskedLM load the same
safetensors by name and compute theirs. The folder this writes is what the
device check carries.

    /usr/bin/python3 scripts/hf_reference_prepare.py build/bin/mlc devicecheck
"""

import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "integration", "Inputs"))
import torch_models as tm  # noqa: E402

mlc, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(3)
B, S, V, E, L, H, I = 2, 16, 96, 32, 2, 4, 48
models = {
    "gpt2": (f"tiny,vocab_size={V},n_positions=32,n_embd={E},n_layer={L},n_head={H},"
             "resid_pdrop=0,embd_pdrop=0,attn_pdrop=0", tm.gpt2_shapes(V, 32, E, L)),
    "bert": (f"tiny,vocab_size={V},max_position_embeddings=32,hidden_size={E},"
             f"num_hidden_layers={L},num_attention_heads={H},intermediate_size={I},"
             "hidden_dropout_prob=0,attention_probs_dropout_prob=0",
             tm.bert_shapes(V, 32, 2, E, L, I)),
}
meta = {"B": B, "S": S, "V": V, "E": E, "L": L, "H": H, "I": I}
for name, (config, shapes) in models.items():
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    params = tm.init_params(shapes, seed=11, dtype=torch.float32)
    tm.write_safetensors(os.path.join(d, "weights.safetensors"), params)
    ids = rng.integers(0, V, size=(B, S))
    inputs = {"input_ids": ids, "labels": ids.copy()}
    if name == "bert":
        mask = np.ones((B, S), dtype=np.int64)
        mask[1, 10:] = 0
        labels = np.where(rng.random((B, S)) < 0.3, ids, -100)
        labels[1, 10:] = -100
        labels[0, 0] = ids[0, 0]
        inputs = {"input_ids": ids, "token_type_ids": rng.integers(0, 2, size=(B, S)),
                  "attention_mask": mask, "labels": labels}
    args = []
    for k, v in inputs.items():
        np.save(os.path.join(d, k + ".npy"), v.astype(np.int64))
        args += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
    subprocess.run([mlc, "run", name, "--config", config, "--micro-batch", str(B), "--seq-len",
                    str(S), "--init", os.path.join(d, "weights.safetensors"), "--output-dir",
                    os.path.join(d, "mlc")] + args, check=True)
json.dump(meta, open(os.path.join(out, "meta.json"), "w"))
print("prepared", out)
