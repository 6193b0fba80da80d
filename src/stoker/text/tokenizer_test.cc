#include "stoker/text/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// IsValidUtf8 (SIMD) agrees with the scalar decoder behind Utf8Lossy, which leaves a
// string unchanged exactly when it is valid: on every two-byte string, on three- and
// four-byte sequences around each boundary of the lead-byte table, and on random
// mostly-ASCII strings of every length up to 300 with a byte flipped somewhere.
TEST(Utf8Test, ValidationAgreesWithTheScalarDecoder) {
  auto check = [](const std::string& s) {
    ASSERT_EQ(IsValidUtf8(s), Utf8Lossy(s) == s) << testing::PrintToString(s);
  };
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) check({static_cast<char>(a), static_cast<char>(b)});
  }
  const std::vector<int> edges = {0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF};
  for (int lead = 0xC0; lead < 256; ++lead) {
    for (int b1 : edges) {
      for (int b2 : edges) {
        check({static_cast<char>(lead), static_cast<char>(b1), static_cast<char>(b2)});
        for (int b3 : edges) {
          check({static_cast<char>(lead), static_cast<char>(b1), static_cast<char>(b2),
                 static_cast<char>(b3)});
        }
      }
    }
  }
  std::mt19937 rng(11);
  const std::vector<std::string> pieces = {"a", " ", "\xC3\xA9", "\xE4\xB8\xAD",
                                           "\xF0\x9F\x98\x80", "\xEF\xBF\xBD"};
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const size_t n = rng() % 300;
    while (s.size() < n) s += pieces[rng() % pieces.size()];
    check(s);
    if (!s.empty() && (i % 2 == 0)) {
      s[rng() % s.size()] = static_cast<char>(rng() % 256);
      check(s);
    }
  }
}

TEST(PieceCacheTest, FindsWhatWasInsertedResolvesCollisionsAndStaysBounded) {
  PieceCache cache;
  const int32_t ab[] = {7, 8};
  const int32_t cd[] = {9};
  const uint32_t* ids;
  size_t n;
  EXPECT_FALSE(cache.Find("ab", PieceCache::Hash("ab"), &ids, &n));
  cache.Insert("ab", PieceCache::Hash("ab"), ab, 2);
  // "cd" under the same hash as "ab": a collision the probe must step over.
  cache.Insert("cd", PieceCache::Hash("ab"), cd, 1);
  ASSERT_TRUE(cache.Find("ab", PieceCache::Hash("ab"), &ids, &n));
  EXPECT_EQ(std::vector<uint32_t>(ids, ids + n), (std::vector<uint32_t>{7, 8}));
  ASSERT_TRUE(cache.Find("cd", PieceCache::Hash("ab"), &ids, &n));
  EXPECT_EQ(std::vector<uint32_t>(ids, ids + n), (std::vector<uint32_t>{9}));
  EXPECT_FALSE(cache.Find("cd", PieceCache::Hash("cd"), &ids, &n));
  EXPECT_FALSE(cache.Find("a", PieceCache::Hash("ab"), &ids, &n));
  // Long keys that differ in one byte, in the first word, the middle or the tail.
  const std::string long_key = "abcdefghijklmnopqrst";
  cache.Insert(long_key, 42, ab, 2);
  ASSERT_TRUE(cache.Find(long_key, 42, &ids, &n));
  for (size_t at : {size_t{0}, size_t{9}, long_key.size() - 1}) {
    std::string other = long_key;
    other[at] = '#';
    EXPECT_FALSE(cache.Find(other, 42, &ids, &n)) << other;
  }
  // Full: the next insert keeps only the entries found since they went in (their ids
  // intact), so the cache never holds more than kCapacity.
  PieceCache full;
  auto key_of = [](size_t i) { return "k" + std::to_string(i); };
  for (size_t i = 0; i < PieceCache::kCapacity; ++i) {
    const std::string key = key_of(i);
    const int32_t id = static_cast<int32_t>(i);
    full.Insert(key, PieceCache::Hash(key), &id, 1);
  }
  EXPECT_EQ(full.size(), PieceCache::kCapacity);
  for (size_t i = 0; i < PieceCache::kCapacity; i += 7) {
    ASSERT_TRUE(full.Find(key_of(i), PieceCache::Hash(key_of(i)), &ids, &n));
  }
  full.Insert("new", PieceCache::Hash("new"), ab, 2);
  const size_t kept = (PieceCache::kCapacity + 6) / 7;
  EXPECT_EQ(full.size(), kept + 1);
  for (size_t i = 0; i < PieceCache::kCapacity; ++i) {
    const bool found = full.Find(key_of(i), PieceCache::Hash(key_of(i)), &ids, &n);
    ASSERT_EQ(found, i % 7 == 0) << key_of(i);
    if (found) {
      ASSERT_EQ(n, 1u);
      ASSERT_EQ(ids[0], i);
    }
  }
  EXPECT_TRUE(full.Find("new", PieceCache::Hash("new"), &ids, &n));
  // Every survivor was found again just now: the next sweep keeps them and the new
  // ones found since. When those fill half the cache, it starts over instead.
  for (size_t i = full.size(); i < PieceCache::kCapacity; ++i) {
    const std::string key = "m" + std::to_string(i);
    full.Insert(key, PieceCache::Hash(key), cd, 1);
    ASSERT_TRUE(full.Find(key, PieceCache::Hash(key), &ids, &n));
  }
  full.Insert("last", PieceCache::Hash("last"), ab, 2);
  EXPECT_EQ(full.size(), 1u);
  EXPECT_FALSE(full.Find("new", PieceCache::Hash("new"), &ids, &n));
  EXPECT_TRUE(full.Find("last", PieceCache::Hash("last"), &ids, &n));
  // Large entries hit the arena bound long before kCapacity entries.
  PieceCache big;
  const std::vector<int32_t> many(256, 5);
  size_t most = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string key(255, 'x');
    key.replace(0, 8, std::to_string(10000000 + i));
    big.Insert(key, PieceCache::Hash(key), many.data(), many.size());
    most = std::max(most, big.size());
    ASSERT_TRUE(big.Find(key, PieceCache::Hash(key), &ids, &n));
    ASSERT_EQ(n, 256u);
    ASSERT_EQ(ids[255], 5u);
  }
  EXPECT_LE(most, PieceCache::kArenaWords / (1 + 64 + 256));
}

// Merges over "abc" for the merge-loop tests: overlapping pairs and merges of merges.
const std::vector<std::pair<std::string, std::string>>& SmallMerges() {
  static const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"}, {"b", "c"}, {"ab", "c"}, {"c", "a"}, {"a", "a"}, {"ca", "b"},
      {"aa", "a"}, {"b", "b"}, {"abc", "ab"}, {"c", "c"}, {"bb", "ca"}, {"a", "bc"}};
  return merges;
}

// A byte-level vocabulary (every byte but `missing_byte`, when one is given) followed
// by the merged tokens, numbered in the merges' order or in reverse.
std::vector<std::string> SmallVocabulary(
    const std::vector<std::pair<std::string, std::string>>& merges, bool reverse,
    int missing_byte = -1) {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) {
    if (b == missing_byte) continue;
    std::string ch;
    AppendUtf8(ByteToChar(static_cast<uint8_t>(b)), &ch);
    vocab.push_back(ch);
  }
  std::vector<std::string> merged;
  for (const auto& [l, r] : merges) merged.push_back(l + r);
  if (reverse) std::reverse(merged.begin(), merged.end());
  for (const std::string& m : merged) {
    if (std::find(vocab.begin(), vocab.end(), m) == vocab.end()) vocab.push_back(m);
  }
  return vocab;
}

// The compact merge table (new ids increasing with rank) and the general one (any
// order) give the same tokens: the same merges, once with the merged tokens numbered
// in rank order and once in reverse, on random strings over a small alphabet. And
// the short-piece merge loop agrees with the heap on both.
TEST(BpeModelTest, CompactAndGeneralMergeTablesAndBothLoopsAgree) {
  const auto& merges = SmallMerges();
  auto in_order = BpeModel::Make(SmallVocabulary(merges, false), merges, false);
  auto reversed = BpeModel::Make(SmallVocabulary(merges, true), merges, false);
  ASSERT_TRUE(in_order.ok() && reversed.ok());
  std::mt19937 rng(5);
  BpeScratch short_in_order, short_reversed, heap_in_order, heap_reversed;
  heap_in_order.short_piece_limit = 0;
  heap_reversed.short_piece_limit = 0;
  auto tokens = [](const BpeModel& model, BpeScratch* scratch, const std::string& piece) {
    std::vector<int32_t> ids;
    model.Encode(piece, false, scratch, &ids);
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(model.token(static_cast<uint32_t>(id)));
    return out;
  };
  for (int i = 0; i < 5000; ++i) {
    std::string piece;
    const size_t n = 1 + rng() % 80;  // both sides of BpeScratch::kMaxShortPiece
    for (size_t k = 0; k < n; ++k) piece += "abc"[rng() % 3];
    const auto want = tokens(*in_order, &heap_in_order, piece);
    ASSERT_EQ(tokens(*reversed, &heap_reversed, piece), want) << piece;
    ASSERT_EQ(tokens(*in_order, &short_in_order, piece), want) << piece;
    ASSERT_EQ(tokens(*reversed, &short_reversed, piece), want) << piece;
  }
}

// A piece's first lookups come from the byte-pair table when every byte has a symbol,
// and by id otherwise. A vocabulary without the byte 'z' drops it (as `tokenizers`
// does without an unknown token), so a piece with z's must give the tokens of the same
// piece without them: the first through ids, the second through the byte pairs. Both
// merge loops, on both sides of the short-piece limit.
TEST(BpeModelTest, BytePairTableAgreesWithLookupsById) {
  const auto& merges = SmallMerges();
  auto model = BpeModel::Make(SmallVocabulary(merges, false, 'z'), merges, false);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::mt19937 rng(11);
  BpeScratch short_loop, heap;
  heap.short_piece_limit = 0;
  for (BpeScratch* scratch : {&short_loop, &heap}) {
    for (int i = 0; i < 3000; ++i) {
      std::string with_z, without_z;
      const size_t n = 1 + rng() % 90;
      for (size_t k = 0; k < n; ++k) {
        const char c = "abcz"[rng() % 4];
        with_z += c;
        if (c != 'z') without_z += c;
      }
      std::vector<int32_t> got, want;
      model->Encode(with_z, false, scratch, &got);
      model->Encode(without_z, false, scratch, &want);
      ASSERT_EQ(got, want) << with_z;
    }
  }
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
      "\xF0\x9F\x98\x80", "\xC5\xBF", "x",
      // Thai: a consonant, vowel sign U+0E38 (ccc 103), tone mark U+0E48 (ccc 107),
      // U+0E33 (compatibility decomposition only). Devanagari: NA, nukta U+093C (ccc 7,
      // composes into U+0929), vowel sign I, U+0929, U+0958 (a composition exclusion).
      "\xE0\xB8\x81", "\xE0\xB8\xB8", "\xE0\xB9\x88", "\xE0\xB8\xB3",
      "\xE0\xA4\xA8", "\xE0\xA4\xBF", "\xE0\xA4\xA9", "\xE0\xA5\x98",
      // Runs long enough for the eight-byte skip, ASCII and Latin-1.
      "hello world ", "\xC3\xA0\xC3\xA8\xC3\xAC\xC3\xB2"};
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
