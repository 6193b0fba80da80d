#include "stoker/manifest/sample.h"

#include <gtest/gtest.h>

namespace stoker::manifest {
namespace {

SampleRefs ParseOk(std::string_view line) {
  SampleParser parser;
  SampleRefs refs;
  Status st = parser.Parse(line, &refs);
  EXPECT_TRUE(st.ok()) << st.ToString() << " for " << line;
  return refs;
}

std::string ParseError(std::string_view line) {
  SampleParser parser;
  SampleRefs refs;
  Status st = parser.Parse(line, &refs);
  EXPECT_EQ(st.code(), StatusCode::kManifestError) << line;
  return st.message();
}

TEST(SampleParserTest, MessagesWithImagesInOrder) {
  SampleRefs refs = ParseOk(
      R"({"messages": [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "image", "image": "a/1.jpg"},
                                       {"type": "text", "text": "Compare"},
                                       {"type": "image", "path": "/abs/2.png"}]},
          {"role": "assistant", "content": [{"type": "text", "text": "Same cat."}]},
          {"role": "user", "content": [{"type": "image", "url": "3.webp"}]}]})");
  EXPECT_EQ(refs.num_messages, 4);
  ASSERT_EQ(refs.images.size(), 3u);
  EXPECT_EQ(refs.images[0], "a/1.jpg");
  EXPECT_EQ(refs.images[1], "/abs/2.png");
  EXPECT_EQ(refs.images[2], "3.webp");
}

TEST(SampleParserTest, ParserIsReusable) {
  SampleParser parser;
  SampleRefs refs;
  ASSERT_TRUE(parser.Parse(R"({"messages":[{"role":"user","content":[{"type":"image","image":"x.jpg"}]}]})", &refs).ok());
  ASSERT_TRUE(parser.Parse(R"({"messages":[{"role":"user","content":"hi"}]})", &refs).ok());
  EXPECT_TRUE(refs.images.empty()) << "cleared between lines";
}

TEST(SampleParserTest, ErrorsNameTheField) {
  EXPECT_NE(ParseError("{not json").find("malformed JSON"), std::string::npos);
  EXPECT_NE(ParseError("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(ParseError(R"({"conversations": []})").find("missing 'messages'"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": {}})").find("not a list"), std::string::npos);
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
                .find("needs a string field 'text'"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "user", "content": [{"type": "image"}]}]})")
                .find("needs an 'image', 'path' or 'url' field"),
            std::string::npos);
  EXPECT_NE(ParseError(R"({"messages": [{"role": "user", "content": [{"type": "image", "image": ""}]}]})")
                .find("non-empty string"),
            std::string::npos);
}

TEST(SampleParserTest, InvalidUtf8IsRefused) {
  const std::string line = "{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xC3\x28\"}]}";
  std::string message = ParseError(line);
  EXPECT_NE(message.find("malformed JSON"), std::string::npos);
  EXPECT_NE(message.find("UTF-8"), std::string::npos) << message;
}

}  // namespace
}  // namespace stoker::manifest
