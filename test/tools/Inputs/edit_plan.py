"""Copies a package, edits one line of its plan.txt and re-signs the manifest.

    edit_plan.py PACKAGE OUT PATTERN REPLACEMENT

The first line matching the regular expression PATTERN is rewritten with
re.sub(PATTERN, REPLACEMENT, line); the manifest's content hash of plan.txt is
recomputed (FNV-1a, as mlc writes it), so the runtime's own checks of the plan
are what stands between the edit and a crash.
"""
import json
import re
import shutil
import sys


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


src, out, pattern, replacement = sys.argv[1:5]
shutil.rmtree(out, ignore_errors=True)
shutil.copytree(src, out)
lines = open(f"{out}/plan.txt").read().split("\n")
for i, line in enumerate(lines):
    if re.search(pattern, line):
        lines[i] = re.sub(pattern, replacement, line, count=1)
        print("edited:", lines[i])
        break
else:
    sys.exit(f"no line matches {pattern!r}")
text = "\n".join(lines)
open(f"{out}/plan.txt", "w").write(text)
manifest = json.load(open(f"{out}/manifest.json"))
manifest["files"]["plan.txt"] = fnv1a(text.encode())
json.dump(manifest, open(f"{out}/manifest.json", "w"), indent=2)
