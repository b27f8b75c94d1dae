"""The prose of the demo corpus, one paragraph per JSONL line.

    demo_prose.py CORPUS.txt OUT.jsonl

The corpus is reStructuredText. A small model trained on it as it is spends
its few steps on markup (heading underlines, :role:`targets`, directives,
code); `make demo` trains on the paragraphs of English in it instead, with the
inline markup reduced to its text, so its sample reads like the corpus' prose.
Prints the paragraphs and bytes kept.
"""
import json
import re
import sys

src, dst = sys.argv[1:3]
ROLE = re.compile(r":[a-z:]+:`(~?)([^`<]*?)\s*(?:<[^>]*>)?`")  # :meth:`a.b <t>` -> a.b
LITERAL = re.compile(r"``([^`]*)``|`([^`]*)`_*")
EMPHASIS = re.compile(r"\*\*?([^*]+)\*\*?")


def prose(paragraph):
    lines = paragraph.splitlines()
    if not lines or lines[0][:1] in " \t" or lines[0].startswith((".. ", ">>>", "$", "|")):
        return None  # code, a directive, an interactive session, a table
    if len(lines) < 2 or any(re.fullmatch(r"[=\-~^*#+]{3,}", l.strip()) for l in lines):
        return None  # a heading or a one-liner
    text = " ".join(l.strip() for l in lines)
    text = ROLE.sub(lambda m: m.group(2).split(".")[-1] if m.group(1) else m.group(2), text)
    text = LITERAL.sub(lambda m: m.group(1) or m.group(2), text)
    text = EMPHASIS.sub(r"\1", text).replace("::", ":").replace("\\", "")
    text = re.sub(r"\s*\[#\]_", "", text)
    letters = sum(c.isalpha() or c == " " for c in text)
    return text if letters > 0.9 * len(text) and text[:1].isupper() else None


paragraphs = [p for p in (prose(p) for p in open(src, encoding="utf-8").read().split("\n\n")) if p]
with open(dst, "w", encoding="utf-8") as out:
    for p in paragraphs:
        out.write(json.dumps({"text": p}) + "\n")
print(f"{len(paragraphs)} paragraphs, {sum(len(p.encode()) for p in paragraphs) / 1e6:.1f} MB of prose")
