"""Loads a model directory that `mlc train --save DIR/` wrote, with nothing but
transformers, and samples from it.

    sample.py DIR PROMPT

Prints a sample drawn with the directory's generation_config.json (temperature,
top-k, top-p, max_new_tokens), and the greedy continuation.
"""
import sys
import warnings

import torch
import transformers

transformers.logging.set_verbosity_error()
# The greedy call leaves the file's sampling settings unused, which
# transformers warns about.
warnings.filterwarnings("ignore", category=UserWarning)
directory, prompt = sys.argv[1:3]
model = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
print(f"== transformers: {type(model).__name__} of {model.num_parameters()} parameters, "
      f"{type(tokenizer).__name__} of {len(tokenizer)} tokens, from {directory}")
ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
torch.manual_seed(0)
with torch.no_grad():
    sampled = model.generate(ids, attention_mask=torch.ones_like(ids),
                             pad_token_id=tokenizer.eos_token_id)
    greedy = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                            max_new_tokens=30, pad_token_id=tokenizer.eos_token_id)
print("== transformers, sampled (generation_config.json):")
print(tokenizer.decode(sampled[0], skip_special_tokens=True))
print("== transformers, greedy:")
print(tokenizer.decode(greedy[0], skip_special_tokens=True))
