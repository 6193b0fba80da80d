#include "stoker/text/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "stoker/text/unicode.h"

namespace stoker::text {
namespace {

std::vector<std::string> Pieces(const PatternMatcher& matcher, const std::string& text) {
  std::vector<Span> spans;
  matcher.FindMatches(text, &spans);
  std::vector<std::string> out;
  for (const Span& s : spans) out.push_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

TEST(QwenMatcherTest, SpecExamples) {
  auto matcher = MakeQwenMatcher();
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces(*matcher, "Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(Pieces(*matcher, "I'M 2024 x!!\n\n  done\n"),
            (V{"I", "'M", " ", "2", "0", "2", "4", " x", "!!\n\n", " ", " done", "\n"}));
  EXPECT_EQ(Pieces(*matcher, "  leading\ttab  end  "),
            (V{" ", " leading", "\ttab", " ", " end", "  "}));
  EXPECT_EQ(Pieces(*matcher, "价格は¥1,234です。"),
            (V{"价格は", "¥", "1", ",", "2", "3", "4", "です", "。"}));
  EXPECT_EQ(Pieces(*matcher, "a\r\n\r\nb"), (V{"a", "\r\n\r\n", "b"}));
  EXPECT_EQ(Pieces(*matcher, "x  \ny"), (V{"x", "  \n", "y"}));
}

// Random strings over characters chosen to hit every branch of the pattern:
// contractions in all cases (and the long s that case-folds to 's'), letters of many
// scripts, digits of several systems, marks, punctuation, every kind of whitespace.
std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> kAtoms = {
      "'", "s", "S", "t", "T", "re", "RE", "Ve", "m", "LL", "d", "\xC5\xBF", "a", "Z",
      "é", "e\xCC\x81", "ß", "Ж", "ω", "中", "ひ", "한", "ب", "ก", "\xE0\xA4\x95", "1",
      "٣", "Ⅻ", "½", "²", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\xC2\x85",
      "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x83", "\xE2\x80\xA8", "\xE2\x80\xA9",
      "\xE3\x80\x80", "\xE2\x80\x8B", "!", "?", ".", ",", "-", "¿", "¥", "😀", "\xCC\x81",
      "_", "/", "\"", "(", "<|im_end|>", std::string("\x00", 1), "\x7F", "A", "Hello",
      "ǅ", "ʰ", "ǈa", "\xCC\x81" "A", "Éa", "ÀB", "ῼ", "123", "4567", "/\n", "\xE0\xA4\xBF"};
  std::uniform_int_distribution<size_t> pick(0, kAtoms.size() - 1);
  std::uniform_int_distribution<int> len(0, 24);
  std::string out;
  const int n = len(rng);
  for (int i = 0; i < n; ++i) out += kAtoms[pick(rng)];
  return out;
}

TEST(QwenMatcherTest, AgreesWithOniguruma) {
  auto hand = MakeQwenMatcher();
  auto onig = MakeOnigMatcher(kQwenPattern);
  ASSERT_TRUE(onig.ok()) << onig.status().ToString();
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const std::string text = RandomText(rng);
    ASSERT_EQ(Pieces(*hand, text), Pieces(**onig, text)) << "text: " << text;
  }
}

TEST(QwenMatcherTest, AgreesWithOnigurumaOnEveryCodePointPair) {
  // Each code point after a space and before a letter, a digit and a newline: covers
  // the class tables for the whole Unicode range.
  auto hand = MakeQwenMatcher();
  auto onig = MakeOnigMatcher(kQwenPattern);
  ASSERT_TRUE(onig.ok());
  for (char32_t cp = 1; cp <= 0x10FFFF; cp += (cp < 0x3000 ? 1 : 7)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string text = " ";
    AppendUtf8(cp, &text);
    text += "a1\n'";
    AppendUtf8(cp, &text);
    text += " ";
    ASSERT_EQ(Pieces(*hand, text), Pieces(**onig, text)) << "code point " << static_cast<uint32_t>(cp);
  }
}

TEST(O200kMatcherTest, AgreesWithOniguruma) {
  auto hand = MakeO200kMatcher();
  auto onig = MakeOnigMatcher(kO200kPattern);
  ASSERT_TRUE(onig.ok()) << onig.status().ToString();
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    const std::string text = RandomText(rng);
    ASSERT_EQ(Pieces(*hand, text), Pieces(**onig, text)) << "text: " << text;
  }
}

TEST(O200kMatcherTest, AgreesWithOnigurumaOnEveryCodePoint) {
  auto hand = MakeO200kMatcher();
  auto onig = MakeOnigMatcher(kO200kPattern);
  ASSERT_TRUE(onig.ok());
  for (char32_t cp = 1; cp <= 0x10FFFF; cp += (cp < 0x3000 ? 1 : 7)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string text = " ";
    AppendUtf8(cp, &text);
    text += "aB";
    AppendUtf8(cp, &text);
    text += "Cd'S123";
    AppendUtf8(cp, &text);
    text += "4/\n";
    ASSERT_EQ(Pieces(*hand, text), Pieces(**onig, text)) << "code point " << static_cast<uint32_t>(cp);
  }
}

TEST(O200kMatcherTest, Examples) {
  auto matcher = MakeO200kMatcher();
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces(*matcher, "HelloWorld DON'T 12345 a/b\n"),
            (V{"Hello", "World", " DON'T", " ", "123", "45", " a", "/b", "\n"}));
}

TEST(SplitTest, RemovedInvertKeepsMatchesOnly) {
  auto matcher = MakeOnigMatcher("[a-z]+");
  ASSERT_TRUE(matcher.ok());
  PreTokenizerStep step;
  step.matcher = std::move(*matcher);
  step.behavior = SplitBehavior::kRemoved;
  step.invert = true;
  PreTokenizerStep byte_level;
  byte_level.kind = PreTokenizerStep::Kind::kByteLevel;
  PreTokenizer pre({step, byte_level});
  std::vector<Piece> pieces;
  PreTokenizerScratch scratch;
  const std::string text = "ab, cd!!ef";
  pre.Run(text, &pieces, &scratch);
  std::vector<std::string> got;
  for (const Piece& p : pieces) got.push_back(text.substr(p.begin, p.end - p.begin));
  EXPECT_EQ(got, (std::vector<std::string>{"ab", "cd", "ef"}));
}

TEST(SplitTest, Behaviours) {
  auto run = [](SplitBehavior behavior) {
    auto matcher = MakeOnigMatcher("-");
    PreTokenizerStep step;
    step.matcher = std::move(*matcher);
    step.behavior = behavior;
    PreTokenizer pre({step});
    std::vector<Piece> pieces;
    PreTokenizerScratch scratch;
    const std::string text = "the-final--countdown";
    pre.Run(text, &pieces, &scratch);
    std::vector<std::string> got;
    for (const Piece& p : pieces) got.push_back(text.substr(p.begin, p.end - p.begin));
    return got;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(run(SplitBehavior::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(run(SplitBehavior::kIsolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(run(SplitBehavior::kMergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(run(SplitBehavior::kMergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(run(SplitBehavior::kContiguous), (V{"the", "-", "final", "--", "countdown"}));
}

}  // namespace
}  // namespace stoker::text
