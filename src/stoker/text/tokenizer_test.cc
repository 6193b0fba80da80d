#include "stoker/text/tokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "stoker/text/bpe.h"
#include "stoker/text/unicode.h"

namespace stoker::text {
namespace {

TEST(ByteTableTest, MatchesGpt2) {
  EXPECT_EQ(ByteToChar(0x00), 0x100u);
  EXPECT_EQ(ByteToChar(0x09), 0x109u);
  EXPECT_EQ(ByteToChar(0x0A), 0x10Au);
  EXPECT_EQ(ByteToChar(0x20), 0x120u);
  EXPECT_EQ(ByteToChar(0x7F), 0x121u);
  EXPECT_EQ(ByteToChar(0xA0), 0x142u);
  EXPECT_EQ(ByteToChar(0xAD), 0x143u);
  EXPECT_EQ(ByteToChar('A'), static_cast<char32_t>('A'));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(CharToByte(ByteToChar(b)), b);
}

TEST(Utf8LossyTest, ReplacesMaximalSubparts) {
  EXPECT_EQ(Utf8Lossy("abc"), "abc");
  EXPECT_EQ(Utf8Lossy("\xE4\xB8"), "\xEF\xBF\xBD");          // truncated 3-byte
  EXPECT_EQ(Utf8Lossy("\xE4\xB8x"), "\xEF\xBF\xBDx");
  EXPECT_EQ(Utf8Lossy("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(NormalizeTest, Nfc) {
  std::string out;
  ASSERT_TRUE(Normalize(NormalizationForm::kNFC, "e\xCC\x81", &out).ok());
  EXPECT_EQ(out, "\xC3\xA9");
}

TEST(NormalizeTest, ShortcutAgreesWithWholeTextNormalization) {
  // Bases, marks in and out of canonical order, Hangul jamo and syllables, starters
  // that compose backwards (U+0BBE, U+0DCF), singletons (U+212B), Latin-1 letters.
  static const std::vector<std::string> kAtoms = {
      "a", "e", "\xC3\xA9", "\xCC\x81", "\xCC\xA3", "\xCC\x87", " ", "\xE1\x84\x80",
      "\xE1\x85\xA1", "\xE1\x86\xA8", "\xEA\xB0\x80", "\xE0\xAF\x86",
      "\xE0\xAE\xBE", "\xE0\xB7\x99", "\xE0\xB7\x8F", "\xE2\x84\xAB", "\xE1\xBB\x87",
      "\xE3\x81\x8B", "\xE3\x82\x99", "\xCD\x84", "\xE0\xA4\x95", "\xE0\xA4\xBC",
      "\xF0\x9F\x98\x80", "\xC5\xBF", "x"};
  std::mt19937 rng(3);
  std::uniform_int_distribution<size_t> pick(0, kAtoms.size() - 1);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) text += kAtoms[pick(rng)];
    for (NormalizationForm form : {NormalizationForm::kNFC, NormalizationForm::kNFD,
                                   NormalizationForm::kNFKC}) {
      std::string fast, whole;
      ASSERT_TRUE(Normalize(form, text, &fast).ok());
      ASSERT_TRUE(NormalizeWholeText(form, text, &whole).ok());
      ASSERT_EQ(fast, whole) << "text: " << text;
    }
  }
}

// A tiny byte-level tokenizer: the vocabulary is the 256 byte characters plus a few
// merges, enough to check rank order, leftmost ties and added-token extraction.
std::string TinyTokenizerJson(const std::string& extra_added = "") {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    AppendUtf8(ByteToChar(static_cast<uint8_t>(b)), &ch);
    std::string escaped;
    for (char c : ch) {
      if (c == '"' || c == '\\') escaped += '\\';
      escaped += c;
    }
    vocab += "\"" + escaped + "\": " + std::to_string(b) + ",";
  }
  vocab += "\"aa\": 256, \"ab\": 257, \"aab\": 258, \"\xC4\xA0" "a\": 259";
  return R"({"normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": " ?\\S+|\\s+"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
    "decoder": {"type": "ByteLevel"}, "post_processor": null,
    "added_tokens": [{"id": 300, "content": "<x>", "special": true, "lstrip": false,
       "rstrip": false, "normalized": false, "single_word": false},
      {"id": 301, "content": "<xy>", "special": false, "lstrip": false,
       "rstrip": false, "normalized": false, "single_word": false})" +
         extra_added + R"(],
    "model": {"type": "BPE", "vocab": {)" + vocab +
         R"(}, "merges": ["a a", ["a", "b"], "aa b", "Ġ a"]}})";
}

std::vector<int32_t> Encode(const Tokenizer& t, const std::string& text) {
  TokenizerSession session;
  std::vector<int32_t> ids;
  Status st = t.Encode(text, &session, &ids);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return ids;
}

TEST(TokenizerTest, MergesByRankThenLeftmost) {
  auto t = Tokenizer::FromJson(TinyTokenizerJson());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  using V = std::vector<int32_t>;
  EXPECT_EQ(Encode(**t, "aaa"), (V{256, 'a'}));        // "a a" first, leftmost
  EXPECT_EQ(Encode(**t, "aab"), (V{258}));             // aa + b -> aab
  EXPECT_EQ(Encode(**t, "ab"), (V{257}));
  EXPECT_EQ(Encode(**t, "b a"), (V{'b', 259}));        // " a" merges
  EXPECT_EQ(Encode(**t, ""), V{});
}

TEST(TokenizerTest, AddedTokensLeftmostLongest) {
  auto t = Tokenizer::FromJson(TinyTokenizerJson());
  ASSERT_TRUE(t.ok());
  using V = std::vector<int32_t>;
  EXPECT_EQ(Encode(**t, "a<x>b"), (V{'a', 300, 'b'}));
  EXPECT_EQ(Encode(**t, "<xy><x>"), (V{301, 300}));
  EXPECT_EQ(Encode(**t, "<x"), (V{'<', 'x'}));
  const std::vector<int32_t> ids = {'a', 300, 301, 'b'};
  EXPECT_EQ((*t)->Decode(ids, false), "a<x><xy>b");
  EXPECT_EQ((*t)->Decode(ids, true), "a<xy>b");
  EXPECT_EQ((*t)->TokenToId("<x>"), 300);
  EXPECT_EQ((*t)->TokenToId("aab"), 258);
  EXPECT_EQ((*t)->IdToToken(259), "\xC4\xA0" "a");
  EXPECT_EQ((*t)->vocab_size(), 262u);
}

TEST(TokenizerTest, LstripRstripSingleWord) {
  auto t = Tokenizer::FromJson(TinyTokenizerJson(
      R"(, {"id": 302, "content": "<m>", "special": true, "lstrip": true, "rstrip": true,
           "normalized": false, "single_word": false},
         {"id": 303, "content": "w", "special": false, "lstrip": false, "rstrip": false,
           "normalized": false, "single_word": true})"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  using V = std::vector<int32_t>;
  EXPECT_EQ(Encode(**t, "b  <m>  b"), (V{'b', 302, 'b'}));
  EXPECT_EQ(Encode(**t, "aw w"), (V{'a', 'w', ' ', 303}));
}

TEST(TokenizerTest, NormalizedAddedTokensMatchAfterNormalization) {
  auto t = Tokenizer::FromJson(TinyTokenizerJson(
      R"(, {"id": 304, "content": "e\u0301x", "special": false, "lstrip": false,
           "rstrip": false, "normalized": true, "single_word": false})"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  using V = std::vector<int32_t>;
  // Both spellings normalize to "\u00e9x", which is what the token matches.
  EXPECT_EQ(Encode(**t, "a\xC3\xA9x"), (V{'a', 304}));
  EXPECT_EQ(Encode(**t, "ae\xCC\x81x"), (V{'a', 304}));
}

TEST(TokenizerTest, DecodeReplacesInvalidUtf8) {
  auto t = Tokenizer::FromJson(TinyTokenizerJson());
  ASSERT_TRUE(t.ok());
  const std::vector<int32_t> ids = {0xE4, 0xB8, 'x'};
  EXPECT_EQ((*t)->Decode(ids, false), "\xEF\xBF\xBDx");
}

TEST(TokenizerTest, EncodeBatchOnManyThreadsMatchesOneSession) {
  auto t = Tokenizer::FromJson(TinyTokenizerJson());
  ASSERT_TRUE(t.ok());
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) {
    texts.push_back("aab b a<x>" + std::string(i % 37, 'a') + " \xC3\xA9t\xC3\xA9 " +
                    std::to_string(i) + "\xE4\xB8\xAD");
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<std::vector<int32_t>> batch;
  ASSERT_TRUE(EncodeBatch(**t, views, 4, &batch).ok());
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], Encode(**t, texts[i]));
  const std::vector<std::string_view> bad = {"ok", "\xFF"};
  const Status st = EncodeBatch(**t, bad, 2, &batch);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("text 1"), std::string::npos);
}

TEST(TokenizerTest, RefusesWhatItCannotReproduce) {
  std::string json = TinyTokenizerJson();
  const std::string from = R"("decoder": {"type": "ByteLevel"})";
  json.replace(json.find(from), from.size(), R"("decoder": {"type": "WordPiece"})");
  auto t = Tokenizer::FromJson(json);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("WordPiece"), std::string::npos);
}

}  // namespace
}  // namespace stoker::text
