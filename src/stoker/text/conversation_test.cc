#include "stoker/text/conversation.h"

#include <gtest/gtest.h>

namespace stoker::text {
namespace {

Conversation ParseOk(std::string_view line) {
  ConversationParser parser;
  Conversation conv;
  Status st = parser.Parse(line, &conv);
  EXPECT_TRUE(st.ok()) << st.ToString() << " for " << line;
  return conv;
}

std::string ParseError(std::string_view line) {
  ConversationParser parser;
  Conversation conv;
  Status st = parser.Parse(line, &conv);
  EXPECT_EQ(st.code(), StatusCode::kManifestError) << line;
  return st.message();
}

TEST(ConversationParserTest, MessagesWithImagesInOrder) {
  Conversation conv = ParseOk(
      R"({"messages": [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "image", "image": "a/1.jpg"},
                                       {"type": "text", "text": "Compare"},
                                       {"type": "image", "path": "/abs/2.png"}]},
          {"role": "assistant", "content": [{"type": "text", "text": "Same cat."}]},
          {"role": "user", "content": [{"type": "image", "url": "3.webp"},
                                       {"type": "image_url", "image_url": {"url": "s3://b/4.jpg"}}]}]})");
  EXPECT_EQ(conv.messages.size(), 4u);
  EXPECT_EQ(conv.images, (std::vector<std::string>{"a/1.jpg", "/abs/2.png", "3.webp",
                                                    "s3://b/4.jpg"}));
  EXPECT_TRUE(conv.messages[0].string_content);
  EXPECT_EQ(conv.messages[1].content[1].text, "Compare");
}

TEST(ConversationParserTest, LlavaTagsBecomeImagesInPlace) {
  Conversation conv = ParseOk(
      R"({"image": ["x.jpg", "y.jpg"], "conversations": [
          {"from": "human", "value": "<image>\nFirst, then <image> second?"},
          {"from": "gpt", "value": "Both cats."}]})");
  ASSERT_EQ(conv.messages.size(), 2u);
  EXPECT_EQ(conv.messages[0].role, "user");
  EXPECT_EQ(conv.messages[1].role, "assistant");
  EXPECT_EQ(conv.images, (std::vector<std::string>{"x.jpg", "y.jpg"}));
  EXPECT_NE(ParseError(R"({"image": "x.jpg", "conversations": [
                {"from": "human", "value": "no tag"}, {"from": "gpt", "value": "?"}]})")
                .find("conversations"),
            std::string::npos);
}

TEST(ConversationParserTest, ParserIsReusable) {
  ConversationParser parser;
  Conversation conv;
  ASSERT_TRUE(parser.Parse(R"({"messages":[{"role":"user","content":[{"type":"image","image":"x.jpg"}]}]})", &conv).ok());
  ASSERT_TRUE(parser.Parse(R"({"messages":[{"role":"user","content":"hi"}]})", &conv).ok());
  EXPECT_TRUE(conv.images.empty()) << "cleared between lines";
  EXPECT_EQ(conv.messages.size(), 1u);
}

TEST(ConversationParserTest, ErrorsNameTheField) {
  EXPECT_NE(ParseError("{not json").find("malformed JSON"), std::string::npos);
  EXPECT_NE(ParseError("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(ParseError(R"({"image": "a.jpg", "text": "x"})").find("'messages'"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"conversations": []})").find("empty conversation"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": []})").find("empty"), std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "robot", "content": "x"}]})")
                .find("messages[0]: unknown role 'robot'"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "user"}]})").find("missing field 'content'"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "user", "content": 5}]})")
                .find("must be a string or a list"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "user", "content": [{"type": "video", "video": "v.mp4"}]}]})")
                .find("messages[0].content[0]: unsupported content type 'video'"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]})")
                .find("'text' must be a string"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "user", "content": [{"type": "image"}]}]})")
                .find("messages[0].content[0]"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "user", "content": "a <|image_pad|> b"}]})")
                .find("<|image_pad|>"),
            std::string::npos);
}

TEST(ConversationParserTest, InvalidUtf8IsRefused) {
  const std::string line = "{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xC3\x28\"}]}";
  std::string message = ParseError(line);
  EXPECT_NE(message.find("malformed JSON"), std::string::npos);
  EXPECT_NE(message.find("UTF-8"), std::string::npos) << message;
}

}  // namespace
}  // namespace stoker::text
