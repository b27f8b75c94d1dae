"""Variants of BERT's optimize=False dynamo export whose word-embedding
lookup (`aten.embedding(%p_cls_predictions_decoder_weight, %input_ids, 0)`:
BERT's padding_idx 0, the tied table) carries other arguments in its FX node (`pkg.torch.onnx.fx_node`, NodeProto field 9), for the padding_idx
tests (padding-idx.test); written at the protobuf wire level: node
metadata_props are newer than the onnx package CI has.

  python make_embedding_models.py IN.onnx OUT_DIR

writes OUT_DIR/
  freq.onnx      aten.embedding(..., 0, True): scale_grad_by_freq, refused
  bad-pad.onnx   padding_idx `x`, no integer: refused
  far-pad.onnx   padding_idx 5000, no row of the 256-row table: refused
  no-pad.onnx    padding_idx -1 (nn.Embedding without one): every row trains
"""

import os
import sys

from onnx_wire import fields, ld

GRAPH, NODE, NODE_META = 7, 1, 9  # ModelProto.graph, GraphProto.node, NodeProto.metadata_props
KEY = b"pkg.torch.onnx.fx_node"
ARGS = b"%input_ids, 0)"  # the word-embedding lookup's last arguments



def with_fx_node(node, args):
    """`node` with `args` for ARGS in its fx_node entry, if it has it."""
    out = b""
    for num, wt, raw, payload in fields(node):
        if num == NODE_META and wt == 2:
            entry = dict((n, p) for n, _, _, p in fields(payload))
            if entry.get(1) == KEY and ARGS in entry.get(2, b""):
                raw = ld(NODE_META, ld(1, KEY) + ld(2, entry[2].replace(ARGS, args.encode())))
        out += raw
    return out


def rewrite(model, text):
    def graph(g):
        return b"".join(ld(NODE, with_fx_node(p, text)) if n == NODE and wt == 2 else raw
                        for n, wt, raw, p in fields(g))
    return b"".join(ld(GRAPH, graph(p)) if n == GRAPH and wt == 2 else raw
                    for n, wt, raw, p in fields(model))


src, out_dir = sys.argv[1], sys.argv[2]
os.makedirs(out_dir, exist_ok=True)
model = open(src, "rb").read()
for name, args in [("freq", "%input_ids, 0, True)"), ("bad-pad", "%input_ids, x)"),
                   ("far-pad", "%input_ids, 5000)"), ("no-pad", "%input_ids, -1)")]:
    out = rewrite(model, args)
    assert out != model, "no word-embedding lookup `" + ARGS.decode() + "` in " + src
    open(os.path.join(out_dir, name + ".onnx"), "wb").write(out)
