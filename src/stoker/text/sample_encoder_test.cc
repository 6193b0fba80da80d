#include "stoker/text/sample_encoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_tokenizer.h"

namespace stoker::text {
namespace {

std::shared_ptr<const Tokenizer> ChatTokenizer() { return testing::ByteChatTokenizer(); }

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

TEST(SampleEncoderTest, MaxLengthTruncatesButNeverSplitsAnImage) {
  auto t = ChatTokenizer();
  SampleEncodeOptions options;
  auto full = Encode(*t, kChat, options, {{1, 4, 4}});
  ASSERT_TRUE(full.ok());
  options.max_length = 60;
  auto cut = Encode(*t, kChat, options, {{1, 4, 4}});
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->input_ids,
            std::vector<int64_t>(full->input_ids.begin(), full->input_ids.begin() + 60));
  EXPECT_TRUE(cut->truncated);
  EXPECT_EQ(cut->num_images, 1);
  // 44 tokens precede the image's <|vision_start|>: a cut inside its run ends the
  // sample before it and drops the image.
  for (int64_t max_length : {45, 46, 49}) {
    options.max_length = max_length;
    auto before = Encode(*t, kChat, options, {{1, 4, 4}});
    ASSERT_TRUE(before.ok()) << before.status().ToString();
    EXPECT_EQ(before->input_ids,
              std::vector<int64_t>(full->input_ids.begin(), full->input_ids.begin() + 44));
    EXPECT_EQ(before->num_images, 0);
    EXPECT_TRUE(before->truncated);
    EXPECT_EQ(before->position_ids.size(), 3u * 44);
  }
  options.max_length = 0;
  EXPECT_FALSE(full->truncated);
  EXPECT_EQ(full->num_images, 1);
}

}  // namespace
}  // namespace stoker::text
