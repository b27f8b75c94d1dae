//===- GenerateTest.cpp - streaming generated text --------------------------===//

#include "support/Error.h"
#include "runtime/train/Generate.h"

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
