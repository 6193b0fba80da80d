#include "stoker/text/chat_template.h"

#include <gtest/gtest.h>

#include <string>

#include "stoker/text/conversation.h"

namespace stoker::text {
namespace {

Conversation Parse(const std::string& json) {
  auto conv = ParseConversation(json);
  EXPECT_TRUE(conv.ok()) << conv.status().ToString();
  return conv.ok() ? *conv : Conversation{};
}

std::string Render(const Conversation& conv, ModelFamily family,
                   std::vector<ImageGrid> grids, TemplateOptions options = {}) {
  auto chat = RenderChat(conv, family, grids, options);
  EXPECT_TRUE(chat.ok()) << chat.status().ToString();
  return chat.ok() ? JoinChunks(*chat) : "";
}

// The spec's §11 example: two turns, one image each (grids of one visual token here).
constexpr char kTwoTurns[] = R"({"messages": [
  {"role": "user", "content": [{"type": "image", "image": "a.jpg"}, {"type": "text", "text": "What is this?"}]},
  {"role": "assistant", "content": "A cat."},
  {"role": "user", "content": [{"type": "text", "text": "And this?"}, {"type": "image", "image": "b.jpg"}]},
  {"role": "assistant", "content": "A dog."}]})";

constexpr char kImage[] = "<|vision_start|><|image_pad|><|vision_end|>";

TEST(ChatTemplateTest, Qwen2AddsTheDefaultSystemPrompt) {
  const std::string want =
      std::string("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n") +
      "<|im_start|>user\n" + kImage + "What is this?<|im_end|>\n" +
      "<|im_start|>assistant\nA cat.<|im_end|>\n" +
      "<|im_start|>user\nAnd this?" + kImage + "<|im_end|>\n" +
      "<|im_start|>assistant\nA dog.<|im_end|>\n";
  const Conversation conv = Parse(kTwoTurns);
  EXPECT_EQ(Render(conv, ModelFamily::kQwen2VL, {{1, 2, 2}, {1, 2, 2}}), want);
  EXPECT_EQ(Render(conv, ModelFamily::kQwen25VL, {{1, 2, 2}, {1, 2, 2}}), want);
}

TEST(ChatTemplateTest, Qwen3HasNoDefaultSystemPrompt) {
  const std::string want = std::string("<|im_start|>user\n") + kImage +
                           "What is this?<|im_end|>\n" +
                           "<|im_start|>assistant\nA cat.<|im_end|>\n" +
                           "<|im_start|>user\nAnd this?" + kImage + "<|im_end|>\n" +
                           "<|im_start|>assistant\nA dog.<|im_end|>\n";
  EXPECT_EQ(Render(Parse(kTwoTurns), ModelFamily::kQwen3VL, {{1, 2, 2}, {1, 2, 2}}), want);
}

TEST(ChatTemplateTest, SystemMessageAndVisionIds) {
  const Conversation conv = Parse(R"({"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "image", "image": "a.jpg"}, {"type": "text", "text": "What is this?"}]},
    {"role": "assistant", "content": "A cat."}]})");
  TemplateOptions options;
  options.add_vision_id = true;
  const std::string want = std::string("<|im_start|>system\nBe brief.<|im_end|>\n") +
                           "<|im_start|>user\nPicture 1: " + kImage +
                           "What is this?<|im_end|>\n<|im_start|>assistant\nA cat.<|im_end|>\n";
  EXPECT_EQ(Render(conv, ModelFamily::kQwen2VL, {{1, 2, 2}}, options), want);
  EXPECT_EQ(Render(conv, ModelFamily::kQwen3VL, {{1, 2, 2}}, options), want);
}

TEST(ChatTemplateTest, ExpandsEachImageToItsTokenCount) {
  const Conversation conv = Parse(kTwoTurns);
  auto chat = RenderChat(conv, ModelFamily::kQwen2VL, {{1, 4, 4}, {1, 6, 8}}, {});
  ASSERT_TRUE(chat.ok());
  const std::string text = JoinChunks(*chat);
  size_t pads = 0;
  for (size_t at = text.find("<|image_pad|>"); at != std::string::npos;
       at = text.find("<|image_pad|>", at + 1)) {
    ++pads;
  }
  EXPECT_EQ(pads, 4u + 12u);
  EXPECT_EQ(VisualTokenCount({1, 6, 8}), 12);
}

TEST(ChatTemplateTest, GenerationPromptAndEmptyThink) {
  const Conversation conv = Parse(R"({"messages": [{"role": "user", "content": "Hi"},
                                                   {"role": "assistant", "content": "Hello."}]})");
  TemplateOptions options;
  options.qwen3_empty_think = true;
  options.add_generation_prompt = true;
  EXPECT_EQ(Render(conv, ModelFamily::kQwen3VL, {}, options),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
            "Hello.<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ChunksTellTheLabelRuleWhatIsContent) {
  auto chat = RenderChat(Parse(kTwoTurns), ModelFamily::kQwen2VL, {{1, 2, 2}, {1, 2, 2}}, {});
  ASSERT_TRUE(chat.ok());
  std::string content;
  for (const RenderedChunk& c : chat->chunks) {
    if (c.part == RenderedChunk::Part::kAssistantContent) content += c.text + "|";
  }
  EXPECT_EQ(content, "A cat.|A dog.|");
}

TEST(ChatTemplateTest, GridAndTemplateErrors) {
  const Conversation conv = Parse(kTwoTurns);
  EXPECT_FALSE(RenderChat(conv, ModelFamily::kQwen2VL, {{1, 2, 2}}, {}).ok());
  EXPECT_FALSE(RenderChat(conv, ModelFamily::kQwen2VL, {{1, 3, 2}, {1, 2, 2}}, {}).ok());
  const Conversation drawn = Parse(R"({"messages": [{"role": "user", "content": "Draw"},
      {"role": "assistant", "content": [{"type": "image", "image": "c.png"}]}]})");
  EXPECT_TRUE(RenderChat(drawn, ModelFamily::kQwen2VL, {{1, 2, 2}}, {}).ok());
  auto qwen3 = RenderChat(drawn, ModelFamily::kQwen3VL, {{1, 2, 2}}, {});
  ASSERT_FALSE(qwen3.ok());
  EXPECT_NE(qwen3.status().message().find("drops images"), std::string::npos);
  EXPECT_FALSE(ParseModelFamily("llama").ok());
  EXPECT_EQ(*ParseModelFamily("Qwen2.5-VL"), ModelFamily::kQwen25VL);
}

TEST(ConversationTest, LlavaTagsBecomeImageItems) {
  const Conversation conv = Parse(R"({"image": ["a.jpg", "b.jpg"], "conversations": [
      {"from": "human", "value": "<image>\nLeft, <image> right?"},
      {"from": "gpt", "value": "Same."}]})");
  ASSERT_EQ(conv.messages.size(), 2u);
  EXPECT_EQ(conv.images, (std::vector<std::string>{"a.jpg", "b.jpg"}));
  const auto& items = conv.messages[0].content;
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0].kind, ContentItem::Kind::kImage);
  EXPECT_EQ(items[1].text, "\nLeft, ");
  EXPECT_EQ(items[2].image, "b.jpg");
  EXPECT_EQ(conv.messages[1].role, "assistant");
}

TEST(ConversationTest, ErrorsNameTheProblem) {
  auto message = [](const std::string& json) {
    auto conv = ParseConversation(json);
    EXPECT_FALSE(conv.ok());
    return conv.ok() ? std::string() : conv.status().message();
  };
  EXPECT_NE(message(R"({"messages": [{"role": "bot", "content": "x"}]})").find("unknown role 'bot'"),
            std::string::npos);
  EXPECT_NE(message(R"({"messages": []})").find("empty conversation"), std::string::npos);
  EXPECT_NE(message(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]})")
                .find("messages[0].content[0]: 'text' must be a string"),
            std::string::npos);
  EXPECT_NE(message(R"({"messages": [{"role": "user", "content": "a <|image_pad|>"}]})")
                .find("<|image_pad|>"),
            std::string::npos);
  EXPECT_NE(message(R"({"image": "a.jpg", "conversations": [{"from": "human", "value": "<image><image>"}]})")
                .find("more <image> tags than images"),
            std::string::npos);
  EXPECT_NE(message(R"([1, 2])").find("not a JSON object"), std::string::npos);
}

}  // namespace
}  // namespace stoker::text
