#include "test_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "stoker/text/bpe.h"
#include "stoker/text/unicode.h"

namespace stoker::testing {

// A byte-level tokenizer with no merges and the Qwen chat/vision tokens at their Qwen
// ids: every character of plain text is one token, which makes labels easy to read.
std::shared_ptr<const text::Tokenizer> ByteChatTokenizer() {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    text::AppendUtf8(text::ByteToChar(static_cast<uint8_t>(b)), &ch);
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
  auto t = text::Tokenizer::FromJson(json);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

}  // namespace stoker::testing
