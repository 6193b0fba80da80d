#include "stoker/text/sample_encoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stoker/text/bpe.h"
#include "stoker/text/unicode.h"

namespace stoker::text {
namespace {

// A byte-level tokenizer with no merges and the Qwen chat/vision tokens at their Qwen
// ids: every character of plain text is one token, which makes labels easy to read.
std::shared_ptr<const Tokenizer> ChatTokenizer() {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    AppendUtf8(ByteToChar(static_cast<uint8_t>(b)), &ch);
    std::string escaped;
    for (char c : ch) {
      if (c == '"' || c == '\\') escaped += '\\';
      escaped += c;
    }
    vocab += (b ? "," : "") + std::string("\"") + escaped + "\": " + std::to_string(b);
  }
  std::string added;
  const std::pair<int, const char*> tokens[] = {
      {151644, "<|im_start|>"},     {151645, "<|im_end|>"},   {151652, "<|vision_start|>"},
      {151653, "<|vision_end|>"},   {151655, "<|image_pad|>"}, {151667, "<think>"},
      {151668, "</think>"}};
  for (const auto& [id, content] : tokens) {
    if (!added.empty()) added += ",";
    added += R"({"id": )" + std::to_string(id) + R"(, "content": ")" + content +
             R"(", "special": true, "normalized": false})";
  }
  const std::string json = R"({"normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
      "decoder": {"type": "ByteLevel"}, "added_tokens": [)" + added +
                           R"(], "model": {"type": "BPE", "vocab": {)" + vocab +
                           R"(}, "merges": []}})";
  auto t = Tokenizer::FromJson(json);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

std::string TrainedText(const Tokenizer& t, const EncodedSample& s) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < s.labels.size(); ++i) {
    if (s.labels[i] != kIgnoreIndex) ids.push_back(static_cast<int32_t>(s.labels[i]));
  }
  return t.Decode(ids, false);
}

Result<EncodedSample> Encode(const Tokenizer& t, const std::string& json,
                             const SampleEncodeOptions& options,
                             std::vector<ImageGrid> grids = {}) {
  auto conv = ParseConversation(json);
  if (!conv.ok()) return conv.status();
  TokenizerSession session;
  return EncodeSample(t, &session, *conv, grids, options);
}

constexpr char kChat[] = R"({"messages": [
  {"role": "user", "content": [{"type": "image", "image": "a.jpg"}, {"type": "text", "text": "Hi?"}]},
  {"role": "assistant", "content": "Yo."},
  {"role": "user", "content": "More"},
  {"role": "assistant", "content": "\nOk"}]})";

TEST(SampleEncoderTest, TrainsAssistantContentImEndAndNewline) {
  auto t = ChatTokenizer();
  auto s = Encode(*t, kChat, {}, {{1, 4, 4}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Every char is a token, so "\nOk" keeps its own "\n": trained.
  EXPECT_EQ(TrainedText(*t, *s), "Yo.<|im_end|>\n\nOk<|im_end|>\n");
  EXPECT_EQ(s->input_ids.size(), s->labels.size());
  EXPECT_EQ(s->position_ids.size(), 3 * s->input_ids.size());
  EXPECT_EQ(s->attention_mask, std::vector<int64_t>(s->input_ids.size(), 1));
}

TEST(SampleEncoderTest, Options) {
  auto t = ChatTokenizer();
  SampleEncodeOptions last;
  last.label_mode = LabelMode::kLastAssistant;
  EXPECT_EQ(TrainedText(*t, *Encode(*t, kChat, last, {{1, 4, 4}})), "\nOk<|im_end|>\n");
  SampleEncodeOptions no_newline;
  no_newline.train_trailing_newline = false;
  EXPECT_EQ(TrainedText(*t, *Encode(*t, kChat, no_newline, {{1, 4, 4}})),
            "Yo.<|im_end|>\nOk<|im_end|>");
  SampleEncodeOptions all;
  all.label_mode = LabelMode::kAll;
  auto s = Encode(*t, kChat, all, {{1, 4, 4}});
  EXPECT_EQ(s->labels, s->input_ids);
  SampleEncodeOptions think;
  think.family = ModelFamily::kQwen3VL;
  think.chat.qwen3_empty_think = true;
  EXPECT_EQ(TrainedText(*t, *Encode(*t, kChat, think, {{1, 4, 4}})),
            "<think>\n\n</think>\n\nYo.<|im_end|>\n<think>\n\n</think>\n\n\nOk<|im_end|>\n");
}

TEST(SampleEncoderTest, ImageTokensAreNeverTrainedAndGetVisionPositions) {
  auto t = ChatTokenizer();
  auto s = Encode(*t, kChat, {}, {{1, 4, 4}});
  ASSERT_TRUE(s.ok());
  int pads = 0;
  const size_t n = s->input_ids.size();
  for (size_t i = 0; i < n; ++i) {
    if (s->input_ids[i] != kImagePadId) continue;
    EXPECT_EQ(s->labels[i], kIgnoreIndex);
    // Temporal row is constant inside the image block.
    EXPECT_EQ(s->position_ids[i], s->position_ids[i - pads]);
    ++pads;
  }
  EXPECT_EQ(pads, 4);
}

TEST(SampleEncoderTest, MaxLengthTruncatesOrRefusesToCutAnImage) {
  auto t = ChatTokenizer();
  SampleEncodeOptions options;
  auto full = Encode(*t, kChat, options, {{1, 4, 4}});
  ASSERT_TRUE(full.ok());
  options.max_length = 60;
  auto cut = Encode(*t, kChat, options, {{1, 4, 4}});
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->input_ids,
            std::vector<int64_t>(full->input_ids.begin(), full->input_ids.begin() + 60));
  options.max_length = 46;  // 44 tokens precede the image's <|vision_start|>
  auto bad = Encode(*t, kChat, options, {{1, 4, 4}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kLimitExceeded);
}

}  // namespace
}  // namespace stoker::text
