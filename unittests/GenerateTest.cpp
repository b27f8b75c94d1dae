//===- GenerateTest.cpp - streaming generated text --------------------------===//

#include "support/Error.h"
#include "runtime/train/Generate.h"
#include "runtime/train/GenerationConfig.h"

#include <gtest/gtest.h>

using namespace mlc::rt;

namespace {

/// The pieces a byte tokenizer's ids of `text` stream as, one per id, and
/// then what finish() returns.
std::vector<std::string> stream(const std::string &text) {
  std::unique_ptr<Tokenizer> bytes = makeTokenizer("ByteTokenizer", "", "");
  TextStream s(*bytes);
  std::vector<std::string> pieces;
  for (int32_t id : bytes->encode(text))
    pieces.push_back(s.push(id));
  pieces.push_back(s.finish());
  return pieces;
}

} // namespace

TEST(TextStream, HoldsAnUnfinishedCharacterUntilItIsWhole) {
  // é is 2 bytes, 日 3, 🙂 4: each comes with its last byte.
  std::vector<std::string> want = {"a", "", "é", "", "", "日", "", "", "", "🙂", "b", ""};
  EXPECT_EQ(stream("aé日🙂b"), want);
}

TEST(TextStream, PassesStrayBytesOnAndEndsWithWhatIsHeld) {
  // A continuation byte with no lead, a lead byte that an ASCII byte breaks
  // off, and a lead byte at the very end (finish() returns it).
  std::vector<std::string> want = {"\x80", "", "\xC3z", "", "\xE6"};
  EXPECT_EQ(stream("\x80\xC3z\xE6"), want);
}

TEST(TextStream, PiecesMakeTheDecodedWhole) {
  std::unique_ptr<Tokenizer> bytes = makeTokenizer("ByteTokenizer", "", "");
  std::string text = "Grüße, 世界! \xF0\x9F\x98\x80 \xFF\x80 end";
  std::vector<int32_t> ids = bytes->encode(text);
  TextStream s(*bytes);
  std::string joined;
  for (int32_t id : ids)
    joined += s.push(id);
  joined += s.finish();
  EXPECT_EQ(joined, bytes->decode(ids));
}

// A tokenizer.json whose decoder strips the first token's leading space and
// joins <0xNN> byte tokens (Llama-2's): one id at a time would lose every
// word's space and turn each byte of a character into U+FFFD, so the stream
// decodes in context; its pieces still make the decoded whole, and a
// character spread over byte tokens comes whole.
TEST(TextStream, DecodesInContextForHuggingFaceDecoders) {
  std::unique_ptr<Tokenizer> t = makeTokenizer(
      "HuggingFaceTokenizer",
      MLC_SOURCE_DIR "/test/integration/Inputs/hf_tokenizers/llama2/tokenizer.json", "");
  ASSERT_TRUE(t->decodesInContext());
  std::string text = "Grüße, the world 世界 \xF0\x9F\xA7\xAA ok";
  std::vector<int32_t> ids = t->encode(text);
  TextStream s(*t);
  std::string joined;
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    pieces.push_back(s.push(id));
    joined += pieces.back();
  }
  joined += s.finish();
  EXPECT_EQ(joined, t->decode(ids));
  EXPECT_EQ(joined, text);
  for (const std::string &p : pieces)
    EXPECT_EQ(p.find("\xEF\xBF\xBD"), std::string::npos) << "a piece with U+FFFD: " << p;
}

TEST(GenerateFlags, NumbersParseStrictly) {
  GenerateOptions o;
  EXPECT_TRUE(setGenerateFlag(o, "temperature", "0.7"));
  EXPECT_EQ(o.temperature, 0.7);
  EXPECT_TRUE(setGenerateFlag(o, "max-tokens", "12"));
  EXPECT_EQ(o.maxTokens, 12);
  EXPECT_FALSE(setGenerateFlag(o, "steps", "3"));
  EXPECT_TRUE(setGenerateFlag(o, "tokenizer-model", "dir"));
  EXPECT_EQ(o.vocabFile, "dir");
  for (const char *bad : {"", "abc", "1e400", "nan", "inf", "-1", " 1", "1x"})
    for (const char *flag : {"temperature", "max-tokens", "top-k"}) {
      try {
        setGenerateFlag(o, flag, bad);
        ADD_FAILURE() << "--" << flag << " took '" << bad << "'";
      } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(std::string("--") + flag), std::string::npos);
      }
    }
}

TEST(GenerateFlags, TopPAndRepetitionPenaltyHaveTheirRanges) {
  GenerateOptions o;
  EXPECT_TRUE(setGenerateFlag(o, "top-p", "0.9"));
  EXPECT_EQ(o.topP, 0.9);
  EXPECT_TRUE(setGenerateFlag(o, "repetition-penalty", "1.2"));
  EXPECT_EQ(o.repetitionPenalty, 1.2);
  EXPECT_EQ(o.given, (std::set<std::string>{"top-p", "repetition-penalty"}));
  for (const char *bad : {"0", "1.5", "nan"})
    EXPECT_THROW(setGenerateFlag(o, "top-p", bad), Error) << bad;
  EXPECT_THROW(setGenerateFlag(o, "repetition-penalty", "0"), Error);
}

// A generation_config.json stands for transformers' GenerationConfig: what
// it leaves out takes GenerationConfig's defaults, and a flag given on the
// command line wins over it.
TEST(GenerationConfig, KeysLeftOutTakeTransformersDefaults) {
  GenerateOptions o; // mlc's own defaults: temperature 1, 64 tokens
  applyGenerationConfig(o, R"({"eos_token_id": [7, 9], "bos_token_id": 3})", "g.json");
  EXPECT_EQ(o.temperature, 0.0); // do_sample false: greedy
  EXPECT_EQ(o.maxLength, 20);    // max_length 20, prompt included
  EXPECT_EQ(o.topK, 50);
  EXPECT_EQ(o.eosIds, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(o.bosId, 3);

  GenerateOptions s;
  applyGenerationConfig(s, R"({"do_sample": true, "temperature": 0.6, "top_p": 0.9,
                               "max_new_tokens": 12, "repetition_penalty": 1.1})",
                        "g.json");
  EXPECT_EQ(s.temperature, 0.6);
  EXPECT_EQ(s.topP, 0.9);
  EXPECT_EQ(s.maxTokens, 12);
  EXPECT_EQ(s.maxLength, -1);
  EXPECT_EQ(s.repetitionPenalty, 1.1);
}

TEST(GenerationConfig, FlagsWin) {
  GenerateOptions o;
  setGenerateFlag(o, "temperature", "0.8");
  setGenerateFlag(o, "max-tokens", "5");
  setGenerateFlag(o, "top-k", "3");
  applyGenerationConfig(o, R"({"do_sample": false, "max_length": 30, "top_k": 10})", "g.json");
  EXPECT_EQ(o.temperature, 0.8);
  EXPECT_EQ(o.maxTokens, 5);
  EXPECT_EQ(o.maxLength, -1);
  EXPECT_EQ(o.topK, 3);
}

TEST(GenerationConfig, RefusesWhatChangesTokensAndMlcDoesNotDo) {
  auto error = [](const std::string &text) {
    GenerateOptions o;
    try {
      applyGenerationConfig(o, text, "d/generation_config.json");
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error(R"({"num_beams": 1, "length_penalty": 2.0, "pad_token_id": 0})"), "accepted");
  EXPECT_NE(error(R"({"no_repeat_ngram_size": 3})").find("\"no_repeat_ngram_size\" is 3"),
            std::string::npos);
  EXPECT_NE(error(R"({"suppress_tokens": [1, 2]})").find("\"suppress_tokens\""),
            std::string::npos);
  EXPECT_NE(error(R"({"top_k": 2.5})").find("\"top_k\" must be an integer"), std::string::npos);
  EXPECT_NE(error(R"({"top_p": 0})").find("\"top_p\" must be in (0, 1]"), std::string::npos);
  EXPECT_NE(error(R"({"do_sample": 1})").find("\"do_sample\" must be true or false"),
            std::string::npos);
  EXPECT_NE(error(R"([1])").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error(R"({"frobnicate": true})").find("d/generation_config.json: \"frobnicate\" is "
                                                   "not a key"),
            std::string::npos);
}
