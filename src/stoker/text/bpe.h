// Byte-level BPE: the merge loop of Hugging Face `tokenizers` (models/bpe), on pieces
// of raw bytes.
//
// BpeModel is immutable after Make and shared by every thread; BpeScratch is one
// thread's working memory (symbol list, merge heap, bounded piece cache).
#pragma once

#include <cstdint>
#include <string>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stoker/core/status.h"

namespace stoker::text {

// GPT-2's bytes_to_unicode table: the code point that stands for byte b in vocabulary
// strings. Printable Latin-1 bytes stand for themselves; the other 68 bytes map to
// U+0100.. in increasing order.
char32_t ByteToChar(uint8_t b);
// The inverse; -1 for code points outside the table.
int CharToByte(char32_t cp);
// The raw bytes a vocabulary string stands for: every character mapped back through
// the table, or, if any character is outside it, the string's own UTF-8 bytes (what
// the ByteLevel decoder does).
std::string VocabStringToBytes(std::string_view token);
// Byte-level form of raw bytes (each byte as its table character, UTF-8 encoded).
std::string BytesToVocabString(std::string_view bytes);

// Hash for string keys looked up by string_view without building a std::string.
struct StringViewHash {
  using is_transparent = void;
  // XXH3: about twice the speed of std::hash on the short keys of a vocabulary.
  size_t operator()(std::string_view s) const;
};

// Bounded memo of piece -> ids, one per thread: pieces shorter than kMaxPieceBytes,
// cleared when it holds kCapacity entries (the bounds `tokenizers` uses). Open
// addressing over flat arrays: a lookup is one hash, one probe run and one memcmp, and
// an insert allocates nothing once the arenas have grown.
class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 256;
  static constexpr size_t kCapacity = 10000;

  PieceCache();
  // The cached ids of `piece` (a span into the cache, valid until the next Insert), or
  // false.
  bool Find(std::string_view piece, uint64_t hash, const uint32_t** ids, size_t* n) const;
  // Caller checks piece.size() < kMaxPieceBytes and Find() failed first.
  void Insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t n);
  size_t size() const { return size_; }
  static uint64_t Hash(std::string_view piece);

 private:
  static constexpr size_t kSlots = 16384;  // a power of two, load <= 0.61
  struct Slot {
    uint64_t hash = 0;  // 0: empty (Hash never returns 0)
    uint32_t key_at = 0;
    uint32_t ids_at = 0;
    uint16_t key_len = 0;
    uint16_t num_ids = 0;
  };
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<uint32_t> ids_;
  size_t size_ = 0;
};

// Scratch of one thread.
struct BpeScratch {
  struct Symbol {
    uint32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;
  };
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    uint32_t new_id;
    uint32_t left;   // the pair's ids when it was queued: the entry is stale once
    uint32_t right;  // the symbols at pos and after it no longer have them
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string key;
  PieceCache cache;
};

class BpeModel {
 public:
  struct Merge {
    uint32_t left;
    uint32_t right;
    uint32_t new_id;
  };

  // `vocab[id]` is the vocabulary string (byte-level form) of id; merges are in rank
  // order. Fails when a merge names a string that is not in the vocabulary.
  static Result<BpeModel> Make(std::vector<std::string> vocab,
                               const std::vector<std::pair<std::string, std::string>>& merges,
                               bool ignore_merges);

  // Appends the ids of `piece` (raw bytes, non-empty) to *ids. `prefix_space` puts a
  // space byte in front of it.
  void Encode(std::string_view piece, bool prefix_space, BpeScratch* scratch,
              std::vector<int32_t>* ids) const;

  size_t size() const { return id_to_token_.size(); }
  const std::string& token(uint32_t id) const { return id_to_token_[id]; }
  const std::string& token_bytes(uint32_t id) const { return id_to_bytes_[id]; }
  // -1 when absent.
  int64_t TokenToId(std::string_view token) const;

 private:
  void MergeAll(BpeScratch* scratch) const;
  // (rank, new id) of the pair, or rank == UINT32_MAX.
  std::pair<uint32_t, uint32_t> FindMerge(uint32_t left, uint32_t right) const;

  std::vector<std::string> id_to_token_;  // byte-level form
  std::vector<std::string> id_to_bytes_;  // raw bytes
  std::unordered_map<std::string, uint32_t, StringViewHash, std::equal_to<>> token_to_id_;
  uint32_t byte_ids_[256];
  // Open-addressing table keyed by (left << 32 | right); empty slots hold kEmptyKey.
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  struct MergeSlot {
    uint64_t key = kEmptyKey;
    uint32_t rank = 0;
    uint32_t new_id = 0;
  };
  std::vector<MergeSlot> merge_table_;
  uint64_t merge_mask_ = 0;
  bool ignore_merges_ = false;
};

}  // namespace stoker::text
