// Unicode helpers for the tokenizer: UTF-8 stepping, the character classes the split
// patterns use (taken from Oniguruma itself, so they match the engine Hugging Face
// `tokenizers` runs), Unicode normalization and lossy UTF-8 decoding.
//
// Everything here is thread-safe: the class table is filled lazily, one block of 256
// code points at a time, with atomic publication.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "stoker/core/status.h"

namespace stoker::text {

// Decodes the code point starting at s[i] (s must be valid UTF-8) and returns its
// length in bytes through *len.
inline char32_t DecodeUtf8(std::string_view s, size_t i, int* len) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    *len = 2;
    return ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu);
  }
  if (b0 < 0xF0) {
    *len = 3;
    return ((b0 & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
           (static_cast<uint8_t>(s[i + 2]) & 0x3Fu);
  }
  *len = 4;
  return ((b0 & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
         ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) |
         (static_cast<uint8_t>(s[i + 3]) & 0x3Fu);
}

void AppendUtf8(char32_t cp, std::string* out);

// Bits of CharClasses().
enum CharClassBit : uint16_t {
  kLetter = 1 << 0,      // \p{L}
  kNumber = 1 << 1,      // \p{N}
  kSpace = 1 << 2,       // \s (Unicode White_Space)
  kUpperLike = 1 << 3,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  kLowerLike = 1 << 4,   // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
};

namespace detail {
inline constexpr char32_t kMaxCodePoint = 0x10FFFF;
inline constexpr int kClassBlockBits = 8;  // classes are computed 256 code points at a time
inline constexpr size_t kNumClassBlocks = (kMaxCodePoint >> kClassBlockBits) + 1;
// Block b holds the classes of code points b*256 .. b*256+255, or is null until first
// asked for.
extern std::atomic<const uint16_t*> g_class_blocks[kNumClassBlocks];
const uint16_t* FillClassBlock(size_t index);
}  // namespace detail

// The classes of `cp` as Oniguruma (UTF-8, Ruby syntax) sees them. Inline: the
// pre-tokenizers ask once per character.
inline uint16_t CharClasses(char32_t cp) {
  if (cp > detail::kMaxCodePoint) return 0;
  const size_t index = cp >> detail::kClassBlockBits;
  const uint16_t* block = detail::g_class_blocks[index].load(std::memory_order_acquire);
  if (block == nullptr) [[unlikely]] block = detail::FillClassBlock(index);
  return block[cp & ((1u << detail::kClassBlockBits) - 1)];
}

// True if `s` is valid UTF-8 (no surrogates, no overlongs).
bool IsValidUtf8(std::string_view s);

enum class NormalizationForm { kNone, kNFC, kNFD, kNFKC, kNFKD };

// Appends the normalization of `s` (valid UTF-8) to *out. NFC copies stretches of
// characters it cannot change and normalizes only around the others.
Status Normalize(NormalizationForm form, std::string_view s, std::string* out);
// The same, normalizing the whole text in one utf8proc call (the reference the
// shortcut is tested against).
Status NormalizeWholeText(NormalizationForm form, std::string_view s, std::string* out);

// Decodes bytes as UTF-8, replacing each maximal invalid subsequence by U+FFFD (the
// policy of Rust's String::from_utf8_lossy and Python's errors="replace").
std::string Utf8Lossy(std::string_view bytes);

}  // namespace stoker::text
