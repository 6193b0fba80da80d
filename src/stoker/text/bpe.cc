#include "stoker/text/bpe.h"

// Inlined: the piece cache hashes every piece, most of them a few bytes long.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "stoker/text/unicode.h"

namespace stoker::text {

size_t StringViewHash::operator()(std::string_view s) const {
  return static_cast<size_t>(XXH3_64bits(s.data(), s.size()));
}

namespace {

struct ByteTable {
  char32_t byte_to_char[256];
  int char_to_byte[0x200];  // every table character is below U+0200

  ByteTable() {
    std::fill(std::begin(char_to_byte), std::end(char_to_byte), -1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(0x100 + n++);
      char_to_byte[byte_to_char[b]] = b;
    }
  }
};

const ByteTable& Table() {
  static const ByteTable table;
  return table;
}

uint64_t PairKey(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

uint64_t HashKey(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return key;
}

// Heap order: lowest rank first, then leftmost position (`tokenizers`' Merge ordering),
// as one 64-bit comparison. A function object, so the heap algorithms inline it (a
// function pointer was called per comparison).
struct Later {
  static uint64_t Key(const BpeScratch::Candidate& c) {
    return uint64_t{c.rank} << 32 | c.pos;
  }
  bool operator()(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) const {
    return Key(a) > Key(b);
  }
};

}  // namespace

char32_t ByteToChar(uint8_t b) { return Table().byte_to_char[b]; }

int CharToByte(char32_t cp) { return cp < 0x200 ? Table().char_to_byte[cp] : -1; }

std::string VocabStringToBytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  if (!IsValidUtf8(token)) return std::string(token);
  for (size_t i = 0; i < token.size();) {
    int len;
    const char32_t cp = DecodeUtf8(token, i, &len);
    const int b = CharToByte(cp);
    if (b < 0) return std::string(token);
    out.push_back(static_cast<char>(b));
    i += len;
  }
  return out;
}

std::string BytesToVocabString(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(ByteToChar(static_cast<uint8_t>(c)), &out);
  return out;
}

Result<BpeModel> BpeModel::Make(std::vector<std::string> vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                bool ignore_merges) {
  BpeModel model;
  model.ignore_merges_ = ignore_merges;
  model.token_to_id_.reserve(vocab.size());
  model.id_to_bytes_.reserve(vocab.size());
  for (uint32_t id = 0; id < vocab.size(); ++id) {
    model.token_to_id_.emplace(vocab[id], id);
    model.id_to_bytes_.push_back(VocabStringToBytes(vocab[id]));
  }
  model.id_to_token_ = std::move(vocab);
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    AppendUtf8(ByteToChar(static_cast<uint8_t>(b)), &ch);
    const int64_t id = model.TokenToId(ch);
    model.byte_ids_[b] = id < 0 ? UINT32_MAX : static_cast<uint32_t>(id);
  }
  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity <<= 1;
  model.merge_table_.assign(capacity, MergeSlot{});
  model.merge_mask_ = capacity - 1;
  model.merge_filter_.assign((size_t{1} << kFilterBits) / 64, 0);
  std::string joined;
  bool monotone = true;  // new ids strictly increase with rank
  int64_t previous_merged = -1;
  for (uint32_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int64_t left = model.TokenToId(a);
    const int64_t right = model.TokenToId(b);
    joined.assign(a).append(b);
    const int64_t merged = model.TokenToId(joined);
    if (left < 0 || right < 0 || merged < 0) {
      return status::InvalidArgument("merge ", std::to_string(rank), " ('", a, "', '", b,
                                     "') names a token that is not in the vocabulary");
    }
    const uint64_t key = PairKey(static_cast<uint32_t>(left), static_cast<uint32_t>(right));
    const uint64_t bit = HashKey(key) >> (64 - kFilterBits);
    model.merge_filter_[bit >> 6] |= uint64_t{1} << (bit & 63);
    for (uint64_t slot = HashKey(key) & model.merge_mask_;;
         slot = (slot + 1) & model.merge_mask_) {
      MergeSlot& s = model.merge_table_[slot];
      if (s.key == key) break;  // a repeated merge keeps its first (lowest) rank
      if (s.key == kEmptyKey) {
        s = {key, rank, static_cast<uint32_t>(merged)};
        break;
      }
    }
    monotone = monotone && (rank == 0 || merged > previous_merged);
    previous_merged = merged;
  }
  if (monotone && model.id_to_token_.size() <= (size_t{1} << kCompactIdBits)) {
    model.compact_table_.assign(capacity, kEmptyKey);
    for (const MergeSlot& slot : model.merge_table_) {
      if (slot.key == kEmptyKey) continue;
      const uint64_t left = slot.key >> 32;
      const uint64_t right = slot.key & 0xFFFFFFFFu;
      for (uint64_t at = HashKey(slot.key) & model.merge_mask_;;
           at = (at + 1) & model.merge_mask_) {
        if (model.compact_table_[at] == kEmptyKey) {
          model.compact_table_[at] = left << (2 * kCompactIdBits) |
                                     right << kCompactIdBits | slot.new_id;
          break;
        }
      }
    }
    std::vector<MergeSlot>().swap(model.merge_table_);
  }
  model.byte_pairs_.assign(size_t{1} << 16, kNoBytePair);
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      if (model.byte_ids_[a] == UINT32_MAX || model.byte_ids_[b] == UINT32_MAX) continue;
      const auto [rank, new_id] = model.FindMerge(model.byte_ids_[a], model.byte_ids_[b]);
      if (rank != UINT32_MAX) model.byte_pairs_[a << 8 | b] = uint64_t{rank} << 32 | new_id;
    }
  }
  return model;
}

int64_t BpeModel::TokenToId(std::string_view token) const {
  auto it = token_to_id_.find(token);
  return it == token_to_id_.end() ? -1 : static_cast<int64_t>(it->second);
}

std::pair<uint32_t, uint32_t> BpeModel::FindMerge(uint32_t left, uint32_t right) const {
  const uint64_t key = PairKey(left, right);
  const uint64_t hash = HashKey(key);
  const uint64_t bit = hash >> (64 - kFilterBits);
  if ((merge_filter_[bit >> 6] >> (bit & 63) & 1) == 0) return {UINT32_MAX, 0};
  if (!compact_table_.empty()) {
    const uint64_t want = uint64_t{left} << kCompactIdBits | right;
    constexpr uint64_t kIdMask = (uint64_t{1} << kCompactIdBits) - 1;
    for (uint64_t slot = hash & merge_mask_;; slot = (slot + 1) & merge_mask_) {
      const uint64_t s = compact_table_[slot];
      if (s == kEmptyKey) return {UINT32_MAX, 0};
      if ((s >> kCompactIdBits) == want) {
        const auto new_id = static_cast<uint32_t>(s & kIdMask);
        return {new_id, new_id};  // the new id stands for the rank (same order)
      }
    }
  }
  for (uint64_t slot = hash & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const MergeSlot& s = merge_table_[slot];
    if (s.key == key) return {s.rank, s.new_id};
    if (s.key == kEmptyKey) return {UINT32_MAX, 0};
  }
}

std::pair<uint32_t, uint32_t> BpeModel::FirstMerge(const BpeScratch& scratch,
                                                   std::string_view bytes, size_t i) const {
  if (bytes.empty()) return FindMerge(scratch.symbols[i].id, scratch.symbols[i + 1].id);
  const uint64_t e = byte_pairs_[static_cast<uint8_t>(bytes[i]) << 8 |
                                 static_cast<uint8_t>(bytes[i + 1])];
  if (e == kNoBytePair) return {UINT32_MAX, 0};
  return {static_cast<uint32_t>(e >> 32), static_cast<uint32_t>(e)};
}

void BpeModel::MergeAll(BpeScratch* scratch, std::string_view bytes) const {
  auto& symbols = scratch->symbols;
  auto& heap = scratch->heap;
  heap.clear();
  // Each lookup in the big table is likely a cache miss. The first ones are
  // independent: prefetch the slot of every adjacent pair so their misses overlap
  // (byte pairs need none).
  const size_t n = symbols.size();
  if (bytes.empty()) {
    for (size_t i = 0; i + 1 < n; ++i) PrefetchPair(symbols[i].id, symbols[i + 1].id);
  }
  for (uint32_t i = 0; i + 1 < n; ++i) {
    const auto [rank, new_id] = FirstMerge(*scratch, bytes, i);
    if (rank != UINT32_MAX) heap.push_back({rank, i, new_id, symbols[i].id, symbols[i + 1].id});
  }
  std::make_heap(heap.begin(), heap.end(), Later{});
  auto push = [&](uint32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const uint32_t left = symbols[pos].id;
    const uint32_t right = symbols[next].id;
    const auto [rank, new_id] = FindMerge(left, right);
    if (rank == UINT32_MAX) return;
    heap.push_back({rank, pos, new_id, left, right});
    std::push_heap(heap.begin(), heap.end(), Later{});
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Later{});
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& left = symbols[top.pos];
    if (left.len == 0 || left.next < 0) continue;
    const int32_t right_pos = left.next;
    BpeScratch::Symbol& right = symbols[right_pos];
    // A stale entry: the pair at this position changed since it was queued. (Equal
    // ids mean the same merge: each pair has one rank.)
    if (left.id != top.left || right.id != top.right) continue;
    left.id = top.new_id;
    left.len += right.len;
    left.next = right.next;
    right.len = 0;
    if (right.next >= 0) symbols[right.next].prev = static_cast<int32_t>(top.pos);
    if (left.prev >= 0) push(static_cast<uint32_t>(left.prev));
    push(top.pos);
  }
}

void BpeModel::PrefetchPair(uint32_t left, uint32_t right) const {
  const uint64_t hash = HashKey(PairKey(left, right));
  const uint64_t bit = hash >> (64 - kFilterBits);
  if ((merge_filter_[bit >> 6] >> (bit & 63) & 1) == 0) return;
  if (!compact_table_.empty()) {
    __builtin_prefetch(compact_table_.data() + (hash & merge_mask_));
  } else {
    __builtin_prefetch(merge_table_.data() + (hash & merge_mask_));
  }
}

void BpeModel::MergeShort(BpeScratch* scratch, std::string_view bytes) const {
  auto& symbols = scratch->symbols;
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return;
  // rank[i], new_id[i]: the merge of the pair starting at live symbol i (UINT32_MAX:
  // none). The pair to merge next is the lowest rank, leftmost first, as the heap of
  // MergeAll orders them; a scan of at most 64 entries beats the heap's bookkeeping.
  uint32_t rank[BpeScratch::kMaxShortPiece];
  uint32_t new_id[BpeScratch::kMaxShortPiece];
  if (bytes.empty()) {
    for (int i = 0; i + 1 < n; ++i) PrefetchPair(symbols[i].id, symbols[i + 1].id);
  }
  for (int i = 0; i + 1 < n; ++i) {
    std::tie(rank[i], new_id[i]) = FirstMerge(*scratch, bytes, static_cast<size_t>(i));
  }
  rank[n - 1] = UINT32_MAX;
  while (true) {
    int best = -1;
    uint32_t best_rank = UINT32_MAX;
    for (int i = 0; i >= 0; i = symbols[i].next) {  // symbol 0 is always live
      if (rank[i] < best_rank) {
        best_rank = rank[i];
        best = i;
      }
    }
    if (best < 0) return;
    BpeScratch::Symbol& left = symbols[best];
    BpeScratch::Symbol& right = symbols[left.next];
    left.id = new_id[best];
    left.len += right.len;
    left.next = right.next;
    right.len = 0;
    const int prev = left.prev;
    const int next = left.next;
    if (next >= 0) symbols[next].prev = best;
    // The two pairs the merge changed; their lookups overlap.
    if (prev >= 0) PrefetchPair(symbols[prev].id, left.id);
    if (next >= 0) PrefetchPair(left.id, symbols[next].id);
    if (prev >= 0) std::tie(rank[prev], new_id[prev]) = FindMerge(symbols[prev].id, left.id);
    if (next >= 0) {
      std::tie(rank[best], new_id[best]) = FindMerge(left.id, symbols[next].id);
    } else {
      rank[best] = UINT32_MAX;
    }
  }
}

void BpeModel::Encode(std::string_view piece, bool prefix_space, BpeScratch* scratch,
                      std::vector<int32_t>* ids, uint64_t hash) const {
  std::string_view key = piece;
  if (prefix_space) {
    scratch->key.assign(" ").append(piece);
    key = scratch->key;
  }
  if (key.empty()) return;
  if (ignore_merges_) {
    const int64_t id = TokenToId(BytesToVocabString(key));
    if (id >= 0) {
      ids->push_back(static_cast<int32_t>(id));
      return;
    }
  }
  const bool cacheable = key.size() < PieceCache::kMaxPieceBytes;
  if (prefix_space) hash = 0;  // the caller's hash is of the piece without the space
  if (cacheable) {
    if (hash == 0) hash = PieceCache::Hash(key);
    const uint32_t* cached;
    size_t n;
    if (scratch->cache.Find(key, hash, &cached, &n)) {
      ids->insert(ids->end(), cached, cached + n);
      return;
    }
  }
  auto& symbols = scratch->symbols;
  symbols.clear();
  for (char c : key) {
    const uint32_t id = byte_ids_[static_cast<uint8_t>(c)];
    // A byte without a vocabulary entry is dropped, as `tokenizers` does without an
    // unknown token (never the case for a byte-level vocabulary).
    if (id == UINT32_MAX) continue;
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, -1, 1});
    if (n > 0) symbols[n - 1].next = n;
  }
  // One symbol per byte (always, for a byte-level vocabulary): the first lookups can
  // use the byte-pair table.
  const std::string_view bytes = symbols.size() == key.size() ? key : std::string_view();
  if (symbols.size() <= std::min(scratch->short_piece_limit, BpeScratch::kMaxShortPiece)) {
    MergeShort(scratch, bytes);
  } else {
    MergeAll(scratch, bytes);
  }
  const size_t start = ids->size();
  for (const auto& symbol : symbols) {
    if (symbol.len != 0) ids->push_back(static_cast<int32_t>(symbol.id));
  }
  if (cacheable) scratch->cache.Insert(key, hash, ids->data() + start, ids->size() - start);
}

namespace {

// memcmp(a, b, n) == 0 without a library call for the short keys of the piece cache.
inline bool SameBytes(const char* a, const char* b, size_t n) {
  if (n >= 8) {
    uint64_t x, y;
    for (size_t i = 0; i + 8 <= n; i += 8) {
      std::memcpy(&x, a + i, 8);
      std::memcpy(&y, b + i, 8);
      if (x != y) return false;
    }
    std::memcpy(&x, a + n - 8, 8);  // the tail, overlapping
    std::memcpy(&y, b + n - 8, 8);
    return x == y;
  }
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

PieceCache::PieceCache() : slots_(kSlots) {}

uint64_t PieceCache::Hash(std::string_view piece) {
  return XXH3_64bits(piece.data(), piece.size());
}


bool PieceCache::Find(std::string_view piece, uint64_t hash, const uint32_t** ids,
                      size_t* n) {
  const uint32_t tag = Tag(hash);
  for (size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    const Slot& slot = slots_[i];
    if (slot.tag == 0) return false;
    if (slot.tag != tag) continue;
    uint32_t* entry = arena_.data() + slot.at;
    if ((entry[0] >> 16 & 0xFF) != piece.size() ||
        !SameBytes(reinterpret_cast<const char*>(entry + 1), piece.data(), piece.size())) {
      continue;
    }
    *ids = entry + 1 + (piece.size() + 3) / 4;
    *n = entry[0] & 0xFFFF;
    entry[0] |= kUsed;
    return true;
  }
}

void PieceCache::Insert(std::string_view piece, uint64_t hash, const int32_t* ids,
                        size_t n) {
  const size_t key_words = (piece.size() + 3) / 4;
  const size_t words = 1 + key_words + n;
  if (size_ >= kCapacity || arena_.size() + words > kArenaWords) {
    Sweep();
    if (size_ >= kCapacity / 2 || arena_.size() + words > kArenaWords / 2) {
      std::fill(slots_.begin(), slots_.end(), Slot{});
      arena_.clear();
      size_ = 0;
    }
  }
  const size_t at = arena_.size();
  Place(hash, static_cast<uint32_t>(at));
  arena_.resize(at + words, 0);
  arena_[at] = static_cast<uint32_t>(piece.size() << 16 | n);
  std::memcpy(arena_.data() + at + 1, piece.data(), piece.size());
  // n is 0 for a piece none of whose bytes is in the vocabulary (ids may then be null).
  if (n > 0) std::memcpy(arena_.data() + at + 1 + key_words, ids, n * sizeof(uint32_t));
  ++size_;
}

void PieceCache::Place(uint64_t hash, uint32_t at) {
  size_t i = hash & (kSlots - 1);
  while (slots_[i].tag != 0) i = (i + 1) & (kSlots - 1);
  slots_[i] = {Tag(hash), at};
}

void PieceCache::Sweep() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_t kept = 0, out = 0;
  for (size_t at = 0; at < arena_.size();) {
    const uint32_t head = arena_[at];
    const size_t key_bytes = head >> 16 & 0xFF;
    const size_t words = 1 + (key_bytes + 3) / 4 + (head & 0xFFFF);
    if ((head & kUsed) != 0) {
      // Moves towards the front only (out <= at): the words not yet read stay put.
      std::memmove(arena_.data() + out, arena_.data() + at, words * sizeof(uint32_t));
      arena_[out] = head & ~kUsed;
      Place(Hash(std::string_view(reinterpret_cast<const char*>(arena_.data() + out + 1),
                                  key_bytes)),
            static_cast<uint32_t>(out));
      out += words;
      ++kept;
    }
    at += words;
  }
  arena_.resize(out);
  size_ = kept;
}

}  // namespace stoker::text
