"""Exports the ONNX fixtures that mlc's importer tests use.

Tiny, randomly initialized HuggingFace models (no downloaded weights):
GPT2LMHeadModel and BertForMaskedLM, exported with torch.onnx.export at
opsets 14 and 17, in eval mode (dropout gone, equal initializers merged by
the exporter) and training mode (Dropout nodes with training_mode), with a
loss output (labels as an input) or logits only. Batch and sequence are
symbolic dims ("batch", "sequence").

  python scripts/export_onnx_fixtures.py OUT_DIR

needs transformers 4.38.2 beside PyTorch (the test venv has both). Each
model's HF config goes beside it as NAME.json, so that tests rebuild the
PyTorch model from the config and the ONNX initializers.
"""

import os
import sys

import torch
import transformers
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

B, S = 2, 16


def gpt2(dropout):
    cfg = GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                     use_cache=False)
    return GPT2LMHeadModel(cfg)


def bert(dropout):
    cfg = BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=256,
                     max_position_embeddings=64, hidden_dropout_prob=dropout,
                     attention_probs_dropout_prob=dropout)
    return BertForMaskedLM(cfg)


def export(out_dir, name, family, opset, training, labels, dropout, fold, seed):
    torch.manual_seed(seed)
    model = gpt2(dropout) if family == "gpt2" else bert(dropout)
    model.config.return_dict = False
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, 256, (B, S), generator=g)
    # Keyword arguments in the order of the model's forward signature, which
    # is the order of the graph's inputs.
    if family == "gpt2":
        kwargs = {"labels": ids.clone()} if labels else {}
    else:
        mask = torch.ones(B, S, dtype=torch.int64)
        mask[1, 11:] = 0
        lab = torch.where(torch.rand(B, S, generator=g) < 0.3, ids, torch.full_like(ids, -100))
        kwargs = {"attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
        if labels:
            kwargs["labels"] = lab
    names = ["input_ids"] + list(kwargs)
    outputs = (["loss"] if labels else []) + ["logits"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["logits"] = {0: "batch", 1: "sequence"}
    model.train(training)
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, (ids, kwargs), path, input_names=names,
                      output_names=outputs, dynamic_axes=axes, opset_version=opset,
                      training=mode, do_constant_folding=fold)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        f.write(model.config.to_json_string())
    print(f"{path}: {os.path.getsize(path)} bytes")


FIXTURES = [
    # name, family, opset, training, labels, dropout, constant folding.
    # Constant folding (the exporter's default) folds the transposes of
    # Linear weights into new initializers named onnx::MatMul_N, which unties
    # tied weights; exports meant for training keep it off.
    ("gpt2-lm-opset14-eval", "gpt2", 14, False, True, 0.1, False),
    ("gpt2-logits-opset17-eval", "gpt2", 17, False, False, 0.1, False),
    ("gpt2-lm-opset17-train", "gpt2", 17, True, True, 0.1, False),
    ("bert-mlm-opset14-eval", "bert", 14, False, True, 0.1, False),
    ("bert-logits-opset17-eval", "bert", 17, False, False, 0.1, True),
    ("bert-mlm-opset17-train", "bert", 17, True, True, 0.1, False),
]

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    assert transformers.__version__ == "4.38.2", transformers.__version__
    os.makedirs(sys.argv[1], exist_ok=True)
    for i, f in enumerate(FIXTURES):
        export(sys.argv[1], *f, seed=100 + i)
