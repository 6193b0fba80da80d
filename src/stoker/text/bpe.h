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
// at most kCapacity entries and kArenaWords words of keys and ids. Open addressing over
// 8-byte slots, each pointing at one contiguous entry (lengths, key bytes, ids) in an
// arena: a lookup costs a hash, a short probe run and two cache lines, and an insert
// allocates nothing once the arena has grown. The first insert past either bound
// keeps only the entries found since the last such sweep (a second chance, as in
// CLOCK): the words that repeat survive, the ones seen once make room. When those
// still fill half the cache, it starts over.
class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 256;
  static constexpr size_t kCapacity = 64000;
  static constexpr size_t kArenaWords = size_t{1} << 20;  // 4 MiB

  PieceCache();
  // The cached ids of `piece` (valid until the next Insert), or false. Marks the entry
  // as used, so the next sweep keeps it.
  bool Find(std::string_view piece, uint64_t hash, const uint32_t** ids, size_t* n);
  // Caller checks piece.size() < kMaxPieceBytes and that Find() failed.
  void Insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t n);
  size_t size() const { return size_; }
  static uint64_t Hash(std::string_view piece);
  // Starts loading what Find(piece with this hash) will read, in two steps a few
  // pieces apart: the slot (no load), then the entry the slot names (one load of the
  // slot, in cache by then).
  void PrefetchSlot(uint64_t hash) const { __builtin_prefetch(&slots_[hash & (kSlots - 1)]); }
  void PrefetchEntry(uint64_t hash) const {
    // The entry whose tag matches, a few slots along the probe run at most (the home
    // slot often holds another piece).
    const uint32_t tag = Tag(hash);
    for (size_t i = hash & (kSlots - 1), n = 0; n < 4; ++n, i = (i + 1) & (kSlots - 1)) {
      const Slot& slot = slots_[i];
      if (slot.tag == 0) return;
      if (slot.tag == tag) {
        __builtin_prefetch(arena_.data() + slot.at);
        return;
      }
    }
  }
  static uint32_t Tag(uint64_t hash) { return static_cast<uint32_t>(hash >> 32) | 1u; }

 private:
  static constexpr size_t kSlots = 131072;  // a power of two, load <= 0.49
  static constexpr uint32_t kUsed = 1u << 31;  // in an entry's first word
  // Keeps the entries marked used (unmarked), or none when they fill half the cache.
  void Sweep();
  // Points a free slot for `hash` at the entry starting at word `at`.
  void Place(uint64_t hash, uint32_t at);
  struct Slot {
    uint32_t tag = 0;  // high half of the hash, never 0; 0 marks an empty slot
    uint32_t at = 0;   // the entry's first word in arena_
  };
  // An entry: one word (used flag << 31 | key length << 16 | number of ids), the key
  // padded to whole words, then the ids.
  std::vector<Slot> slots_;
  std::vector<uint32_t> arena_;
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
  // Pieces of at most this many bytes merge by scanning a small array of pair ranks
  // instead of through the heap (same order, less work); tests set 0 to force the heap.
  static constexpr size_t kMaxShortPiece = 64;
  size_t short_piece_limit = kMaxShortPiece;
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
  // space byte in front of it. `hash`: PieceCache::Hash of the piece when the caller
  // has it (0: computed here).
  void Encode(std::string_view piece, bool prefix_space, BpeScratch* scratch,
              std::vector<int32_t>* ids, uint64_t hash = 0) const;

  size_t size() const { return id_to_token_.size(); }
  const std::string& token(uint32_t id) const { return id_to_token_[id]; }
  const std::string& token_bytes(uint32_t id) const { return id_to_bytes_[id]; }
  // -1 when absent.
  int64_t TokenToId(std::string_view token) const;

 private:
  // `bytes`: the piece the symbols were made from, one symbol per byte, or empty when
  // some byte had no symbol (its pairs are then looked up by id).
  void MergeAll(BpeScratch* scratch, std::string_view bytes) const;
  // MergeAll for at most BpeScratch::kMaxShortPiece symbols.
  void MergeShort(BpeScratch* scratch, std::string_view bytes) const;
  // (rank, new id) of the pair at symbols i, i + 1 before any merge: from the byte-pair
  // table when `bytes` is given.
  std::pair<uint32_t, uint32_t> FirstMerge(const BpeScratch& scratch, std::string_view bytes,
                                           size_t i) const;
  // Starts loading the table slot of the pair (when the filter does not rule it out).
  void PrefetchPair(uint32_t left, uint32_t right) const;
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
  // The same table in 8 bytes a slot (left << 40 | right << 20 | new_id), half the
  // cache lines, used when every id is below 2^20 and the merges' new ids increase
  // with their rank (true of trained vocabularies, Qwen's and o200k's among them):
  // the new id then orders merges as the rank does. merge_table_ is empty then.
  static constexpr int kCompactIdBits = 20;
  std::vector<uint64_t> compact_table_;
  // One bit per hash of the merge pairs (128 KiB, cache-resident): a clear bit means
  // "no such merge" without touching the table. About half the lookups of a piece
  // fail, most of them here.
  static constexpr int kFilterBits = 20;
  std::vector<uint64_t> merge_filter_;
  // The merge of every pair of single bytes, (rank << 32 | new id) or kNoBytePair, by
  // first byte << 8 | second byte (512 KiB). A piece's first lookups are all byte
  // pairs, about two in five of all its lookups: from this table they cost a load from
  // a few hot rows instead of a hash, the filter and a probe of the big table.
  static constexpr uint64_t kNoBytePair = ~uint64_t{0};
  std::vector<uint64_t> byte_pairs_;
  bool ignore_merges_ = false;
};

}  // namespace stoker::text
