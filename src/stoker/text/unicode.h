// Unicode helpers for the tokenizer: UTF-8 stepping, the character classes the split
// patterns use (taken from Oniguruma itself, so they match the engine Hugging Face
// `tokenizers` runs), Unicode normalization and lossy UTF-8 decoding.
//
// Everything here is thread-safe: the class table is filled lazily, one block of 256
// code points at a time, with atomic publication.
#pragma once

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

// The classes of `cp` as Oniguruma (UTF-8, Ruby syntax) sees them.
uint16_t CharClasses(char32_t cp);

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
