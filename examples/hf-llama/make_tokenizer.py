"""Writes tokenizer/ of this example with the Hugging Face `tokenizers` library,
as a user makes a tokenizer for a Llama-3-shaped model:

  tokenizer.json         byte-level BPE, 512 entries, learned from the bundled
                         corpus, pre-tokenized by Llama-3's split regex; its
                         post-processor puts <|begin_of_text|> first
  tokenizer_config.json  PreTrainedTokenizerFast, BOS and EOS
  generation_config.json transformers' generation defaults for this model,
                         which `mlc generate` reads too

Run once with a Python that has `tokenizers` (the files are committed):
  python examples/hf-llama/make_tokenizer.py
"""
import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "tokenizer")
corpus = os.path.join(here, "..", "..", "data", "corpus", "python-docs.txt")
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
# Llama-3's split regex, as its tokenizer.json writes it.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")

tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
])
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=[BOS, EOS],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
with open(corpus, encoding="utf-8") as f:
    text = f.read()
paragraphs = [p for p in text.split("\n\n") if p.strip()]
tok.train_from_iterator(paragraphs, trainer=trainer)
bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                                   special_tokens=[(BOS, bos)])
os.makedirs(out, exist_ok=True)
tok.save(os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS,
               "model_max_length": 128, "clean_up_tokenization_spaces": False}, f, indent=2)
    f.write("\n")
with open(os.path.join(out, "generation_config.json"), "w") as f:
    json.dump({"bos_token_id": bos, "eos_token_id": eos, "do_sample": True,
               "temperature": 0.7, "top_k": 40, "top_p": 0.95, "max_new_tokens": 40}, f,
              indent=2)
    f.write("\n")
print(f"{out}: {tok.get_vocab_size()} entries, BOS {bos}, EOS {eos}")
