// A Hugging Face `tokenizers` byte-level BPE tokenizer, loaded from tokenizer.json and
// producing the same ids: added tokens split out first (leftmost-longest, honouring
// special / lstrip / rstrip / normalized / single_word), Unicode normalization of the
// rest, the pre-tokenizer's Split pattern and ByteLevel mapping, BPE by merge rank.
//
// Supported tokenizer.json components (anything else is refused at load, naming it):
//   normalizer   : null, NFC, NFD, NFKC, NFKD, or a Sequence of them
//   pre_tokenizer: Split (Regex or String pattern; every behaviour; invert), ByteLevel,
//                  or a Sequence of them; a ByteLevel step is required
//   model        : BPE (no dropout; ignore_merges honoured; byte-level vocabulary)
//   decoder      : ByteLevel or null;   post_processor: ByteLevel or null (adds nothing)
//
// Threading: a Tokenizer is immutable and shared (std::shared_ptr<const Tokenizer>);
// every thread encodes through its own TokenizerSession, which holds the scratch
// buffers and the bounded piece cache. Sessions are cheap to create and not
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/core/status.h"
#include "stoker/text/bpe.h"
#include "stoker/text/pre_tokenizer.h"
#include "stoker/text/unicode.h"

namespace stoker::text {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

struct TokenizerOptions {
  // Use the hand-written scanners for split patterns they know (Qwen, o200k).
  // false forces Oniguruma for every pattern (tests compare the two).
  bool hand_written_splitter = true;
  // Encode added tokens flagged special as plain text (transformers'
  // split_special_tokens, tokenizers' encode_special_tokens). FromFile takes it from
  // tokenizer_config.json when that file sets it.
  bool split_special_tokens = false;
  // false: keep split_special_tokens as given even when tokenizer_config.json sets it.
  bool split_special_tokens_from_config = true;
};

class TokenizerSession;

class Tokenizer {
 public:
  // Reads `path`: a tokenizer.json, or a folder holding one. A tokenizer_config.json
  // beside it, when present, supplies split_special_tokens and the names of the
  // bos/eos/pad/unk tokens.
  static Result<std::shared_ptr<const Tokenizer>> FromFile(const std::string& path,
                                                           TokenizerOptions options = {});
  // Parses the contents of a tokenizer.json.
  static Result<std::shared_ptr<const Tokenizer>> FromJson(std::string_view json,
                                                           TokenizerOptions options = {});

  // Appends the ids of `text` (valid UTF-8) to *ids. Adds no special tokens: none of
  // the supported post-processors adds any.
  Status Encode(std::string_view text, TokenizerSession* session,
                std::vector<int32_t>* ids) const;

  // Encode that also says where each token starts relative to `boundaries` (sorted
  // byte offsets into `text`): (*regions)[k] = how many boundaries are <= the byte
  // offset of the first character of the k-th appended id. Positions inside text that
  // normalization changed are compared in normalized form (each boundary is mapped by
  // normalizing the text before it), which is exact at character boundaries that
  // normalization does not merge across. Used to align labels with rendered turns.
  Status Encode(std::string_view text, std::span<const uint32_t> boundaries,
                TokenizerSession* session, std::vector<int32_t>* ids,
                std::vector<uint32_t>* regions) const;

  // Concatenates the tokens' bytes and decodes them as UTF-8, replacing invalid
  // sequences by U+FFFD. Unknown ids are skipped, as `tokenizers` skips them.
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // The id of a token string (added tokens first, then the vocabulary, whose strings
  // are in byte-level form, e.g. "Ġhello"); nullopt when absent.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(int32_t id) const;
  // Number of distinct token strings, added tokens included (tokenizers'
  // get_vocab_size(with_added_tokens=True)).
  size_t vocab_size() const { return vocab_size_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  // "bos_token", "eos_token", "pad_token" or "unk_token" as tokenizer_config.json names
  // it; nullopt when unset (or no config was read).
  std::optional<std::string> ConfigToken(std::string_view name) const;

 private:
  friend class TokenizerSession;
  Tokenizer() = default;
  static Result<std::shared_ptr<Tokenizer>> Parse(std::string_view json,
                                                  const TokenizerOptions& options);

  // Leftmost-longest matcher over one set of added tokens.
  struct AddedMatcher {
    std::vector<int32_t> tokens;  // indexes into added_
    bool first_byte[256] = {};
    int only_first_byte = -1;  // the one first byte of every token, if they share one
    bool empty() const { return tokens.empty(); }
  };
  // Splits `text` into (added token index or -1, span) runs, as `tokenizers`'
  // AddedVocabulary::find_matches.
  void SplitAdded(std::string_view text, const AddedMatcher& matcher,
                  std::vector<std::pair<int32_t, Span>>* out) const;

  std::vector<NormalizationForm> normalizations_;  // a Sequence, applied in order
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::vector<AddedToken> added_;
  AddedMatcher raw_matcher_;         // normalized=false tokens, matched on raw text
  AddedMatcher normalized_matcher_;  // normalized=true tokens, matched after normalizing
  std::vector<std::string> normalized_contents_;  // per added token
  std::vector<int32_t> added_index_by_id_;        // id -> index into added_, or -1
  bool byte_level_decoder_ = true;
  bool split_special_tokens_ = false;
  std::vector<std::pair<std::string, std::string>> config_tokens_;  // (name, content)
  size_t vocab_size_ = 0;
};

// One thread's scratch for Tokenizer::Encode.
class TokenizerSession {
 public:
  TokenizerSession() = default;

  // Buffers for callers that encode one text at a time through this session and need
  // the ids only until they copy them out (EncodeSample): kept between calls, so their
  // capacity is reused instead of growing a fresh vector per text.
  struct CallerScratch {
    std::vector<int32_t> ids;
    std::vector<uint32_t> regions;
    std::vector<uint32_t> boundaries;
  };
  CallerScratch& caller_scratch() { return caller_scratch_; }

 private:
  CallerScratch caller_scratch_;
  friend class Tokenizer;
  std::vector<std::pair<int32_t, Span>> raw_parts;
  std::vector<std::pair<int32_t, Span>> normalized_parts;
  std::string normalized;
  std::string normalize_tmp;
  std::vector<Piece> pieces;
  std::vector<uint64_t> piece_hashes;  // PieceCache::Hash of each piece (0: not cached)
  PreTokenizerScratch pre;
  BpeScratch bpe;
};

// Encodes texts[i] into (*out)[i] on up to `num_threads` threads (each with its own
// session; all joined before returning). The first error wins and is returned with the
// index of the text it came from.
Status EncodeBatch(const Tokenizer& tokenizer, std::span<const std::string_view> texts,
                   int num_threads, std::vector<std::vector<int32_t>>* out);

}  // namespace stoker::text
