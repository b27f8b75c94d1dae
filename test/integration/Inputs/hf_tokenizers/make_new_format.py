"""Files as tokenizers 0.19 and later write them, with the ids and text that
version gives, for a test that needs no such version installed:

    /path/to/python-with-tokenizers-0.2x make_new_format.py

  llama3-new/     the llama3 fixture re-saved: merges as [left, right] pairs,
                  ignore_merges true (as Meta's Llama-3 files have).
  metaspace-new/  the metaspace fixture re-saved: Metaspace with
                  prepend_scheme and split, no add_prefix_space (from 0.19,
                  "first" means a piece that starts the text).
  expected.json   short mixed documents (special tokens at their starts
                  too), and for each file the ids of encode() and the text of
                  decode() of those ids, by the version running this script.
"""

import json
import os
import random
import sys

import tokenizers
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import hf_corpus  # noqa: E402

assert tokenizers.__version__ >= "0.19", tokenizers.__version__
out = {"tokenizers": tokenizers.__version__}
rng = random.Random(11)
specials = ["<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<tool>", "calc"]
texts = []
for i in range(120):
    doc = "".join(hf_corpus._snippet(rng, specials) + rng.choice([" ", "", "x "])
                  for _ in range(rng.randint(1, 3)))
    if i % 4 == 0:
        doc = rng.choice(specials) + rng.choice(["", " "]) + doc
    texts.append(doc)
texts += ["a xyzzy b", " xyzzy", "xyzzy", "xyzzyxyzzy xyzzy"]
out["texts"] = texts

for name, source, change in [("llama3-new", "llama3", "ignore_merges"),
                             ("metaspace-new", "metaspace", None)]:
    tok = Tokenizer.from_file(os.path.join(HERE, source, "tokenizer.json"))
    if change == "ignore_merges":
        # A word in the vocabulary that no merge makes (Llama-3's have such):
        # ignore_merges takes it whole.
        j = json.loads(tok.to_str())
        j["model"]["ignore_merges"] = True
        j["model"]["vocab"]["Ġxyzzy"] = 1 + max(
            [t["id"] for t in j["added_tokens"]] + list(j["model"]["vocab"].values()))
        tok = Tokenizer.from_str(json.dumps(j))
    os.makedirs(os.path.join(HERE, name), exist_ok=True)
    tok.save(os.path.join(HERE, name, "tokenizer.json"), pretty=False)
    ids = [e.ids for e in tok.encode_batch(texts)]
    out[name] = {"ids": ids, "decoded": tok.decode_batch(ids)}
    print(name, sum(len(x) for x in ids), "tokens")

with open(os.path.join(HERE, "expected.json"), "w") as f:
    json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
