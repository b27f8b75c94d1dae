"""Edits a checkpoint's state.json (or checkpoint.json) and recomputes its hash.

    edit_state.py CHECKPOINT_DIR FIELD JSON_VALUE [--file checkpoint.json]

FIELD is a key, or OBJECT.KEY for one inside "package" or "run"; JSON_VALUE is
parsed as JSON ("3.5", '"text"', "null"); the word DELETE removes the field.
The manifest's content hash of state.json is rewritten to match, as someone
who edits a checkpoint on purpose would, so that what is tested is the
reader's validation, not the hash.
"""
import json
import os
import sys


def content_hash(data):
    """FNV-1a 64 as 16 hex digits (runtime/core/Hash.h)."""
    h = 0xcbf29ce484222325
    for c in data:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def edit(ckpt, field, value, file="state.json"):
    path = os.path.join(ckpt, file)
    doc = json.load(open(path))
    where, key = doc, field
    if "." in field:
        outer, key = field.split(".", 1)
        where = doc[outer]
    if value == "DELETE":
        where.pop(key, None)
    else:
        where[key] = json.loads(value)
    open(path, "w").write(json.dumps(doc, indent=2) + "\n")
    if file == "state.json":
        manifest_path = os.path.join(ckpt, "checkpoint.json")
        manifest = json.load(open(manifest_path))
        manifest["files"]["state.json"] = content_hash(open(path, "rb").read())
        open(manifest_path, "w").write(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    file = "state.json"
    if "--file" in args:
        i = args.index("--file")
        file = args[i + 1]
        del args[i:i + 2]
    edit(args[0], args[1], args[2], file)
