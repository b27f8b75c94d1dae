"""Exports the ONNX fixtures that mlc's importer tests use.

Tiny, randomly initialized HuggingFace models (no downloaded weights):
GPT2LMHeadModel and BertForMaskedLM, exported with torch.onnx.export at
opsets 14 and 17, in eval mode (dropout gone, equal initializers merged by
the exporter) and training mode (Dropout nodes with training_mode), with a
loss output (labels as an input) or logits only. Batch and sequence are
symbolic dims ("batch", "sequence").

  python scripts/export_onnx_fixtures.py OUT_DIR
  python scripts/export_onnx_fixtures.py --corpus fuzz/corpus/onnx
  python scripts/export_onnx_fixtures.py --opset18 test/onnx/Inputs   # onnx >= 1.14

needs transformers 4.38.2 beside PyTorch (the test venv has both). Each
model's HF config goes beside it as NAME.json, so that tests rebuild the
PyTorch model from the config and the ONNX initializers.
"""

import os
import sys

try:  # not needed by --opset18
    import torch
    import transformers
    from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel
except ImportError:
    torch = None

B, S = 2, 16


SIZE = {"vocab": 256, "positions": 64, "hidden": 64, "layers": 2, "heads": 4}


def gpt2(dropout):
    cfg = GPT2Config(vocab_size=SIZE["vocab"], n_positions=SIZE["positions"],
                     n_embd=SIZE["hidden"], n_layer=SIZE["layers"], n_head=SIZE["heads"],
                     resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                     use_cache=False)
    return GPT2LMHeadModel(cfg)


def bert(dropout):
    cfg = BertConfig(vocab_size=SIZE["vocab"], hidden_size=SIZE["hidden"],
                     num_hidden_layers=SIZE["layers"], num_attention_heads=SIZE["heads"],
                     intermediate_size=4 * SIZE["hidden"],
                     max_position_embeddings=SIZE["positions"], hidden_dropout_prob=dropout,
                     attention_probs_dropout_prob=dropout)
    return BertForMaskedLM(cfg)


def export(out_dir, name, family, opset, training, labels, dropout, fold, seed):
    torch.manual_seed(seed)
    model = gpt2(dropout) if family == "gpt2" else bert(dropout)
    model.config.return_dict = False
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, SIZE["vocab"], (B, S), generator=g)
    # Keyword arguments in the order of the model's forward signature, which
    # is the order of the graph's inputs.
    if family == "gpt2":
        kwargs = {"labels": ids.clone()} if labels else {}
    else:
        mask = torch.ones(B, S, dtype=torch.int64)
        mask[-1, S * 2 // 3:] = 0
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

# Opset 18 (axes as inputs) from PyTorch 1.13, whose exporter stops at 17:
# onnx's version converter, which needs onnx >= 1.14 (Debian has 1.12; a
# venv with `pip install onnx==1.16.2` runs this step).
OPSET18 = [("bert-mlm-opset14-eval", "bert-mlm-opset18-eval"),
           ("gpt2-lm-opset17-train", "gpt2-lm-opset18-train")]


def convert_to_opset18(out_dir):
    import shutil
    import onnx
    from onnx import version_converter
    if tuple(int(x) for x in onnx.__version__.split(".")[:2]) < (1, 14):
        print(f"opset 18 fixtures skipped: onnx {onnx.__version__} < 1.14")
        return
    for src, dst in OPSET18:
        m = version_converter.convert_version(onnx.load(os.path.join(out_dir, src + ".onnx")), 18)
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out_dir, dst + ".onnx"))
        shutil.copy(os.path.join(out_dir, src + ".json"), os.path.join(out_dir, dst + ".json"))
        print(f"{dst}.onnx: converted from {src}")


if __name__ == "__main__":
    # --corpus: the same exports of minute models (a few KB), the ONNX fuzz
    # target's seed corpus (fuzz/corpus/onnx).
    corpus = "--corpus" in sys.argv
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(paths) != 1:
        sys.exit(__doc__)
    if "--opset18" in sys.argv:
        convert_to_opset18(paths[0])
        sys.exit(0)
    assert transformers.__version__ == "4.38.2", transformers.__version__
    os.makedirs(paths[0], exist_ok=True)
    if corpus:
        SIZE.update(vocab=16, positions=8, hidden=8, layers=1, heads=2)
        B, S = 2, 4
    for i, f in enumerate(FIXTURES):
        export(paths[0], *f, seed=100 + i)
    if not corpus:
        convert_to_opset18(paths[0])
    if corpus:
        for name in os.listdir(paths[0]):
            if name.endswith(".json"):
                os.remove(os.path.join(paths[0], name))
