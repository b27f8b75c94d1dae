"""Variants of an optimize=False dynamo export for the tie rule's tests
(tied.test), written at the protobuf wire level: the graph's and nodes'
metadata_props (GraphProto field 16, NodeProto field 9) are newer than the
onnx package CI has.

  python make_tied_models.py IN.onnx OUT_DIR

writes OUT_DIR/
  no-signature.onnx   the graph's metadata removed (as the TorchScript
                      exporter writes it): no aliases, no note
  no-scopes.onnx      the signature kept, the nodes' metadata removed: the
                      tie cannot be placed, a note names the parameter
  bad-metadata.onnx   a graph metadata entry that is not a
                      StringStringEntryProto before the signature: skipped

  python make_tied_models.py --weights SAVED.safetensors OUT_DIR

writes, from GPT-2's --save (both names of the tied embedding), OUT_DIR/
  hf-style.safetensors   lm_head.weight left out, as transformers' own
                         save_pretrained writes the tied pair
  disagree.safetensors   transformer.wte.weight changed: the two names of
                         one parameter disagree
"""

import os
import sys

from onnx_wire import fields, ld

GRAPH, NODE = 7, 1  # ModelProto.graph, GraphProto.node
GRAPH_META, NODE_META = 16, 9



def rewrite(model, graph_fn):
    out = b""
    for num, wt, raw, payload in fields(model):
        out += ld(GRAPH, graph_fn(payload)) if num == GRAPH and wt == 2 else raw
    return out


def drop_graph_meta(g):
    return b"".join(raw for num, _, raw, _ in fields(g) if num != GRAPH_META)


def drop_node_meta(g):
    out = b""
    for num, wt, raw, payload in fields(g):
        if num == NODE and wt == 2:
            out += ld(NODE, b"".join(r for n, _, r, _ in fields(payload) if n != NODE_META))
        else:
            out += raw
    return out


def bad_meta_first(g):
    return ld(GRAPH_META, b"\xff\xff\xff") + g  # a truncated varint: does not parse


if sys.argv[1] == "--weights":
    from safetensors.numpy import load_file, save_file

    w, out_dir = load_file(sys.argv[2]), sys.argv[3]
    os.makedirs(out_dir, exist_ok=True)
    save_file({k: v for k, v in w.items() if k != "lm_head.weight"},
              os.path.join(out_dir, "hf-style.safetensors"))
    w["transformer.wte.weight"] = w["transformer.wte.weight"] + 1
    save_file(w, os.path.join(out_dir, "disagree.safetensors"))
    sys.exit(0)

src, out_dir = sys.argv[1], sys.argv[2]
os.makedirs(out_dir, exist_ok=True)
model = open(src, "rb").read()
for name, fn in [("no-signature", drop_graph_meta), ("no-scopes", drop_node_meta),
                 ("bad-metadata", bad_meta_first)]:
    open(os.path.join(out_dir, name + ".onnx"), "wb").write(rewrite(model, fn))
