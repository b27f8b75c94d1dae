//===- ModelConfig.cpp - builtin model configs: presets, --config, HF JSON -===//
//
// The hyper-parameters of the builtin families: GPT-2's and BERT's presets
// (Llama's are in Llama.cpp), `--config PRESET[,key=value...]`, and HF
// config.json both ways: read (every key modeled, accepted as changing
// nothing, or refused by name) and written for a trained model's directory.
//
//===----------------------------------------------------------------------===//

#include "frontend/Models.h"
#include "frontend/GraphBuilder.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/FileSystem.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

using namespace mlir;

namespace mlc {

//===----------------------------------------------------------------------===//
// Configs and presets
//===----------------------------------------------------------------------===//

using namespace detail;

static const std::map<std::string, Preset> &gpt2Presets() {
  // n_inner 0 stands for HF's null: an MLP 4 * n_embd wide.
  static const Preset base = {{"vocab_size", 50257},
                              {"n_positions", 1024},
                              {"n_embd", 768},
                              {"n_layer", 12},
                              {"n_head", 12},
                              {"n_inner", 0},
                              {"resid_pdrop", 0.1},
                              {"embd_pdrop", 0.1},
                              {"attn_pdrop", 0.1},
                              {"layer_norm_epsilon", 1e-5},
                              {"initializer_range", 0.02},
                              {"tie_word_embeddings", 1},
                              {"scale_attn_weights", 1},
                              {"scale_attn_by_inverse_layer_idx", 0}};
  static const std::map<std::string, Preset> presets = [] {
    std::map<std::string, Preset> p;
    p["small"] = base;
    p["medium"] = base;
    p["medium"]["n_embd"] = 1024;
    p["medium"]["n_layer"] = 24;
    p["medium"]["n_head"] = 16;
    // gpt2-xl (openai-community/gpt2-xl's config.json): 1.56B parameters.
    p["gpt2-xl"] = base;
    p["gpt2-xl"]["n_embd"] = 1600;
    p["gpt2-xl"]["n_layer"] = 48;
    p["gpt2-xl"]["n_head"] = 25;
    // Small enough to train in seconds on a laptop core; byte-level vocabulary.
    p["tiny"] = base;
    p["tiny"]["vocab_size"] = 256;
    p["tiny"]["n_positions"] = 256;
    p["tiny"]["n_embd"] = 128;
    p["tiny"]["n_layer"] = 2;
    p["tiny"]["n_head"] = 4;
    return p;
  }();
  return presets;
}

static const std::map<std::string, Preset> &bertPresets() {
  static const Preset base = {{"vocab_size", 30522},
                              {"hidden_size", 768},
                              {"num_hidden_layers", 12},
                              {"num_attention_heads", 12},
                              {"intermediate_size", 3072},
                              {"max_position_embeddings", 512},
                              {"type_vocab_size", 2},
                              {"hidden_dropout_prob", 0.1},
                              {"attention_probs_dropout_prob", 0.1},
                              {"layer_norm_eps", 1e-12},
                              {"initializer_range", 0.02}};
  static const std::map<std::string, Preset> presets = [] {
    std::map<std::string, Preset> p;
    p["base"] = base;
    p["large"] = base;
    p["large"]["hidden_size"] = 1024;
    p["large"]["num_hidden_layers"] = 24;
    p["large"]["num_attention_heads"] = 16;
    p["large"]["intermediate_size"] = 4096;
    p["tiny"] = base;
    p["tiny"]["vocab_size"] = 256;
    p["tiny"]["hidden_size"] = 128;
    p["tiny"]["num_hidden_layers"] = 2;
    p["tiny"]["num_attention_heads"] = 4;
    p["tiny"]["intermediate_size"] = 512;
    p["tiny"]["max_position_embeddings"] = 256;
    return p;
  }();
  return presets;
}

std::string detail::formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

bool detail::isBooleanKey(llvm::StringRef key) {
  return key == "tie_word_embeddings" || key == "scale_attn_weights" ||
         key == "scale_attn_by_inverse_layer_idx" || key == "attention_bias" ||
         key == "mlp_bias" || key == "qkv_bias" || key == "qk_norm";
}

std::string ModelConfig::describe() const {
  std::string s;
  for (auto &[key, value] : values) {
    if (!s.empty())
      s += ", ";
    s += key + "=" + formatNumber(value);
  }
  return s;
}

//===----------------------------------------------------------------------===//
// HF config.json
//===----------------------------------------------------------------------===//

namespace {

/// An HF config file is a few kilobytes (a classifier's id2label of 1000
/// labels, some 40 KB); a larger file is not one.
constexpr uint64_t kMaxConfigBytes = 4u << 20;
/// A config nests 3 levels (rope_parameters, id2label); the limit is the
/// runtime's JSON reader's (rt::Json::kMaxDepth), and keeps llvm::json's
/// recursive parser far from the end of the stack.
constexpr int kMaxConfigDepth = 64;

/// The text of `path`, read as the runtime reads its files: a regular file
/// only (a FIFO would block, a device never end), at most kMaxConfigBytes.
llvm::Expected<std::string> readConfigFile(llvm::StringRef path) {
  namespace fs = llvm::sys::fs;
  auto error = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + msg);
  };
  auto special = [&](const fs::file_status &st) -> std::optional<std::string> {
    if (st.type() == fs::file_type::regular_file)
      return std::nullopt;
    return std::string(st.type() == fs::file_type::directory_file
                           ? "a directory"
                           : "a FIFO, device or other special file");
  };
  fs::file_status st;
  if (std::error_code ec = fs::status(path, st)) // follows symbolic links
    return error("cannot read it (" + ec.message() + ")");
  if (auto what = special(st))
    return error("is not a regular file (" + *what + "); --config reads an HF config.json");
  auto size = [&](uint64_t bytes) {
    return error(llvm::formatv("is {0} bytes; an HF config.json is at most {1} bytes", bytes,
                               kMaxConfigBytes)
                     .str());
  };
  if (st.getSize() > kMaxConfigBytes)
    return size(st.getSize());
  auto file = fs::openNativeFileForRead(path);
  if (!file)
    return error("cannot read it (" + llvm::toString(file.takeError()) + ")");
  // The file as opened (it may have been replaced since the check above).
  fs::file_status opened;
  std::error_code ec = fs::status(*file, opened);
  std::optional<std::string> what = ec ? std::nullopt : special(opened);
  std::string text;
  if (!ec && !what) {
    char chunk[65536];
    while (text.size() <= kMaxConfigBytes) {
      auto n = fs::readNativeFile(*file, chunk);
      if (!n) {
        ec = llvm::errorToErrorCode(n.takeError());
        break;
      }
      if (*n == 0)
        break;
      text.append(chunk, *n);
    }
  }
  fs::closeFile(*file);
  if (ec)
    return error("cannot read it (" + ec.message() + ")");
  if (what)
    return error("is not a regular file (" + *what + "); --config reads an HF config.json");
  if (text.size() > kMaxConfigBytes)
    return size(text.size());
  // Nesting, counted outside strings before the recursive parser sees it.
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxConfigDepth)
        return error(llvm::formatv("not an HF config: its JSON nests deeper than {0} levels "
                                   "(at byte {1})",
                                   kMaxConfigDepth, i)
                         .str());
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return text;
}

/// What mlc does with an HF config key that is not one of the family's
/// numbers (ModelConfig::values, which the builders read). docs/models.md
/// lists every key with the reason, and test/tools/config-keys.test walks
/// that table against this one.
struct KeyRule {
  const char *key;
  /// The values the builder builds, as JSON ("false", "\"gelu_new\"", "{}",
  /// "null"), separated by '|': any other value is refused by name. Empty:
  /// the key does not change the trained model, and any value is accepted.
  const char *builds;
};

/// Keys of every transformers config (PretrainedConfig's, 4.x and 5.x)
/// that do not change the trained model: names and metadata, what forward()
/// returns, generation settings, classification heads' labels, token ids
/// the loss does not read.
const char *const kNoEffectCommon[] = {
    "_name_or_path", "architectures", "transformers_version", "torch_dtype", "dtype",
    "use_bfloat16", "output_attentions", "output_hidden_states", "output_scores",
    "return_dict", "return_dict_in_generate", "use_cache", "tokenizer_class",
    "prefix", "finetuning_task", "id2label", "label2id", "num_labels", "problem_type",
    "tf_legacy_loss", "chunk_size_feed_forward", "is_encoder_decoder", "tie_encoder_decoder",
    "cross_attention_hidden_size", "bos_token_id", "eos_token_id", "sep_token_id",
    "decoder_start_token_id", "forced_bos_token_id", "forced_eos_token_id", "pad_token_id",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "task_specific_params",
    "gradient_checkpointing"};

const std::vector<KeyRule> &keyRules(llvm::StringRef family) {
  static const std::vector<KeyRule> gpt2 = {
      {"torchscript", "false"},
      {"activation_function", "\"gelu_new\"|\"gelu_pytorch_tanh\""},
      {"reorder_and_upcast_attn", "false"},
      {"add_cross_attention", "false"},
      {"pruned_heads", "{}"},
      {"is_decoder", ""},
      {"n_ctx", ""},
      {"summary_type", ""},
      {"summary_use_proj", ""},
      {"summary_activation", ""},
      {"summary_proj_to_labels", ""},
      {"summary_first_dropout", ""},
  };
  static const std::vector<KeyRule> bert = {
      {"torchscript", "false"},
      {"hidden_act", "\"gelu\""},
      {"position_embedding_type", "\"absolute\"|null"},
      {"is_decoder", "false"},
      {"add_cross_attention", "false"},
      {"pruned_heads", "{}"},
      {"tie_word_embeddings", "true"},
      {"classifier_dropout", ""},
  };
  // LlamaConfig, and Qwen2Config, MistralConfig and Qwen3Config beside it.
  static const std::vector<KeyRule> llama = {
      {"torchscript", "false"},
      {"hidden_act", "\"silu\""},
      {"attention_dropout", "0"},
      {"add_cross_attention", "false"},
      {"pruned_heads", "{}"},
      {"use_sliding_window", "false"},
      {"is_decoder", ""},
      {"pretraining_tp", ""},
      {"max_window_layers", ""},
  };
  return family == "gpt2" ? gpt2 : family == "bert" ? bert : llama;
}

std::string jsonText(const llvm::json::Value &v) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << v;
  return text;
}

} // namespace

/// An error about the config file at `path`, which it names first.
static llvm::Error configError(llvm::StringRef path, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + msg);
}

/// Checks the keys of `root` that are not among the family's numbers: each
/// is accepted as changing nothing, accepted with a value the builder
/// builds, or refused by name.
static llvm::Error checkOtherKeys(llvm::StringRef path, const llvm::json::Object *root,
                                  const ModelConfig &config) {
  auto error = [&](const llvm::Twine &msg) { return configError(path, msg); };
  const std::string &family = config.family;
  // Every key is modeled, accepted as changing nothing, or refused: in key
  // order, so that the first refusal is the same from run to run.
  std::vector<llvm::StringRef> keys;
  for (auto &entry : *root)
    keys.push_back(entry.first);
  llvm::sort(keys);
  const std::vector<KeyRule> &rules = keyRules(family);
  for (llvm::StringRef key : keys) {
    const llvm::json::Value &v = *root->get(key);
    if (key == "model_type" || config.values.count(key.str()))
      continue; // checked by readHFConfig; read by readFamilyValues
    // Read by readLlamaKeys: the rotary base and scaling, and the attention
    // window of Mistral and Qwen2/Qwen3.
    if (family == "llama" && (key == "rope_parameters" || key == "rope_scaling" ||
                              key == "sliding_window" || key == "layer_types"))
      continue;
    if (llvm::is_contained(kNoEffectCommon, key))
      continue;
    auto rule = llvm::find_if(rules, [&](const KeyRule &r) { return key == r.key; });
    if (rule == rules.end())
      return error("'" + key + "' is not a key mlc knows for the builtin " + family +
                   ": refused rather than ignored (docs/models.md lists the keys mlc "
                   "models and those that do not change the trained model)");
    if (!*rule->builds)
      continue;
    llvm::SmallVector<llvm::StringRef> builds;
    llvm::StringRef(rule->builds).split(builds, '|');
    bool ok = false;
    for (llvm::StringRef b : builds) {
      auto expected = llvm::json::parse(b);
      if (!expected) {
        llvm::consumeError(expected.takeError());
        continue;
      }
      ok |= *expected == v;
    }
    if (ok)
      continue;
    std::string only;
    for (llvm::StringRef b : builds)
      only += (only.empty() ? "" : " or ") + b.trim('"').str();
    return error(key + " = " + jsonText(v) + " is not supported by the builtin " + family +
                 " (only " + only + ")");
  }
  return llvm::Error::success();
}

/// Reads the family's numbers that `root` holds into `config.values`,
/// keeping the defaults for those it leaves out.
static llvm::Error readFamilyValues(llvm::StringRef path, const llvm::json::Object *root,
                                    ModelConfig &config) {
  auto error = [&](const llvm::Twine &msg) { return configError(path, msg); };
  for (auto &[key, value] : config.values) {
    const llvm::json::Value *v = root->get(key);
    if (!v || key == "sliding_window")
      continue; // the window: readLlamaKeys
    // null means something to HF only for these (GPT-2's MLP 4 x n_embd wide,
    // a key/value head per query head, hidden_size / num_attention_heads);
    // for any other key HF's class builds no model (or, for a boolean, reads
    // it as false), so mlc does not fall back to its default either.
    if (v->kind() == llvm::json::Value::Null) {
      if (key == "n_inner" || key == "num_key_value_heads" || key == "head_dim")
        continue;
      return error("'" + key + "' is null: it needs " +
                   (isBooleanKey(key) ? "true or false" : "a number") +
                   " (only n_inner, num_key_value_heads, head_dim and sliding_window may "
                   "be null)");
    }
    // GPT-2's n_inner 0 is not null: HF builds an MLP 0 wide from it.
    if (key == "n_inner" && v->getAsNumber() && *v->getAsNumber() == 0)
      return error("'n_inner' = 0 builds an MLP 0 wide (null: 4 x n_embd)");
    const bool boolean = isBooleanKey(key);
    if (auto b = v->getAsBoolean(); b && boolean)
      value = *b ? 1 : 0;
    else if (auto n = v->getAsNumber())
      value = *n;
    else
      return error("'" + key + "' must be " + (boolean ? "a boolean" : "a number") +
                   ", got " + jsonText(*v));
  }
  return llvm::Error::success();
}

/// Reads a rotary object: transformers 4's rope_scaling or transformers 5's
/// rope_parameters (`name`, which also holds rope_theta). Its rope_type
/// (4.x also spells it `type`) is default (no scaling: rope_parameters
/// only) or llama3, whose factor, low_freq_factor, high_freq_factor and
/// original_max_position_embeddings become the rope_scaling_* keys; any
/// other type, or key, is refused by name.
static llvm::Error readRopeObject(llvm::StringRef path, llvm::StringRef name,
                                  const llvm::json::Value &v, ModelConfig &config) {
  auto error = [&](const llvm::Twine &msg) { return configError(path, msg); };
  const llvm::json::Object *rope = v.getAsObject();
  if (!rope)
    return error(name + " = " + jsonText(v) + " is not an object");
  const bool parameters = name == "rope_parameters";
  const char *supported = parameters ? "only rope_type default or llama3" : "only llama3";
  std::optional<llvm::StringRef> type;
  const llvm::json::Value *ropeType = rope->get("rope_type");
  if (ropeType && ropeType->kind() != llvm::json::Value::Null)
    type = ropeType->getAsString();
  else if (const llvm::json::Value *t = rope->get("type"))
    type = t->getAsString();
  else if (parameters)
    type = "default";
  if (!type || !(*type == "llama3" || (parameters && *type == "default")))
    return error(name + ".rope_type = " +
                 (type ? "\"" + type->str() + "\"" : std::string("(none)")) +
                 " is not supported by the builtin llama (" + supported +
                 ": scaled rotary frequencies of other kinds are not built)");
  const std::pair<const char *, const char *> llama3Keys[] = {
      {"factor", kRopeScalingFactor},
      {"low_freq_factor", kRopeScalingLowFreqFactor},
      {"high_freq_factor", kRopeScalingHighFreqFactor},
      {"original_max_position_embeddings", kRopeScalingOriginalMax}};
  for (auto &[k, value] : *rope) {
    if (k == "rope_type" || k == "type")
      continue;
    auto number = value.getAsNumber();
    auto key = llvm::find_if(llama3Keys, [&](auto &p) { return k == p.first; });
    if (parameters && k == "rope_theta") {
      if (!number)
        return error("rope_parameters.rope_theta must be a number");
      config.values["rope_theta"] = *number;
    } else if (*type == "llama3" && key != std::end(llama3Keys)) {
      if (!number)
        return error(name + "." + k.str() + " must be a number, got " + jsonText(value));
      config.values[key->second] = *number;
    } else {
      return error(name + "." + k.str() + " = " + jsonText(value) +
                   " is not supported by the builtin llama (" +
                   (parameters ? "rope_theta, " : "") +
                   "rope_type and llama3's factor, low_freq_factor, high_freq_factor, "
                   "original_max_position_embeddings)");
    }
  }
  if (*type == "llama3")
    for (auto &[k, key] : llama3Keys)
      if (!config.values.count(key))
        return error(name + " of rope_type llama3 has no " + k);
  return llvm::Error::success();
}

/// The Llama family's keys that are not plain numbers: the rotary
/// rope_scaling (transformers 4) or rope_parameters (5), layer_types, the
/// attention window, and HF's null num_key_value_heads and head_dim.
static llvm::Error readLlamaKeys(llvm::StringRef path, const llvm::json::Object *root,
                                 llvm::StringRef modelType, ModelConfig &config) {
  auto error = [&](const llvm::Twine &msg) { return configError(path, msg); };
  for (const char *name : {"rope_scaling", "rope_parameters"})
    if (const llvm::json::Value *v = root->get(name); v && v->kind() != llvm::json::Value::Null)
      if (auto err = readRopeObject(path, name, *v, config))
        return err;
  // transformers 5 lists each layer's attention: full only, or the window.
  if (const llvm::json::Array *types = root->getArray("layer_types"))
    for (auto [i, t] : llvm::enumerate(*types)) {
      auto type = t.getAsString();
      if (type && *type == "full_attention")
        continue;
      if (type && *type == "sliding_attention" && modelType == "mistral")
        continue;
      return error(llvm::formatv("layer_types[{0}] = {1} is not supported by the builtin "
                                 "llama (only full_attention)",
                                 i, jsonText(t))
                       .str());
    }
  // The attention window: Mistral's applies to every layer (null: none);
  // Qwen2's and Qwen3's only with use_sliding_window, which is refused.
  if (const llvm::json::Value *w = root->get("sliding_window")) {
    auto window = w->getAsNumber();
    if (!window && w->kind() != llvm::json::Value::Null)
      return error("'sliding_window' must be a number or null");
    // HF's mask keeps the keys within the window before each query: a
    // window of 0 (or less) keeps none of them. null is no window.
    if (modelType == "mistral" && window && !(*window >= 1 && std::isfinite(*window)))
      return error("'sliding_window' = " + jsonText(*w) +
                   " must be a positive number of tokens (null: no window)");
    if (modelType == "mistral")
      config.values["sliding_window"] = window ? *window : 0;
  }
  // HF: num_key_value_heads None means one per query head; head_dim None,
  // hidden_size / num_attention_heads.
  const llvm::json::Value *kv = root->get("num_key_value_heads");
  if (!kv || kv->kind() == llvm::json::Value::Null)
    config.values["num_key_value_heads"] = config.values["num_attention_heads"];
  const llvm::json::Value *hd = root->get("head_dim");
  if (!hd || hd->kind() == llvm::json::Value::Null)
    config.values["head_dim"] = 0;
  return llvm::Error::success();
}

/// Reads an HF config.json into `config.values`: the family's keys from the
/// file, HF's defaults (the config class's) for those it leaves out, and an
/// error naming any key whose value the builder does not build.
static llvm::Error readHFConfig(llvm::StringRef path, ModelConfig &config) {
  auto error = [&](const llvm::Twine &msg) { return configError(path, msg); };
  auto text = readConfigFile(path);
  if (!text)
    return text.takeError();
  auto parsed = llvm::json::parse(*text);
  if (!parsed)
    return error("not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root)
    return error("not an HF config (a JSON object)");
  const std::string &family = config.family;
  const llvm::json::Value *typeValue = root->get("model_type");
  if (typeValue && !typeValue->getAsString())
    return error("model_type must be a string, got " + jsonText(*typeValue));
  std::string modelType = root->getString("model_type").value_or(family).str();
  std::vector<std::string> accepted =
      family == "llama" ? std::vector<std::string>{"llama", "qwen2", "mistral", "qwen3"}
                        : std::vector<std::string>{family};
  if (!llvm::is_contained(accepted, modelType))
    return error("model_type '" + modelType + "' is not a " + family + " config (mlc " +
                 family + " reads model_type " + llvm::join(accepted, ", ") + ")");
  // HF's defaults for keys the file leaves out: the config class's own.
  if (family == "gpt2")
    config.values = gpt2Presets().at("small");
  else if (family == "bert")
    config.values = bertPresets().at("base");
  else
    config.values = llamaHFDefaults(modelType);

  if (auto err = checkOtherKeys(path, root, config))
    return err;
  if (auto err = readFamilyValues(path, root, config))
    return err;
  if (family == "llama")
    return readLlamaKeys(path, root, modelType, config);
  return llvm::Error::success();
}

/// `v` as JSON: an integer without a fraction, any other number in the
/// fewest digits that read back the same double.
static std::string jsonNumber(double v) {
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%lld", (long long)v);
    return buf;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

std::string hfConfigJson(const ModelConfig &config, std::string &whyNot) {
  const std::string &family = config.family;
  std::string modelType = family, architecture;
  std::vector<std::pair<std::string, std::string>> keys; // key -> JSON value
  std::set<std::string> skip;
  if (family == "gpt2") {
    architecture = "GPT2LMHeadModel";
    keys.push_back({"activation_function", "\"gelu_new\""});
  } else if (family == "bert") {
    architecture = "BertForMaskedLM";
    keys.push_back({"hidden_act", "\"gelu\""});
    keys.push_back({"position_embedding_type", "\"absolute\""});
  } else {
    bool qkNorm = config.get("qk_norm"), qkvBias = config.get("qkv_bias"),
         attentionBias = config.get("attention_bias"),
         window = config.get("sliding_window") > 0;
    // mlc's qkv_bias and qk_norm are no transformers keys: the class is.
    skip = {"qkv_bias", "qk_norm", "sliding_window", kRopeScalingFactor,
            kRopeScalingLowFreqFactor, kRopeScalingHighFreqFactor, kRopeScalingOriginalMax};
    if (config.values.count(kRopeScalingFactor))
      keys.push_back(
          {"rope_scaling",
           "{\"factor\": " + jsonNumber(config.getFloat(kRopeScalingFactor)) +
               ", \"high_freq_factor\": " +
               jsonNumber(config.getFloat(kRopeScalingHighFreqFactor)) +
               ", \"low_freq_factor\": " +
               jsonNumber(config.getFloat(kRopeScalingLowFreqFactor)) +
               ", \"original_max_position_embeddings\": " +
               jsonNumber(config.getFloat(kRopeScalingOriginalMax)) +
               ", \"rope_type\": \"llama3\"}"});
    if (qkNorm || qkvBias) {
      modelType = qkNorm ? "qwen3" : "qwen2";
      if (window || (qkvBias && attentionBias) || config.get("mlp_bias") ||
          (qkNorm && qkvBias)) {
        whyNot = std::string("no transformers class has ") +
                 (qkNorm ? "Qwen3's q/k norms" : "Qwen2's q/k/v biases") + " with " +
                 (window ? "an attention window" : "these other biases");
        return "";
      }
      skip.insert("attention_bias");
      skip.insert("mlp_bias");
      keys.push_back({"use_sliding_window", "false"});
    } else if (window) {
      modelType = "mistral";
      if (attentionBias || config.get("mlp_bias")) {
        whyNot = "no transformers class has Mistral's attention window with biases";
        return "";
      }
      skip.insert("attention_bias");
      skip.insert("mlp_bias");
      keys.push_back({"sliding_window", jsonNumber(config.getFloat("sliding_window"))});
    }
    if (config.get("head_dim") == 0)
      skip.insert("head_dim"); // hidden_size / num_attention_heads
    architecture = modelType == "qwen3"     ? "Qwen3ForCausalLM"
                   : modelType == "qwen2"   ? "Qwen2ForCausalLM"
                   : modelType == "mistral" ? "MistralForCausalLM"
                                            : "LlamaForCausalLM";
    keys.push_back({"hidden_act", "\"silu\""});
  }
  for (auto &[key, value] : config.values) {
    if (skip.count(key))
      continue;
    if (isBooleanKey(key))
      keys.push_back({key, value ? "true" : "false"});
    else if (key == "n_inner" && value == 0)
      keys.push_back({key, "null"}); // 4 * n_embd
    else
      keys.push_back({key, jsonNumber(value)});
  }
  keys.push_back({"architectures", "[\"" + architecture + "\"]"});
  keys.push_back({"model_type", "\"" + modelType + "\""});
  keys.push_back({"torch_dtype", "\"float32\""});
  llvm::sort(keys);
  std::string json = "{";
  for (auto &[key, value] : keys)
    json += std::string(json.size() > 1 ? "," : "") + "\n  \"" + key + "\": " + value;
  return json + "\n}\n";
}

llvm::Expected<ModelConfig> parseModelConfig(llvm::StringRef family,
                                             llvm::StringRef spec) {
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  const std::map<std::string, Preset> *presets;
  std::string defaultPreset;
  if (family == "gpt2") {
    presets = &gpt2Presets();
    defaultPreset = "small";
  } else if (family == "bert") {
    presets = &bertPresets();
    defaultPreset = "base";
  } else if (family == "llama") {
    presets = &llamaPresets();
    defaultPreset = "tiny";
  } else {
    return error("unknown model '" + family + "' (expected gpt2, bert or llama)");
  }
  llvm::SmallVector<llvm::StringRef> parts;
  spec.split(parts, ',', -1, /*KeepEmpty=*/false);
  ModelConfig config;
  config.family = family.str();
  size_t first = 0;
  config.preset = defaultPreset;
  if (!parts.empty() && !parts[0].contains('=')) {
    config.preset = parts[0].trim().str();
    first = 1;
  }
  auto preset = presets->find(config.preset);
  // A Hugging Face model directory: its config.json.
  if (preset == presets->end() && llvm::sys::fs::is_directory(config.preset)) {
    std::string file = (llvm::StringRef(config.preset).rtrim('/') + "/config.json").str();
    if (!llvm::sys::fs::exists(file))
      return error(config.preset + ": a directory without config.json (--config reads an HF "
                   "config.json, or the model directory that holds it)");
    config.preset = file;
  }
  if (llvm::StringRef(config.preset).ends_with(".json")) {
    if (auto err = readHFConfig(config.preset, config))
      return std::move(err);
  } else if (preset == presets->end()) {
    std::string names;
    for (auto &[name, _] : *presets)
      names += (names.empty() ? "" : ", ") + name;
    return error("unknown " + family + " preset '" + config.preset +
                 "' (presets: " + names + ", or an HF config.json)");
  } else {
    config.values = preset->second;
  }
  for (llvm::StringRef part : llvm::ArrayRef(parts).drop_front(first)) {
    auto [key, value] = part.split('=');
    key = key.trim();
    value = value.trim();
    if (!config.values.count(key.str())) {
      std::string keys;
      for (auto &[name, _] : config.values)
        keys += (keys.empty() ? "" : ", ") + name;
      return error("unknown " + family + " config key '" + key + "' (keys: " +
                   keys + ")");
    }
    // A boolean key takes what HF's config.json holds (true, false) or 1, 0.
    double number;
    const bool boolean = isBooleanKey(key);
    if (boolean && (value.equals_insensitive("true") || value.equals_insensitive("false")))
      number = value.equals_insensitive("true") ? 1 : 0;
    else if (value.empty() || value.getAsDouble(number))
      return error("config key '" + key + "' needs " +
                   (boolean ? "true or false (or 1 or 0)" : "a number") + ", got '" + value +
                   "'");
    config.values[key.str()] = number;
  }
  if (family == "llama") {
    if (auto err = checkLlamaConfig(config))
      return std::move(err);
    return config;
  }
  // Sizes must be positive integers and heads must divide the hidden size.
  for (auto &[key, value] : config.values) {
    llvm::StringRef k(key);
    if (isBooleanKey(k)) {
      if (value != 0 && value != 1)
        return error("config key '" + key + "' must be true or false (1 or 0)");
      continue;
    }
    if (k.contains("drop")) { // a probability: resid_pdrop, hidden_dropout_prob, ...
      if (!(value >= 0 && value < 1))
        return error("config key '" + key + "' must be in [0, 1)");
      continue;
    }
    // An epsilon or a standard deviation: a non-finite or zero epsilon
    // makes every normalized value 0 or NaN, and the model never learns.
    if (k.contains("eps") || k == "initializer_range") {
      if (!(value > 0) || !std::isfinite(value))
        return error("config key '" + key + "' must be a finite positive number, got " +
                     formatNumber(value));
      continue;
    }
    // n_inner 0: HF's null (4 * n_embd).
    double lowest = k == "n_inner" ? 0 : 1;
    if (value < lowest || value != std::floor(value))
      return error("config key '" + key + "' must be a positive integer");
    // Sizes beyond these are not models but typos (and would overflow the
    // element counts or build a graph of billions of ops).
    bool layers = key == "n_layer" || key == "num_hidden_layers";
    double limit = layers ? 10000 : 1e9;
    if (value > limit)
      return error(llvm::formatv("config key '{0}' must be at most {1}, got {2:f0}", key,
                                 int64_t(limit), value)
                       .str());
  }
  const char *hidden = family == "gpt2" ? "n_embd" : "hidden_size";
  const char *heads = family == "gpt2" ? "n_head" : "num_attention_heads";
  if (config.get(hidden) % config.get(heads) != 0)
    return error(llvm::formatv("{0}={1} is not divisible by {2}={3}", hidden,
                               config.get(hidden), heads, config.get(heads))
                     .str());
  return config;
}

} // namespace mlc
