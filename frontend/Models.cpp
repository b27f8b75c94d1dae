//===- Models.cpp - builtin GPT-2 and BERT graphs, model configs -----------===//
//
// The graphs follow transformers' GPT2LMHeadModel and BertForMaskedLM op for
// op (training mode, so dropout is live when its probability is non-zero).
// Configs of every builtin family are parsed here; Llama's graph is built in
// Llama.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/Models.h"
#include "frontend/GraphBuilder.h"
#include "dialects/mlc/MlcDialect.h"
#include "dialects/mlc/MlcLosses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
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
      {"rope_scaling", "null"},
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

/// Reads an HF config.json into `config.values`: the family's keys from the
/// file, HF's defaults (the config class's) for those it leaves out, and an
/// error naming any key whose value the builder does not build.
static llvm::Error readHFConfig(llvm::StringRef path, ModelConfig &config) {
  auto error = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + msg);
  };
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
      continue; // checked above; read below
    // Read below: the rotary base of transformers 5 (Llama family), and the
    // attention window of Mistral and Qwen2/Qwen3.
    if (family == "llama" && (key == "rope_parameters" || key == "sliding_window" ||
                              key == "layer_types"))
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
    std::string hint = key == "rope_scaling"
                           ? " (the presets tinyllama-1.1b, llama-3.2-1b, qwen2-0.5b give "
                             "real shapes)"
                           : " (only " + only + ")";
    return error(key + " = " + jsonText(v) + " is not supported by the builtin " + family +
                 hint);
  }
  for (auto &[key, value] : config.values) {
    const llvm::json::Value *v = root->get(key);
    if (!v || key == "sliding_window")
      continue; // the window: below
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
  if (family == "llama") {
    // transformers 5's rope_parameters hold the rotary base.
    if (const llvm::json::Value *rp = root->get("rope_parameters");
        rp && rp->kind() != llvm::json::Value::Null) {
      const llvm::json::Object *rope = rp->getAsObject();
      if (!rope)
        return error("rope_parameters = " + jsonText(*rp) + " is not an object");
      for (auto &[k, value] : *rope) {
        if (k == "rope_type") {
          auto type = value.getAsString();
          if (!type || *type != "default")
            return error("rope_parameters.rope_type = " + jsonText(value) +
                         " is not supported by the builtin llama (only default)");
        } else if (k == "rope_theta") {
          auto theta = value.getAsNumber();
          if (!theta)
            return error("rope_parameters.rope_theta must be a number");
          config.values["rope_theta"] = *theta;
        } else {
          return error("rope_parameters." + k.str() + " = " + jsonText(value) +
                       " is not supported by the builtin llama (only rope_type default "
                       "and rope_theta)");
        }
      }
    }
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
  }
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
    skip = {"qkv_bias", "qk_norm", "sliding_window"};
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
  // meta-llama/Llama-3.1-8B is Llama-3-8B's shapes with rope_scaling
  // {rope_type: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4,
  // original_max_position_embeddings: 8192}, which the builtin rotary does
  // not build: refused by name rather than trained with Llama 3's
  // frequencies.
  if (family == "llama" && config.preset == "llama-3.1-8b")
    return error("llama-3.1-8b: its rope_scaling (llama3: factor 8, low_freq_factor 1, "
                 "high_freq_factor 4, original_max_position_embeddings 8192) is not built by "
                 "the builtin rotary; llama-3-8b has the same shapes and parameters, with "
                 "Llama 3's unscaled frequencies");
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

//===----------------------------------------------------------------------===//
// Graph construction
//===----------------------------------------------------------------------===//

namespace {

/// Mean cross-entropy of flattened logits [N, V] against labels [N].
Value crossEntropy(GraphBuilder &g, Value logits, Value labels) {
  return g.b.create<CrossEntropyOp>(g.loc, logits, labels,
                                    g.b.getI64IntegerAttr(-100));
}

OwningOpRef<ModuleOp> buildGPT2(MLIRContext &ctx, const ModelConfig &c,
                                const BuildOptions &o, Type dtype) {
  GraphBuilder g(ctx, dtype);
  OpBuilder &b = g.b;
  Location &loc = g.loc; // follows g.at(): the part of the model being built
  const int64_t V = c.get("vocab_size"), P = c.get("n_positions"),
                E = c.get("n_embd"), L = c.get("n_layer"), H = c.get("n_head");
  const int64_t B = o.microBatch, S = o.seqLen, D = E / H;
  // n_inner: the MLP's width (HF's null, held as 0: 4 * n_embd).
  const int64_t I = c.get("n_inner") ? c.get("n_inner") : 4 * E;
  const double eps = c.getFloat("layer_norm_epsilon");
  const double range = c.getFloat("initializer_range");
  const bool tied = c.get("tie_word_embeddings");
  Type i64 = b.getI64Type();

  // GPT2PreTrainedModel._init_weights: N(0, initializer_range), the residual
  // projections' weights scaled by 1/sqrt(2 * n_layer).
  const std::string init = "normal:" + formatNumber(range);
  std::string residualInit = "normal:" + formatNumber(range / std::sqrt(2.0 * L));
  Value wte = g.param("transformer.wte.weight", {V, E}, init);
  Value wpe = g.param("transformer.wpe.weight", {P, E}, init);
  struct Layer {
    Value ln1w, ln1b, attnW, attnB, projW, projB, ln2w, ln2b, fcW, fcB, mlpW, mlpB;
  };
  SmallVector<Layer> layers;
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "transformer.h." + std::to_string(i) + ".";
    Layer l;
    l.ln1w = g.param(p + "ln_1.weight", {E}, "ones");
    l.ln1b = g.param(p + "ln_1.bias", {E});
    l.attnW = g.param(p + "attn.c_attn.weight", {E, 3 * E}, init);
    l.attnB = g.param(p + "attn.c_attn.bias", {3 * E});
    l.projW = g.param(p + "attn.c_proj.weight", {E, E}, residualInit);
    l.projB = g.param(p + "attn.c_proj.bias", {E});
    l.ln2w = g.param(p + "ln_2.weight", {E}, "ones");
    l.ln2b = g.param(p + "ln_2.bias", {E});
    l.fcW = g.param(p + "mlp.c_fc.weight", {E, I}, init);
    l.fcB = g.param(p + "mlp.c_fc.bias", {I});
    l.mlpW = g.param(p + "mlp.c_proj.weight", {I, E}, residualInit);
    l.mlpB = g.param(p + "mlp.c_proj.bias", {E});
    layers.push_back(l);
  }
  Value lnfW = g.param("transformer.ln_f.weight", {E}, "ones");
  Value lnfB = g.param("transformer.ln_f.bias", {E});
  // tie_word_embeddings false: GPT2LMHeadModel's lm_head (nn.Linear, no bias)
  // is its own parameter.
  Value head = tied ? wte : g.param("lm_head.weight", {V, E}, init);
  Value ids = g.input("input_ids", {B, S}, i64);
  Value labels = g.input("labels", {B, S}, i64);

  g.at("gpt2.embeddings");
  PackedDocuments docs(g, o, B, S);
  Value x = b.create<AddOp>(loc, b.create<EmbeddingOp>(loc, wte, ids),
                            b.create<EmbeddingOp>(loc, wpe, docs.positions));
  x = g.dropout(x, c.getFloat("embd_pdrop"));
  // GPT2Attention divides the scores by sqrt(head dim) (scale_attn_weights)
  // and by layer_idx + 1 (scale_attn_by_inverse_layer_idx): one scale.
  const bool scaleBySqrtD = c.get("scale_attn_weights"),
             scaleByLayer = c.get("scale_attn_by_inverse_layer_idx");
  for (auto [index, l] : llvm::enumerate(layers)) {
    double scale = scaleBySqrtD ? 1.0 / std::sqrt(double(D)) : 1.0;
    if (scaleByLayer)
      scale /= double(index + 1);
    const std::string layer = "gpt2.h." + std::to_string(index);
    g.at(layer + ".attn");
    Value h = g.layerNorm(x, l.ln1w, l.ln1b, eps);
    Value qkv = g.dense(h, l.attnW, l.attnB, /*linear=*/false);
    auto split = b.create<SplitOp>(loc, qkv, b.getI64IntegerAttr(2),
                                   b.getDenseI64ArrayAttr({E, E, E}));
    Value q = docs.heads(split.getResult(0), H, D);
    Value k = docs.heads(split.getResult(1), H, D);
    Value v = docs.heads(split.getResult(2), H, D);
    // The op's default scale is 1/sqrt(D): leave it unset where it is that.
    bool defaultScale = scaleBySqrtD && !scaleByLayer;
    Value a = docs.merge(
        docs.attention(q, k, v, c.getFloat("attn_pdrop"), defaultScale ? 0.0 : scale), E);
    a = g.dropout(g.dense(a, l.projW, l.projB, false), c.getFloat("resid_pdrop"));
    x = b.create<AddOp>(loc, x, a);
    g.at(layer + ".mlp");
    h = g.layerNorm(x, l.ln2w, l.ln2b, eps);
    h = b.create<GeluOp>(loc, g.dense(h, l.fcW, l.fcB, false),
                         GeluApproximation::tanh);
    h = g.dropout(g.dense(h, l.mlpW, l.mlpB, false), c.getFloat("resid_pdrop"));
    x = b.create<AddOp>(loc, x, h);
  }
  g.at("gpt2.lm_head");
  x = g.layerNorm(x, lnfW, lnfB, eps);
  Value logits = b.create<MatmulOp>(loc, x, head, false, /*transpose_rhs=*/true);
  // Next-token loss: logits[:, :-1] against labels[:, 1:].
  Value loss = buildLanguageModelLoss(b, loc, logits, labels, LanguageModelLoss::Causal);
  g.finish({{"loss", loss}, {"logits", logits}});
  return std::move(g.module);
}

OwningOpRef<ModuleOp> buildBERT(MLIRContext &ctx, const ModelConfig &c,
                                const BuildOptions &o, Type dtype) {
  GraphBuilder g(ctx, dtype);
  OpBuilder &b = g.b;
  Location &loc = g.loc; // follows g.at(): the part of the model being built
  const int64_t V = c.get("vocab_size"), P = c.get("max_position_embeddings"),
                E = c.get("hidden_size"), L = c.get("num_hidden_layers"),
                H = c.get("num_attention_heads"), I = c.get("intermediate_size"),
                T = c.get("type_vocab_size");
  const int64_t B = o.microBatch, S = o.seqLen, D = E / H;
  const double eps = c.getFloat("layer_norm_eps");
  const double hiddenDrop = c.getFloat("hidden_dropout_prob");
  Type i64 = b.getI64Type();
  // BertPreTrainedModel._init_weights: linears and embeddings from
  // N(0, initializer_range), biases zero, LayerNorms one and zero.
  const std::string init = "normal:" + formatNumber(c.getFloat("initializer_range"));

  Value word = g.param("bert.embeddings.word_embeddings.weight", {V, E}, init);
  Value position = g.param("bert.embeddings.position_embeddings.weight", {P, E}, init);
  Value tokenType = g.param("bert.embeddings.token_type_embeddings.weight", {T, E}, init);
  Value embLnW = g.param("bert.embeddings.LayerNorm.weight", {E}, "ones");
  Value embLnB = g.param("bert.embeddings.LayerNorm.bias", {E});
  struct Layer {
    Value qW, qB, kW, kB, vW, vB, oW, oB, ln1W, ln1B, iW, iB, outW, outB, ln2W, ln2B;
  };
  SmallVector<Layer> layers;
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "bert.encoder.layer." + std::to_string(i) + ".";
    Layer l;
    l.qW = g.param(p + "attention.self.query.weight", {E, E}, init);
    l.qB = g.param(p + "attention.self.query.bias", {E});
    l.kW = g.param(p + "attention.self.key.weight", {E, E}, init);
    l.kB = g.param(p + "attention.self.key.bias", {E});
    l.vW = g.param(p + "attention.self.value.weight", {E, E}, init);
    l.vB = g.param(p + "attention.self.value.bias", {E});
    l.oW = g.param(p + "attention.output.dense.weight", {E, E}, init);
    l.oB = g.param(p + "attention.output.dense.bias", {E});
    l.ln1W = g.param(p + "attention.output.LayerNorm.weight", {E}, "ones");
    l.ln1B = g.param(p + "attention.output.LayerNorm.bias", {E});
    l.iW = g.param(p + "intermediate.dense.weight", {I, E}, init);
    l.iB = g.param(p + "intermediate.dense.bias", {I});
    l.outW = g.param(p + "output.dense.weight", {E, I}, init);
    l.outB = g.param(p + "output.dense.bias", {E});
    l.ln2W = g.param(p + "output.LayerNorm.weight", {E}, "ones");
    l.ln2B = g.param(p + "output.LayerNorm.bias", {E});
    layers.push_back(l);
  }
  Value headW = g.param("cls.predictions.transform.dense.weight", {E, E}, init);
  Value headB = g.param("cls.predictions.transform.dense.bias", {E});
  Value headLnW = g.param("cls.predictions.transform.LayerNorm.weight", {E}, "ones");
  Value headLnB = g.param("cls.predictions.transform.LayerNorm.bias", {E});
  Value decoderBias = g.param("cls.predictions.bias", {V});

  // Padded batches are [B, S] with an additive attention mask; unpadded
  // (varlen) ones pack the micro-batch's sequences into one dynamic token
  // dimension of T <= B * S tokens with their boundaries in cu_seqlens (B + 1
  // offsets; sequences past the last are empty), so nothing is padded.
  const bool varlen = o.varlen;
  const int64_t tokens = ShapedType::kDynamic;
  Value ids, types, positions, labels, cu, additive;
  g.at("bert.embeddings");
  if (varlen) {
    g.module->getOperation()->setAttr("mlc.token_capacity", b.getI64IntegerAttr(B * S));
    ids = g.input("input_ids", {tokens}, i64);
    types = g.input("token_type_ids", {tokens}, i64);
    positions = g.input("position_ids", {tokens}, i64);
    labels = g.input("labels", {tokens}, i64);
    cu = g.input("cu_seqlens", {B + 1}, b.getI32Type());
  } else {
    ids = g.input("input_ids", {B, S}, i64);
    types = g.input("token_type_ids", {B, S}, i64);
    Value attentionMask = g.input("attention_mask", {B, S}, i64);
    labels = g.input("labels", {B, S}, i64);
    positions = b.create<IotaOp>(loc, RankedTensorType::get({S}, i64), b.getI64IntegerAttr(0));
    // Additive mask as transformers builds it: (1 - mask) * lowest, [B, 1, 1, S].
    Value maskF = b.create<CastOp>(loc, RankedTensorType::get({B, S}, dtype), attentionMask);
    Value inverted = b.create<SubOp>(loc, g.constant(1.0), maskF);
    double lowest = dtype.isF64() ? std::numeric_limits<double>::lowest()
                                  : double(std::numeric_limits<float>::lowest());
    additive = g.reshape(b.create<MulOp>(loc, inverted, g.constant(lowest)), {B, 1, 1, S});
  }
  auto heads = [&](Value y) {
    return varlen ? g.reshape(y, {tokens, H, D}) : g.splitHeads(y, B, S, H, D);
  };
  auto merge = [&](Value a) {
    return varlen ? g.reshape(a, {tokens, E}) : g.mergeHeads(a, B, S, E);
  };

  Value x = b.create<AddOp>(loc, b.create<EmbeddingOp>(loc, word, ids),
                            b.create<EmbeddingOp>(loc, tokenType, types));
  x = b.create<AddOp>(loc, x, b.create<EmbeddingOp>(loc, position, positions));
  x = g.dropout(g.layerNorm(x, embLnW, embLnB, eps), hiddenDrop);
  for (auto [index, l] : llvm::enumerate(layers)) {
    const std::string layer = "bert.encoder.layer." + std::to_string(index);
    g.at(layer + ".attention");
    Value q = heads(g.dense(x, l.qW, l.qB, true));
    Value k = heads(g.dense(x, l.kW, l.kB, true));
    Value v = heads(g.dense(x, l.vW, l.vB, true));
    Value a = g.attention(q, k, v, additive, /*causal=*/false,
                          c.getFloat("attention_probs_dropout_prob"), cu);
    a = g.dropout(g.dense(merge(a), l.oW, l.oB, true), hiddenDrop);
    x = g.layerNorm(b.create<AddOp>(loc, a, x), l.ln1W, l.ln1B, eps);
    g.at(layer + ".mlp"); // HF's intermediate and output
    Value h = b.create<GeluOp>(loc, g.dense(x, l.iW, l.iB, true),
                               GeluApproximation::none);
    h = g.dropout(g.dense(h, l.outW, l.outB, true), hiddenDrop);
    x = g.layerNorm(b.create<AddOp>(loc, h, x), l.ln2W, l.ln2B, eps);
  }
  g.at("bert.cls");
  Value t = b.create<GeluOp>(loc, g.dense(x, headW, headB, true),
                             GeluApproximation::none);
  t = g.layerNorm(t, headLnW, headLnB, eps);
  Value logits = g.dense(t, word, decoderBias, /*linear=*/true);
  Value loss = varlen ? crossEntropy(g, logits, labels)
                      : buildLanguageModelLoss(b, loc, logits, labels, LanguageModelLoss::Masked);
  g.finish({{"loss", loss}, {"logits", logits}});
  return std::move(g.module);
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>> buildModel(MLIRContext &ctx,
                                                 const ModelConfig &config,
                                                 const BuildOptions &options) {
  ctx.loadDialect<MlcDialect, func::FuncDialect>();
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  Type dtype;
  if (options.dtype == "f32")
    dtype = Float32Type::get(&ctx);
  else if (options.dtype == "f64")
    dtype = Float64Type::get(&ctx);
  else
    return error("unsupported dtype '" + options.dtype + "' (expected f32 or f64)");
  if (options.varlen && config.family != "bert")
    return error("--varlen packs BERT's variable-length sequences; " +
                 std::string(config.family == "gpt2" ? "GPT-2" : "Llama") +
                 " trains on full samples");
  if ((options.resetAttentionMask || options.resetPositionIds) && config.family == "bert")
    return error("--reset-attention-mask and --reset-position-ids split causal samples "
                 "at their EOD tokens; BERT's attention is bidirectional (--varlen "
                 "packs BERT's sequences)");
  if (options.microBatch < 1)
    return error("micro-batch must be >= 1");
  const char *positions =
      config.family == "gpt2" ? "n_positions" : "max_position_embeddings";
  if (options.seqLen < 2 || options.seqLen > config.get(positions))
    return error(llvm::formatv("seq-len {0} must be in [2, {1}] ({2})",
                               options.seqLen, config.get(positions), positions)
                     .str());
  // The memory a training step would need, estimated before anything is
  // built: parameters, gradients and two AdamW moments, and the activations
  // a layer keeps for backward (about 34 E + 5 H S values per token).
  // The step's memory estimate: parameters with their gradient and moments,
  // and the activations the backward keeps.
  const double tokens = double(options.microBatch) * double(options.seqLen);
  double params, activations;
  if (config.family == "llama") {
    params = llamaParameterCount(config);
    activations = tokens * llamaActivationsPerToken(config, options.seqLen);
  } else {
    const bool gpt = config.family == "gpt2";
    double V = config.get("vocab_size"), P = config.get(positions),
           E = config.get(gpt ? "n_embd" : "hidden_size"),
           L = config.get(gpt ? "n_layer" : "num_hidden_layers"),
           H = config.get(gpt ? "n_head" : "num_attention_heads"),
           I = gpt ? double(config.get("n_inner") ? config.get("n_inner") : 4 * E)
                   : double(config.get("intermediate_size"));
    const bool untied = gpt && !config.get("tie_word_embeddings");
    params = (V * (untied ? 2 : 1) + P) * E + L * (4 * E * E + 2 * E * I + 9 * E + I) + 4 * E;
    activations = tokens * L * (34 * E + 5 * H * double(options.seqLen)) + tokens * V * 2;
  }
  const double bytes = (4 * params + activations) * (options.dtype == "f64" ? 8 : 4);
  const double limit = 16.0 * (1ull << 40); // far beyond any one device
  if (!std::isfinite(bytes) || bytes > limit || tokens > 1e12)
    return error(llvm::formatv("this model and batch would need about {0:f0} GiB to train "
                               "({1:e2} parameters, micro-batch {2} x seq-len {3}); the "
                               "limit is 16384 GiB",
                               bytes / double(1ull << 30), params, options.microBatch,
                               options.seqLen)
                     .str());
  OwningOpRef<ModuleOp> module =
      config.family == "gpt2"   ? buildGPT2(ctx, config, options, dtype)
      : config.family == "bert" ? buildBERT(ctx, config, options, dtype)
                                : buildLlama(ctx, config, options, dtype);
  if (failed(verify(*module)))
    return error("internal error: the built " + config.family +
                 " graph does not verify");
  return std::move(module);
}

} // namespace mlc
