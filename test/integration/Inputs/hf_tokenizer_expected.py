"""mlc's HuggingFaceTokenizer on files written by tokenizers 0.19 and later
(hf_tokenizers/make_new_format.py), against the ids and decoded text that
version gave, stored in hf_tokenizers/expected.json: merges as pairs,
ignore_merges, Metaspace with `split`. Needs no `tokenizers` installed.
"""

import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--mlc", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--fixtures", required=True)
args = ap.parse_args()
os.makedirs(args.work, exist_ok=True)
expected = json.load(open(os.path.join(args.fixtures, "expected.json"), encoding="utf-8"))
texts = expected["texts"]
jsonl = os.path.join(args.work, "texts.jsonl")
with open(jsonl, "w", encoding="utf-8") as f:
    for t in texts:
        f.write(json.dumps({"text": t}) + "\n")


def run(*argv):
    r = subprocess.run(list(argv), capture_output=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{r.stderr.decode(errors='replace')}")
    return r.stdout.decode("utf-8")


ok = True
for name in ("llama3-new", "metaspace-new"):
    model = os.path.join(args.fixtures, name)
    want = expected[name]
    prefix = os.path.join(args.work, name)
    run(args.mlc, "preprocess", "--input", jsonl, "--output-prefix", prefix,
        "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", model)
    dump = run(args.mlc, "data", "dump", prefix + "_text_document", "--count", str(len(texts)))
    ours = [[int(x) for x in line.split()] for line in dump.split("\n")[:-1]]
    bad = [i for i in range(len(texts)) if i >= len(ours) or ours[i] != want["ids"][i]]
    print(f"{name} (tokenizers {expected['tokenizers']}): {len(texts)} documents, "
          f"{sum(map(len, want['ids']))} tokens, {len(bad)} differ")
    for i in bad[:3]:
        print(f"  {texts[i][:60]!r}\n    mlc {ours[i][:12] if i < len(ours) else None}\n"
              f"    hf  {want['ids'][i][:12]}")
    ids_file = prefix + ".ids"
    with open(ids_file, "w") as f:
        for s in want["ids"]:
            f.write(" ".join(map(str, s)) + "\n")
    out = run(args.mlc, "tokenizer", "decode", "--input", ids_file, "--tokenizer-type",
              "HuggingFaceTokenizer", "--tokenizer-model", model)
    decoded = [json.loads(line) for line in out.split("\n")[:-1]]
    dbad = [i for i in range(len(texts)) if decoded[i] != want["decoded"][i]]
    print(f"{name} decode: {len(dbad)} differ")
    for i in dbad[:3]:
        print(f"    mlc {decoded[i][:60]!r}\n    hf  {want['decoded'][i][:60]!r}")
    ok &= not bad and not dbad and len(ours) == len(texts)
print("MATCH" if ok else "DIFFER")
sys.exit(0 if ok else 1)
