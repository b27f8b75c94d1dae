//===- GenerationConfig.cpp - a model directory's generation defaults -----===//

#include "runtime/train/GenerationConfig.h"
#include "support/Error.h"
#include "support/Json.h"
#include "support/TensorIO.h"

#include <cmath>
#include <sys/stat.h>

namespace mlc::rt {

namespace {

bool isRegularFile(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// What mlc does with a key of transformers' GenerationConfig.
enum class Key {
  Modeled,  // read into a generate option
  Neutral,  // refused unless null or its neutral value (`detail` below)
  NoEffect, // cannot change the generated tokens (`detail` says why)
};

struct GenerationKey {
  const char *name;
  Key kind;
  /// Neutral: the value (as JSON text) at which mlc generates as
  /// transformers does; null is accepted too. NoEffect: why.
  const char *detail;
};

/// Every field of transformers' GenerationConfig (4.38 to 5.x). The modeled
/// ones are read in applyGenerationConfig.
const GenerationKey kGenerationKeys[] = {
    {"max_new_tokens", Key::Modeled, "--max-tokens"},
    {"max_length", Key::Modeled, "prompt and generated tokens in all, when max_new_tokens is null"},
    {"do_sample", Key::Modeled, "false: greedy (--temperature 0)"},
    {"temperature", Key::Modeled, "--temperature"},
    {"top_k", Key::Modeled, "--top-k"},
    {"top_p", Key::Modeled, "--top-p"},
    {"repetition_penalty", Key::Modeled, "--repetition-penalty"},
    {"bos_token_id", Key::Modeled, "starts an empty prompt"},
    {"eos_token_id", Key::Modeled, "an id or a list: generation stops at any of them"},
    {"min_length", Key::Neutral, "0"},
    {"min_new_tokens", Key::Neutral, "0"},
    {"num_beams", Key::Neutral, "1"},
    {"num_beam_groups", Key::Neutral, "1"},
    {"penalty_alpha", Key::Neutral, "0"},
    {"typical_p", Key::Neutral, "1"},
    {"epsilon_cutoff", Key::Neutral, "0"},
    {"eta_cutoff", Key::Neutral, "0"},
    {"min_p", Key::Neutral, "0"},
    {"diversity_penalty", Key::Neutral, "0"},
    {"encoder_repetition_penalty", Key::Neutral, "1"},
    {"no_repeat_ngram_size", Key::Neutral, "0"},
    {"encoder_no_repeat_ngram_size", Key::Neutral, "0"},
    {"bad_words_ids", Key::Neutral, "null"},
    {"force_words_ids", Key::Neutral, "null"},
    {"constraints", Key::Neutral, "null"},
    {"forced_bos_token_id", Key::Neutral, "null"},
    {"forced_eos_token_id", Key::Neutral, "null"},
    {"forced_decoder_ids", Key::Neutral, "null"},
    {"suppress_tokens", Key::Neutral, "null"},
    {"begin_suppress_tokens", Key::Neutral, "null"},
    {"sequence_bias", Key::Neutral, "null"},
    {"exponential_decay_length_penalty", Key::Neutral, "null"},
    {"renormalize_logits", Key::Neutral, "false"},
    {"guidance_scale", Key::Neutral, "null"},
    {"watermarking_config", Key::Neutral, "null"},
    {"dola_layers", Key::Neutral, "null"},
    {"stop_strings", Key::Neutral, "null"},
    {"max_time", Key::Neutral, "null"},
    {"num_return_sequences", Key::Neutral, "1"},
    {"token_healing", Key::Neutral, "false"},
    {"length_penalty", Key::NoEffect, "scores beams; mlc (num_beams 1) has none"},
    {"early_stopping", Key::NoEffect, "a beam search's stopping rule; num_beams is 1"},
    {"remove_invalid_values", Key::NoEffect,
     "mlc refuses a step whose logits are NaN or infinite instead of replacing them"},
    {"pad_token_id", Key::NoEffect, "pads a batch of prompts; mlc generates one sequence"},
    {"decoder_start_token_id", Key::NoEffect, "encoder-decoder models only"},
    {"use_cache", Key::NoEffect, "the key/value cache changes speed, not tokens"},
    {"cache_implementation", Key::NoEffect, "the key/value cache changes speed, not tokens"},
    {"cache_config", Key::NoEffect, "the key/value cache changes speed, not tokens"},
    {"return_legacy_cache", Key::NoEffect, "the key/value cache's type"},
    {"num_assistant_tokens", Key::NoEffect,
     "assisted decoding verifies the assistant's tokens: the same tokens"},
    {"num_assistant_tokens_schedule", Key::NoEffect, "assisted decoding: the same tokens"},
    {"assistant_confidence_threshold", Key::NoEffect, "assisted decoding: the same tokens"},
    {"prompt_lookup_num_tokens", Key::NoEffect, "prompt lookup decoding: the same tokens"},
    {"max_matching_ngram_size", Key::NoEffect, "prompt lookup decoding: the same tokens"},
    {"assistant_early_exit", Key::NoEffect, "assisted decoding: the same tokens"},
    {"assistant_lookbehind", Key::NoEffect, "assisted decoding: the same tokens"},
    {"target_lookbehind", Key::NoEffect, "assisted decoding: the same tokens"},
    {"low_memory", Key::NoEffect, "memory of a beam search; num_beams is 1"},
    {"output_attentions", Key::NoEffect, "what generate() returns besides the tokens"},
    {"output_hidden_states", Key::NoEffect, "what generate() returns besides the tokens"},
    {"output_scores", Key::NoEffect, "what generate() returns besides the tokens"},
    {"output_logits", Key::NoEffect, "what generate() returns besides the tokens"},
    {"return_dict_in_generate", Key::NoEffect, "generate()'s return type"},
    {"compile_config", Key::NoEffect, "torch.compile settings"},
    {"disable_compile", Key::NoEffect, "torch.compile settings"},
    {"generation_kwargs", Key::NoEffect, "arguments of transformers' pipelines"},
    {"is_assistant", Key::NoEffect, "marks an assistant model"},
    {"transformers_version", Key::NoEffect, "the writer's version"},
    {"_from_model_config", Key::NoEffect, "whether transformers derived the file from config.json"},
    {"_commit_hash", Key::NoEffect, "the Hub revision it came from"},
};

const GenerationKey *findKey(const std::string &name) {
  for (const GenerationKey &k : kGenerationKeys)
    if (name == k.name)
      return &k;
  return nullptr;
}

/// A JSON value as text, for messages and for the neutral values.
std::string show(const Json &v) {
  switch (v.kind) {
  case Json::Null:
    return "null";
  case Json::Bool:
    return v.boolean ? "true" : "false";
  case Json::Number: {
    std::string s = std::to_string(v.number);
    if (v.number == std::floor(v.number) && std::fabs(v.number) < 1e15)
      s = std::to_string(int64_t(v.number));
    return s;
  }
  case Json::String:
    return jsonQuote(v.string);
  case Json::Array:
    return v.array.empty() ? "[]" : "[...]";
  case Json::Object:
    return v.object.empty() ? "{}" : "{...}";
  }
  return "?";
}

/// Whether `v` is the neutral value `neutral` (JSON text), or null.
bool isNeutral(const Json &v, const std::string &neutral) {
  if (v.kind == Json::Null)
    return true;
  if (neutral == "false")
    return v.kind == Json::Bool && !v.boolean;
  if (neutral == "null")
    return (v.kind == Json::Array && v.array.empty()) || (v.kind == Json::Object && v.object.empty());
  return v.kind == Json::Number && v.number == std::stod(neutral);
}

} // namespace

void applyGenerationConfig(GenerateOptions &o, const std::string &text, const std::string &path) {
  Json root = Json::parse(text, path, /*uniqueKeys=*/true);
  if (root.kind != Json::Object)
    fail(path + ": expected a JSON object (transformers' GenerationConfig)");
  auto where = [&](const std::string &key) { return path + ": \"" + key + "\""; };
  auto number = [&](const std::string &key, const Json &v) {
    if (v.kind != Json::Number || !std::isfinite(v.number))
      fail(where(key) + " must be a number, got " + show(v));
    return v.number;
  };
  auto integer = [&](const std::string &key, const Json &v, double least) {
    double x = number(key, v);
    if (x != std::floor(x) || x < least || x > 2147483647.0)
      fail(where(key) + " must be an integer >= " + std::to_string(int64_t(least)) + ", got " +
           show(v));
    return int64_t(x);
  };

  // GenerationConfig's defaults for what the file leaves out.
  bool doSample = false;
  double temperature = 1.0, topP = 1.0, penalty = 1.0;
  int64_t topK = 50, maxNew = -1, maxLength = 20;
  for (const auto &[key, v] : root.object) {
    const GenerationKey *k = findKey(key);
    if (!k)
      fail(where(key) + " is not a key of transformers' GenerationConfig that mlc knows; it "
           "cannot tell whether the key changes the generated tokens (remove it to generate "
           "with mlc)");
    if (k->kind == Key::NoEffect)
      continue;
    if (k->kind == Key::Neutral) {
      if (!isNeutral(v, k->detail))
        fail(where(key) + " is " + show(v) + ", which mlc generate does not implement (it " +
             "generates as transformers does only with " + key + " " + k->detail + " or null)");
      continue;
    }
    if (v.kind == Json::Null)
      continue; // the default stands
    if (key == "do_sample") {
      if (v.kind != Json::Bool)
        fail(where(key) + " must be true or false, got " + show(v));
      doSample = v.boolean;
    } else if (key == "temperature") {
      temperature = number(key, v);
      if (!(temperature > 0))
        fail(where(key) + " must be > 0 (transformers' own rule), got " + show(v));
    } else if (key == "top_k") {
      topK = integer(key, v, 0);
    } else if (key == "top_p") {
      topP = number(key, v);
      if (!(topP > 0 && topP <= 1))
        fail(where(key) + " must be in (0, 1], got " + show(v));
    } else if (key == "repetition_penalty") {
      penalty = number(key, v);
      if (!(penalty > 0))
        fail(where(key) + " must be > 0, got " + show(v));
    } else if (key == "max_new_tokens") {
      maxNew = integer(key, v, 0);
    } else if (key == "max_length") {
      maxLength = integer(key, v, 0);
    } else if (key == "bos_token_id") {
      o.bosId = int32_t(integer(key, v, 0));
    } else if (key == "eos_token_id") {
      o.eosIds.clear();
      if (v.kind == Json::Array) {
        for (const Json &id : v.array)
          o.eosIds.push_back(int32_t(integer(key, id, 0)));
      } else {
        o.eosIds.push_back(int32_t(integer(key, v, 0)));
      }
    }
  }
  // The command line wins. transformers' do_sample false is greedy whatever
  // the temperature; a --temperature given samples at that temperature.
  if (!o.given.count("temperature"))
    o.temperature = doSample ? temperature : 0.0;
  if (!o.given.count("top-k"))
    o.topK = topK;
  if (!o.given.count("top-p"))
    o.topP = topP;
  if (!o.given.count("repetition-penalty"))
    o.repetitionPenalty = penalty;
  if (!o.given.count("max-tokens")) {
    if (maxNew >= 0)
      o.maxTokens = maxNew;
    else
      o.maxLength = maxLength;
  }
}

void applyModelDirectory(GenerateOptions &o, const std::string &dir) {
  bool tokenizerGiven = false;
  for (const char *flag : {"tokenizer-type", "tokenizer-model", "vocab-file", "merge-file"})
    tokenizerGiven |= o.given.count(flag) > 0;
  if (!tokenizerGiven) {
    if (isRegularFile(dir + "/tokenizer.json")) {
      o.tokenizerType = "HuggingFaceTokenizer";
      o.vocabFile = dir;
    } else if (isRegularFile(dir + "/tokenizer.model")) {
      fail(dir + ": holds tokenizer.model but no tokenizer.json, which is the tokenizer mlc "
           "generate takes from a model directory; name the tokenizer with --tokenizer-type "
           "and --tokenizer-model");
    }
  }
  std::string config = dir + "/generation_config.json";
  if (isRegularFile(config))
    applyGenerationConfig(o, readFile(config), config);
}

} // namespace mlc::rt
