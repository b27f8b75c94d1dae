"""Makes the SentencePiece tokenizer.model fixtures with the `sentencepiece`
library's trainer, as a user would: tiny models of the two kinds that models
ship, trained on the bundled corpus plus mixed-script text (hf_corpus.py),
saved beside this script.

    python make_fixtures.py   # sentencepiece 0.2

  bpe/tokenizer.model      BPE as Llama-2 and Mistral train it: byte_fallback
                           (<0xNN> pieces for what the vocabulary lacks),
                           split_digits, identity normalization, extra
                           whitespace kept, a dummy prefix; <s> and </s>.
  unigram/tokenizer.model  Unigram as T5 and ALBERT train it: nmt_nfkc
                           normalization (a precompiled character map),
                           whitespace runs collapsed, <unk> for what the
                           vocabulary lacks; user-defined symbols (<sep>,
                           <|tool|>) matched inside the text.
  suffix/tokenizer.model   BPE with byte fallback and user-defined symbols
                           (which never merge), no dummy prefix, whitespace
                           runs collapsed, and U+2581 at the end of a word
                           (treat_whitespace_as_suffix).
"""

import io
import os
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import hf_corpus  # noqa: E402

CORPUS = os.path.join(HERE, "..", "..", "..", "..", "data", "corpus", "python-docs.txt")
# Training text: a slice of the corpus mixed with other scripts (a different
# seed from the tests' held-out text).
TEXTS = hf_corpus.documents(CORPUS, target_bytes=400_000, seed=7)
TEXTS += ["x" + w * k + "y" for w in hf_corpus.SPACES for k in (1, 2, 3)] * 40
SENTENCES = [line for t in TEXTS for line in t.split("\n") if line.strip()]

COMMON = dict(character_coverage=0.9995, max_sentence_length=1 << 16,
              num_threads=1, minloglevel=2, bos_id=1, eos_id=2, unk_id=0)


def train(name, **kw):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(SENTENCES), model_writer=model,
                                   **COMMON, **kw)
    with open(os.path.join(d, "tokenizer.model"), "wb") as f:
        f.write(model.getvalue())
    print(f"{name}: {len(model.getvalue())} bytes")


train("bpe", model_type="bpe", vocab_size=3000, byte_fallback=True, split_digits=True,
      normalization_rule_name="identity", remove_extra_whitespaces=False,
      allow_whitespace_only_pieces=True, add_dummy_prefix=True)
train("unigram", model_type="unigram", vocab_size=3000, normalization_rule_name="nmt_nfkc",
      user_defined_symbols=["<sep>", "<|tool|>"])
train("suffix", model_type="bpe", vocab_size=2000, byte_fallback=True,
      normalization_rule_name="identity", add_dummy_prefix=False, remove_extra_whitespaces=True,
      treat_whitespace_as_suffix=True, user_defined_symbols=["<sep>", "<|tool|>", "<sep><sep>"])
